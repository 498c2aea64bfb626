package nest

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"

	pb "github.com/mother-chat/mother/proto/mother/v1"

	// The proto codec limitCodec wraps registers itself.
	_ "google.golang.org/grpc/encoding/proto"
)

// protoCodecName is the content-subtype of the proto codec.
const protoCodecName = "proto"

// limitCodec is the proto codec with one difference: a Session message
// received into a sessionMsg is decoded only if it is within the limit the
// sessionMsg carries. A bigger one is not decoded at all (no copy of its
// bytes is made), only its size is kept: the session then stops its chick
// for flooding. gRPC applies one size limit to every method of a server
// (MaxRecvMsgSize), and Generate needs a far larger one than an event.
type limitCodec struct{ encoding.CodecV2 }

// sessionMsg is a Session message as the nest receives it (recvSession).
type sessionMsg struct {
	limit int64
	// size is the message's length on the wire.
	size int64
	// req is the message, decoded if size <= limit.
	req *pb.SessionRequest
}

func (c limitCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(*sessionMsg); ok {
		m.size = int64(data.Len())
		if m.size > m.limit {
			return nil
		}
		return c.CodecV2.Unmarshal(data, m.req)
	}
	return c.CodecV2.Unmarshal(data, v)
}

func (c limitCodec) Name() string { return protoCodecName }

// recvSession receives the next message of a Session stream, decoded only
// if it is at most limit bytes (sessionMsg).
func recvSession(stream pb.ChickService_SessionServer, limit int64) (*sessionMsg, error) {
	m := &sessionMsg{limit: limit, req: new(pb.SessionRequest)}
	if err := stream.RecvMsg(m); err != nil {
		return nil, err
	}
	return m, nil
}

// byteQueue bounds the bytes waiting between a session's receiver and its
// writer. Its one acquirer waits while the bytes held and those it asks
// for would pass max; a message bigger than max alone still passes when
// nothing is held.
type byteQueue struct {
	mu    sync.Mutex
	used  int64
	max   int64
	freed chan struct{}
}

func newByteQueue(max int64) *byteQueue {
	return &byteQueue{max: max, freed: make(chan struct{}, 1)}
}

// acquire takes n bytes, waiting for room; an error if ctx ends first.
func (q *byteQueue) acquire(ctx context.Context, n int64) error {
	if n < 0 {
		return fmt.Errorf("byteQueue: acquire %d", n)
	}
	for {
		q.mu.Lock()
		if q.used == 0 || q.used+n <= q.max {
			q.used += n
			q.mu.Unlock()
			return nil
		}
		q.mu.Unlock()
		select {
		case <-q.freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// release gives back n bytes.
func (q *byteQueue) release(n int64) {
	if n == 0 {
		return
	}
	q.mu.Lock()
	q.used -= n
	q.mu.Unlock()
	select {
	case q.freed <- struct{}{}:
	default:
	}
}
