package nest_test

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// The tests here play a chick's own code holding its token (as a program
// its bash ran could): each floods Mother one way, over real gRPC on a
// real socket, and the chick must be stopped for flooding with its stored
// events intact; a chick at a normal pace is the control.

// floodSession opens a Session for chick id and reads the hello's ack.
func floodSession(t *testing.T, f *fixture, id, tok string) pb.ChickService_SessionClient {
	t.Helper()
	s, err := f.client.Session(wire.Credentials(t.Context(), id, tok))
	must(t, err)
	must(t, s.Send(&pb.SessionRequest{Kind: &pb.SessionRequest_Hello{Hello: &pb.SessionHello{}}}))
	if m, err := s.Recv(); err != nil || m.GetAck() == nil {
		t.Fatalf("hello ack: %v %v", m, err)
	}
	return s
}

// toolEnd is a tool_end event whose result has n bytes.
func toolEnd(seq uint64, n int) *pb.SessionRequest {
	ev := agent.Event{Type: agent.EventToolEnd, Time: time.Now(), ToolCallID: "call", ToolName: "bash", Label: "flood", Result: strings.Repeat("x", n)}
	return &pb.SessionRequest{Kind: &pb.SessionRequest_Event{Event: wire.EventToProto(seq, ev)}}
}

// sendUntilRefused sends events made by ev for seq 1..n, stopping at the
// first send the stream refuses.
func sendUntilRefused(s pb.ChickService_SessionClient, n int, ev func(seq uint64) *pb.SessionRequest) (sent int) {
	for seq := uint64(1); seq <= uint64(n); seq++ {
		if err := s.Send(ev(seq)); err != nil {
			break
		}
		sent++
	}
	return sent
}

// sessionEnd reads the stream to its end: the cancellations Mother sent
// and the status it ended with.
func sessionEnd(t *testing.T, s pb.ChickService_SessionClient) (cancels []string, end error) {
	t.Helper()
	for {
		m, err := s.Recv()
		if err != nil {
			return cancels, err
		}
		if c := m.GetCancel(); c != nil {
			cancels = append(cancels, c.GetMessage())
		}
	}
}

// endedFlooding waits for chick id to end and checks that it ended for
// flooding with an outcome that starts with want.
func endedFlooding(t *testing.T, f *fixture, id, want string) hatchery.Info {
	t.Helper()
	ended, err := f.h.Ended(id)
	must(t, err)
	select {
	case <-ended:
	case <-time.After(60 * time.Second):
		t.Fatalf("chick %s did not end after flooding: %s", id, f.h.State(id))
	}
	in, err := f.h.Get(id)
	must(t, err)
	if in.Reason != hatchery.ReasonFlooding || !strings.HasPrefix(in.Outcome, want) {
		t.Fatalf("chick ended %s (%s): %q; want reason flooding and an outcome starting %q", in.State, in.Reason, in.Outcome, want)
	}
	return in
}

