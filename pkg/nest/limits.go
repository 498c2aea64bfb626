package nest

import (
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
// (MaxRecvMsgSize), and Generate needs a far larger one than an event. A
// Generate request is received into a sizedMsg, which keeps its length
// (callStream).
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
	if m, ok := v.(*sizedMsg); ok {
		m.size = int64(data.Len())
		return c.CodecV2.Unmarshal(data, m.msg)
	}
	return c.CodecV2.Unmarshal(data, v)
}

func (c limitCodec) Name() string { return protoCodecName }

// recvSession receives the next message of a Session stream, decoded only
// if it is at most limit bytes (sessionMsg). A message longer than gRPC
// reads at all comes back undecoded, with its length.
func recvSession(stream pb.ChickService_SessionServer, limit int64) (*sessionMsg, error) {
	m := &sessionMsg{limit: limit, req: new(pb.SessionRequest)}
	if err := stream.RecvMsg(m); err != nil {
		// Longer than any message the nest reads: gRPC refused it from
		// its length, unread. It is an event over the limit.
		if n, ok := tooLarge(err); ok {
			m.size = max(n, limit+1)
			return m, nil
		}
		return nil, err
	}
	return m, nil
}
