package nest

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// CallLimits bound the model calls chicks send (config chicks.calls). A
// zero field takes its default.
type CallLimits struct {
	// MaxRequestBytes caps one Generate request as it is sent: gRPC
	// refuses a longer message from its length, before reading it.
	MaxRequestBytes int64
	// MaxImages and MaxImageBytes cap the images of one call.
	MaxImages     int
	MaxImageBytes int64
	// MaxHeldBytes caps the bytes of the requests of all chicks being
	// read or in flight.
	MaxHeldBytes int64
	// MaxPerChick caps one chick's calls in flight, counted before they
	// are read (chicks.maxModelCallsPerChick).
	MaxPerChick int
}

// The defaults of CallLimits (config's DefaultCall*).
const (
	defaultCallRequestBytes = 3 << 20
	defaultCallImages       = 4
	defaultCallImageBytes   = 2 << 20
	defaultCallHeldBytes    = 4 << 20
	defaultCallsPerChick    = 2
)

func (l CallLimits) orDefaults() CallLimits {
	if l.MaxRequestBytes <= 0 {
		l.MaxRequestBytes = defaultCallRequestBytes
	}
	if l.MaxImages <= 0 {
		l.MaxImages = defaultCallImages
	}
	if l.MaxImageBytes <= 0 {
		l.MaxImageBytes = defaultCallImageBytes
	}
	if l.MaxHeldBytes <= 0 {
		l.MaxHeldBytes = defaultCallHeldBytes
	}
	l.MaxHeldBytes = max(l.MaxHeldBytes, l.MaxRequestBytes)
	if l.MaxPerChick <= 0 {
		l.MaxPerChick = defaultCallsPerChick
	}
	return l
}

// callGate holds model calls to their bounds before they are read. A
// call is authenticated first (the interceptor), then counted against its
// chick, then it waits for MaxRequestBytes of room in held (the most it
// can be); once read, it keeps only its real size until it ends. So the
// requests Mother holds, read or being read, never pass MaxHeldBytes
// however many chicks send at once, and a call waits unread (its bytes
// held back by the transport's flow control) while there is no room.
type callGate struct {
	limits CallLimits
	held   *semaphore.Weighted

	mu   sync.Mutex
	open map[string]int // chick id -> its calls admitted and not ended
}

func newCallGate(l CallLimits) *callGate {
	l = l.orDefaults()
	return &callGate{limits: l, held: semaphore.NewWeighted(l.MaxHeldBytes), open: map[string]int{}}
}

// heldCall is one admitted call and the room it holds.
type heldCall struct {
	g      *callGate
	id     string
	weight int64
	ended  bool
}

// admit counts a call of chick id and waits for room to read it.
func (g *callGate) admit(ctx context.Context, id string) (*heldCall, error) {
	g.mu.Lock()
	if g.open[id] >= g.limits.MaxPerChick {
		g.mu.Unlock()
		// Transient on the wire (wire.ModelErrorFromStatus): the chick's
		// agent retries it.
		return nil, status.Errorf(codes.Aborted, "transient: the chick has %d model calls in flight already, the most it may have (chicks.maxModelCallsPerChick)", g.limits.MaxPerChick)
	}
	g.open[id]++
	g.mu.Unlock()
	if err := g.held.Acquire(ctx, g.limits.MaxRequestBytes); err != nil {
		g.end(id)
		return nil, status.FromContextError(err).Err()
	}
	return &heldCall{g: g, id: id, weight: g.limits.MaxRequestBytes}, nil
}

// read keeps only the call's real size, once it is read.
func (c *heldCall) read(size int64) {
	if size < c.weight {
		c.g.held.Release(c.weight - size)
		c.weight = size
	}
}

// done gives the call's room back, once: when its answer is sent (the
// chick's next call may follow at once) or when the call returns.
func (c *heldCall) done() {
	if c.ended {
		return
	}
	c.ended = true
	c.g.held.Release(c.weight)
	c.weight = 0
	c.g.end(c.id)
}

func (g *callGate) end(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open[id] <= 1 {
		delete(g.open, id)
		return
	}
	g.open[id]--
}

// sizedMsg is a message received with its length on the wire
// (limitCodec).
type sizedMsg struct {
	msg  any
	size int64
}

// callStream is a Generate stream admitted by the callGate: its request
// is received with its size, and a request refused by gRPC for its
// length is logged.
type callStream struct {
	grpc.ServerStream
	call   *heldCall
	limit  int64
	logger *slog.Logger
}

func (c *callStream) RecvMsg(m any) error {
	sm := &sizedMsg{msg: m}
	if err := c.ServerStream.RecvMsg(sm); err != nil {
		// gRPC has told the chick already, in its own words, which the
		// chick reads as the nest's (wire.ModelErrorFromStatus).
		if size, ok := tooLarge(err); ok {
			c.logger.Warn("model call refused unread", "chick", chickOf(c.Context()), "bytes", size,
				"why", fmt.Sprintf("it is %s, more than the %s a call may have (chicks.calls.maxRequestBytes)", sizeText(size), sizeText(c.limit)))
		}
		return err
	}
	c.call.read(sm.size)
	return nil
}

// SendMsg gives the call's room back before its last message, the done:
// the chick sends its next call as soon as it reads it, and that call
// must find the room free.
func (c *callStream) SendMsg(m any) error {
	if r, ok := m.(*pb.GenerateResponse); ok && r.GetDone() != nil {
		c.call.done()
	}
	return c.ServerStream.SendMsg(m)
}

// grpcTooLarge is gRPC's refusal of a message longer than
// MaxRecvMsgSize, which it gives from the message's length, unread.
var grpcTooLarge = regexp.MustCompile(`received message larger than max \((\d+) vs\. \d+\)`)

// tooLarge tells whether err is gRPC's refusal of a message for its
// length, and the length (0 if gRPC did not say).
func tooLarge(err error) (int64, bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "larger than max") {
		return 0, false
	}
	if m := grpcTooLarge.FindStringSubmatch(st.Message()); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return n, true
	}
	return 0, true
}

// sizeText writes a size for a person: "5.0 MiB", "812 KiB", "300 bytes".
func sizeText(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// checkImages refuses a request whose images pass the call's bounds.
func (l CallLimits) checkImages(req *pb.GenerateRequest) error {
	var n int
	var size int64
	for _, m := range req.GetMessages() {
		for _, img := range m.GetImages() {
			n++
			size += int64(len(img.GetData()))
		}
	}
	switch {
	case n > l.MaxImages:
		return status.Error(codes.InvalidArgument, fmt.Sprintf("model call refused: it carries %d images, more than the %d a call may have (chicks.calls.maxImages)", n, l.MaxImages))
	case size > l.MaxImageBytes:
		return status.Error(codes.InvalidArgument, fmt.Sprintf("model call refused: its images are %s, more than the %s a call may have (chicks.calls.maxImageBytes)", sizeText(size), sizeText(l.MaxImageBytes)))
	}
	return nil
}

// admitGenerate runs a Generate call of the authenticated stream ss
// through the callGate: counted, room waited for, read with its size, its
// room given back when it ends.
func (s *Server) admitGenerate(srv any, ss grpc.ServerStream, h grpc.StreamHandler) error {
	id := chickOf(ss.Context())
	call, err := s.calls.admit(ss.Context(), id)
	if err != nil {
		if status.Code(err) != codes.Canceled {
			s.logger.Warn("model call refused", "chick", id, "err", err)
		}
		return err
	}
	defer call.done()
	return h(srv, &callStream{ServerStream: ss, call: call, limit: s.calls.limits.MaxRequestBytes, logger: s.logger})
}