// storedEvents parses the chick's events.jsonl: every line one event, in
// sequence from 1. It returns how many and the file's size.
func storedEvents(t *testing.T, f *fixture, id string) (n int, size int64) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, id, "events.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0
	}
	must(t, err)
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Fatalf("events.jsonl ends in a torn line: %q", b[max(0, len(b)-40):])
	}
	for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		var v struct {
			Seq   uint64      `json:"seq"`
			Event agent.Event `json:"event"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("events.jsonl line %d does not parse: %v", i+1, err)
		}
		if v.Seq != uint64(i+1) {
			t.Fatalf("events.jsonl line %d holds seq %d", i+1, v.Seq)
		}
		n++
	}
	return n, int64(len(b))
}

// refusedAgain checks that a new session of a chick stopped for flooding
// is refused.
func refusedAgain(t *testing.T, f *fixture, id, tok string) {
	t.Helper()
	s, err := f.client.Session(wire.Credentials(t.Context(), id, tok))
	must(t, err)
	_ = s.Send(&pb.SessionRequest{Kind: &pb.SessionRequest_Hello{Hello: &pb.SessionHello{}}})
	_, err = s.Recv()
	if status.Code(err) != codes.ResourceExhausted && status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a new session of a chick stopped for flooding: %v; want ResourceExhausted (or Unauthenticated once it has ended)", err)
	}
}

func TestOversizeEventStopsTheChickForFlooding(t *testing.T) {
	f := newFixture(t, 0)
	id, tok := f.spawn(t)
	s := floodSession(t, f, id, tok)
	// Two ordinary events first: they stay stored.
	for seq := uint64(1); seq <= 2; seq++ {
		must(t, s.Send(toolEnd(seq, 100)))
	}
	for {
		m, err := s.Recv()
		must(t, err)
		if m.GetAck().GetSeq() == 2 {
			break
		}
	}
	// The attack: a 2 MiB tool_end, which gRPC reads (within
	// chicks.calls.maxRequestBytes) and the codec does not decode.
	_ = s.Send(toolEnd(3, 2<<20))
	cancels, end := sessionEnd(t, s)
	const want = "flooding: an event of 2 MiB (limit 1 MiB)"
	if status.Code(end) != codes.ResourceExhausted || !strings.Contains(status.Convert(end).Message(), want) {
		t.Fatalf("the session ended with %v; want ResourceExhausted saying %q", end, want)
	}
	if len(cancels) == 0 || !strings.HasPrefix(cancels[len(cancels)-1], want) {
		t.Fatalf("cancellations sent to the chick: %q; want one saying %q", cancels, want)
	}
	refusedAgain(t, f, id, tok)
	endedFlooding(t, f, id, want)
	if n, _ := storedEvents(t, f, id); n != 2 {
		t.Fatalf("%d events stored; want the 2 sent before the flood", n)
	}
}

// An event longer than any message the nest reads (the 16 MiB of the one
// that filled the disk) is refused by gRPC from its length, unread, and
// its chick is stopped for flooding all the same.
func TestEventLongerThanTheNestReadsStopsTheChickForFlooding(t *testing.T) {
	f := newFixture(t, 0)
	id, tok := f.spawn(t)
	s := floodSession(t, f, id, tok)
	must(t, s.Send(toolEnd(1, 100)))
	for {
		m, err := s.Recv()
		must(t, err)
		if m.GetAck().GetSeq() == 1 {
			break
		}
	}
	_ = s.Send(toolEnd(2, 16<<20))
	_, end := sessionEnd(t, s)
	if status.Code(end) != codes.ResourceExhausted {
		t.Fatalf("the session ended with %v; want ResourceExhausted", end)
	}
	refusedAgain(t, f, id, tok)
	endedFlooding(t, f, id, "flooding: an event of 16 MiB (limit 1 MiB)")
	if n, _ := storedEvents(t, f, id); n != 1 {
		t.Fatalf("%d events stored; want the one sent before the flood", n)
	}
}

func TestEventsTooFastStopTheChickForFlooding(t *testing.T) {
	f := newFixtureConfig(t, 0, func(cfg *config.Config) {
		cfg.Chicks.Events.PerSecond = 10
		cfg.Chicks.Events.Burst = 50
	})
	id, tok := f.spawn(t)
	s := floodSession(t, f, id, tok)
	// 2,000 events as fast as the stream takes them: a burst of 50 and
	// 10 a second would need more than three minutes for them.
	sent := sendUntilRefused(s, 2000, func(seq uint64) *pb.SessionRequest { return toolEnd(seq, 10) })
	_, end := sessionEnd(t, s)
	const want = "flooding: more than 10 events a second (burst 50)"
	if status.Code(end) != codes.ResourceExhausted || !strings.Contains(status.Convert(end).Message(), want) {
		t.Fatalf("after %d events the session ended with %v; want ResourceExhausted saying %q", sent, end, want)
	}
	endedFlooding(t, f, id, want)
	n, _ := storedEvents(t, f, id)
	if n < 50 || n >= 2000 {
		t.Fatalf("%d events stored; want the burst (50) and what the rate let through, not all 2000", n)
	}
	t.Logf("%d events sent, %d stored before the chick was stopped", sent, n)
}

func TestStoredEventsStopAtTheirCap(t *testing.T) {
	const capBytes = 64 << 10
	f := newFixtureConfig(t, 0, func(cfg *config.Config) {
		cfg.Chicks.Events.MaxEventBytes = "16k"
		cfg.Chicks.Events.MaxBytes = "64k"
	})
	id, tok := f.spawn(t)
	s := floodSession(t, f, id, tok)
	// Events of 10 KiB, each within the size limit, until the cap.
	sendUntilRefused(s, 50, func(seq uint64) *pb.SessionRequest { return toolEnd(seq, 10<<10) })
	_, end := sessionEnd(t, s)
	const want = "flooding: its events passed the 64 KiB stored for a chick"
	if status.Code(end) != codes.ResourceExhausted || !strings.Contains(status.Convert(end).Message(), want) {
		t.Fatalf("the session ended with %v; want ResourceExhausted saying %q", end, want)
	}
	endedFlooding(t, f, id, want)
	n, size := storedEvents(t, f, id)
	if size > capBytes || n == 0 {
		t.Fatalf("events.jsonl holds %d events in %d bytes; want some, and at most %d bytes", n, size, capBytes)
	}
	// The cap is filled as far as whole events go: one more would pass it.
	if size+10<<10 <= capBytes {
		t.Fatalf("events.jsonl stopped at %d bytes, more than an event short of the %d cap", size, capBytes)
	}
	refusedAgain(t, f, id, tok)
}

// TestAChickAtANormalPaceIsNotStopped is the control: with the default
// bounds, a chick's run at its usual pace and sizes (deltas, tool calls
// with results up to the tools' 50 KiB cut, a large write, a resend burst)
// is stored whole and the chick runs on.
func TestAChickAtANormalPaceIsNotStopped(t *testing.T) {
	f := newFixture(t, 0)
	id, tok := f.spawn(t)
	s := floodSession(t, f, id, tok)
	var evs []*pb.SessionRequest
	seq := uint64(0)
	next := func(ev agent.Event) {
		seq++
		ev.Time = time.Now()
		evs = append(evs, &pb.SessionRequest{Kind: &pb.SessionRequest_Event{Event: wire.EventToProto(seq, ev)}})
	}
	for turn := range 40 {
		next(agent.Event{Type: agent.EventMessageDelta, Text: "thinking about it"})
		next(agent.Event{Type: agent.EventMessageEnd, Text: "thinking about it, then a tool"})
		for call := range 5 {
			args := json.RawMessage(`{"command":"cat big.txt","label":"reading"}`)
			next(agent.Event{Type: agent.EventToolStart, ToolCallID: "c", ToolName: "bash", Label: "reading", Args: args})
			next(agent.Event{Type: agent.EventToolEnd, ToolCallID: "c", ToolName: "bash", Label: "reading", Args: args, Result: strings.Repeat("y", 50<<10+turn+call)})
		}
	}
	// A write of a large file in one call: its arguments are one long
	// model answer (600 KiB, more than 128k tokens of output).
	big, _ := json.Marshal(map[string]string{"path": "out.txt", "content": strings.Repeat("z", 600<<10)})
	next(agent.Event{Type: agent.EventToolStart, ToolCallID: "w", ToolName: "write", Label: "writing", Args: big})
	next(agent.Event{Type: agent.EventToolEnd, ToolCallID: "w", ToolName: "write", Label: "writing", Args: big, Result: "wrote 614400 bytes"})
	// Sent at once, the way a chick resends what was not acknowledged
	// after a reconnect.
	for _, m := range evs {
		must(t, s.Send(m))
	}
	for {
		m, err := s.Recv()
		if err != nil {
			t.Fatalf("a chick at a normal pace: %v", err)
		}
		if m.GetCancel() != nil {
			t.Fatalf("a chick at a normal pace was cancelled: %s", m.GetCancel().GetMessage())
		}
		if m.GetAck().GetSeq() == seq {
			break
		}
	}
	must(t, s.CloseSend())
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("session end: %v; want a clean close", err)
	}
	if st := f.h.State(id); st != hatchery.StateRunning {
		t.Fatalf("the chick is %s; want it running", st)
	}
	if n, _ := storedEvents(t, f, id); n != int(seq) {
		t.Fatalf("%d events stored, want %d", n, seq)
	}
}

// TestFloodOfMaxSizeEventsHoldsNoMemory: the in-process bound the nest
// relies on. Events of the largest size allowed, sent as fast as the
// stream takes them, are stored and released: the heap after them (after
// a GC) is within a few MiB of the heap before, however many were sent,
// because nothing keeps an event once it is written (the session's queue
// is bounded in bytes, the batch buffer is not kept). Not parallel: it
// reads the process's heap.
func TestFloodOfMaxSizeEventsHoldsNoMemory(t *testing.T) {
	f := newFixture(t, 0)
	id, tok := f.spawn(t)
	s := floodSession(t, f, id, tok)
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	const n = 48 // 48 MiB, under the 64 MiB stored cap
	// The largest event allowed: 1 MiB on the wire, the message's
	// framing included.
	ev := func(seq uint64) *pb.SessionRequest { return toolEnd(seq, 1<<20-200) }
	for seq := uint64(1); seq <= n; seq++ {
		must(t, s.Send(ev(seq)))
	}
	for {
		m, err := s.Recv()
		must(t, err)
		if m.GetCancel() != nil {
			t.Fatalf("cancelled: %s", m.GetCancel().GetMessage())
		}
		if m.GetAck().GetSeq() == n {
			break
		}
	}
	after := heap()
	grew := int64(after) - int64(before)
	t.Logf("heap %d KiB before, %d KiB after %d events of 1 MiB", before>>10, after>>10, n)
	if grew > 8<<20 {
		t.Fatalf("the heap grew by %d KiB over %d MiB of events; want it flat (under 8 MiB)", grew>>10, n)
	}
	must(t, s.CloseSend())
}
