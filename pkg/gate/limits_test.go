package gate_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/gate"
	"github.com/mother-chat/mother/pkg/gate/gatetest"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// sessionEcho is a ChickService whose Session answers each hello with an
// ack of the same number: a stream that passes bytes both ways.
type sessionEcho struct {
	pb.UnimplementedChickServiceServer
}

func (sessionEcho) Session(s grpc.BidiStreamingServer[pb.SessionRequest, pb.SessionResponse]) error {
	for {
		req, err := s.Recv()
		if err != nil {
			return nil
		}
		n := req.GetHello().GetLastSentSeq()
		if err := s.Send(&pb.SessionResponse{Kind: &pb.SessionResponse_Ack{Ack: &pb.Ack{Seq: n}}}); err != nil {
			return err
		}
	}
}

// startWithChicks runs a gate whose Mother serves sessionEcho.
func startWithChicks(t *testing.T, mod func(*gate.Options)) *env {
	t.Helper()
	e := &env{m: gatetest.Start(t, sessionEcho{}), dir: socketDir(t)}
	opts := gate.Options{Dir: e.dir, Upstream: e.m.Addr, CAPEM: e.m.CAPEM, HostName: gatetest.Host, Token: gatetest.Token}
	if mod != nil {
		mod(&opts)
	}
	e.stop = e.run(t, opts)
	return e
}

// chickStream is a chick's gRPC connection through nest.sock, as pkg/chick
// dials it, with a Session stream open on it.
type chickStream struct {
	conn   *grpc.ClientConn
	stream grpc.BidiStreamingClient[pb.SessionRequest, pb.SessionResponse]
	seq    uint64
}

func (e *env) chickStream(t *testing.T, id string) *chickStream {
	t.Helper()
	creds, err := wire.ClientTLS(e.m.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(e.dir, wire.GateNestSocket)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(creds), grpc.WithContextDialer(wire.GateDialer(sock, id, keyOf(id))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := pb.NewChickServiceClient(conn).Session(ctx, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("chick %s: Session through nest.sock: %v", id, err)
	}
	cs := &chickStream{conn: conn, stream: stream}
	cs.roundTrip(t, "opening")
	return cs
}

// roundTrip sends a hello and waits (30s at most) for its ack.
func (cs *chickStream) roundTrip(t *testing.T, when string) {
	t.Helper()
	cs.seq++
	done := make(chan error, 1)
	go func() {
		if err := cs.stream.Send(&pb.SessionRequest{Kind: &pb.SessionRequest_Hello{Hello: &pb.SessionHello{LastSentSeq: cs.seq}}}); err != nil {
			done <- err
			return
		}
		resp, err := cs.stream.Recv()
		if err == nil && resp.GetAck().GetSeq() != cs.seq {
			err = errors.New("ack of another hello: " + resp.String())
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stream %s: %v", when, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("stream %s: no ack in 30s", when)
	}
}

// dialRaw opens sock and writes data (a preface, or not).
func (e *env) dialRaw(t *testing.T, sock, data string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", filepath.Join(e.dir, sock))
	if err != nil {
		t.Fatal(err)
	}
	if data != "" {
		if _, err := io.WriteString(c, data); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// closedByGate reports whether the gate has closed c (its read ends) as
// far as can be seen now; it never waits more than a moment.
func closedByGate(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(time.Millisecond))
	var b [512]byte
	for {
		_, err := c.Read(b[:])
		if err == nil {
			continue // an answer (a proxy's 429): read on to its end
		}
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}
}

// waitOpen polls conns until at most want are still open (the gate closes
// the others), failing after a minute; it returns those still open.
func waitOpen(t *testing.T, conns []net.Conn, want int) []net.Conn {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var open []net.Conn
		for _, c := range conns {
			if closedByGate(c) {
				c.Close()
			} else {
				open = append(open, c)
			}
		}
		conns = open
		if len(conns) <= want {
			return conns
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open, want %d", len(conns), want)
		}
	}
}

func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestNestConnectionStorm: one chick opens 3,000 connections to nest.sock,
// each with its good preface, and holds them; the gate keeps
// MaxNestConnsPerChick of them and closes the rest, tells Mother once,
// its goroutines and heap stay bounded, and another chick's established
// stream passes bytes all through the storm while its new connection is
// accepted.
func TestNestConnectionStorm(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	e := startWithChicks(t, func(o *gate.Options) { o.Clock = fake })
	b := e.chickStream(t, "c-b")
	goroutines, heap := runtime.NumGoroutine(), heapInuse()

	const storm = 3000
	preface := wire.GatePrefaceLine("c-a", keyOf("c-a"))
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := range storm {
		conns = append(conns, e.dialRaw(t, wire.GateNestSocket, preface))
		if i%500 == 499 {
			// Mid-storm: the other chick's stream still passes bytes, and
			// it can open a new connection.
			b.roundTrip(t, "during the storm")
			if i == 1499 {
				e.chickStream(t, "c-b").roundTrip(t, "on a new connection during the storm")
			}
		}
	}
	conns = waitOpen(t, conns, gate.DefaultNestConnsPerChick)
	if len(conns) != gate.DefaultNestConnsPerChick {
		t.Errorf("%d of the storm's connections kept, want %d", len(conns), gate.DefaultNestConnsPerChick)
	}
	b.roundTrip(t, "after the storm")
	e.chickStream(t, "c-b").roundTrip(t, "on a new connection after the storm")

	// Mother saw c-b's two connections (and a third, ended), the gate's
	// own, and c-a's kept ones: not the storm.
	if n := e.m.Accepted(); n > int64(4+gate.DefaultNestConnsPerChick) {
		t.Errorf("Mother accepted %d connections from the gate, want at most %d", n, 4+gate.DefaultNestConnsPerChick)
	}
	if d := runtime.NumGoroutine() - goroutines; d > 100 {
		t.Errorf("%d more goroutines after the storm, want a bounded few", d)
	}
	if d := int64(heapInuse()) - int64(heap); d > 8<<20 {
		t.Errorf("heap grew by %d bytes in the storm, want under 8 MiB", d)
	}

	r := e.m.NextReport(t)
	if r.GetChickId() != "c-a" || r.GetKey() != keyOf("c-a") || r.GetHost() != "nest.sock" || r.GetOutcome() != pb.EgressOutcome_EGRESS_OUTCOME_REFUSED ||
		r.GetReason() != "connection limit, 4 open" {
		t.Errorf("report %v, want c-a's nest.sock refused at the connection limit", r)
	}
	// Once a window: the next report is the next window's.
	fake.Advance(time.Minute)
	conns = append(conns, e.dialRaw(t, wire.GateNestSocket, preface))
	if r := e.m.NextReport(t); r.GetChickId() != "c-a" || r.GetHost() != "nest.sock" || r.GetReason() != "connection limit, 4 open" {
		t.Errorf("report %v, want the next window's refusal", r)
	}
}

// TestProxyConnectionLimit: a chick holding MaxProxyConnsPerChick proxy
// connections is answered 429 for more, and another chick's CONNECT still
// goes through.
func TestProxyConnectionLimit(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	e := start(t, func(o *gate.Options) { o.Clock = fake; o.MaxProxyConnsPerChick = 5 })
	srv := startEcho(t)
	e.allow(&pb.AuthorizeResponse{Trusted: []string{"127.0.0.1"}})
	// Preface, no request: each holds its slot until the deadline.
	var held []net.Conn
	for range 12 {
		held = append(held, e.dialRaw(t, wire.GateProxySocket, wire.GatePrefaceLine("c-9", keyOf("c-9"))))
	}
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	// Those over the limit are answered, then closed.
	if kept := waitOpen(t, held, 5); len(kept) != 5 {
		t.Errorf("%d kept, want 5", len(kept))
	}
	// c-1 is another chick: its CONNECT goes through.
	c, br, code, body := e.connect(t, srv.addr)
	if code != http.StatusOK {
		t.Fatalf("the other chick's CONNECT: %d %q", code, body)
	}
	roundTrip(t, c, br, "still here\n")
	r := e.m.NextReport(t)
	if r.GetChickId() != "c-9" || r.GetHost() != "proxy.sock" || r.GetOutcome() != pb.EgressOutcome_EGRESS_OUTCOME_REFUSED || r.GetReason() != "connection limit, 5 open" {
		t.Errorf("report %v", r)
	}
}

// TestProxyRefusalAnswer: a chick with its one proxy connection open
// (a tunnel) is answered 429, with why, for another.
func TestProxyRefusalAnswer(t *testing.T) {
	t.Parallel()
	e := start(t, func(o *gate.Options) { o.MaxProxyConnsPerChick = 1 })
	srv := startEcho(t)
	e.allow(&pb.AuthorizeResponse{Trusted: []string{"127.0.0.1"}})
	tunnel, br, code, body := e.connect(t, srv.addr)
	if code != http.StatusOK {
		t.Fatalf("CONNECT: %d %q", code, body)
	}
	_, _, code, body = e.connect(t, srv.addr)
	if code != http.StatusTooManyRequests || body != "blocked: proxy.sock (connection limit, 1 open)\n" {
		t.Errorf("a second CONNECT: %d %q, want 429 and the limit", code, body)
	}
	roundTrip(t, tunnel, br, "the first still works\n")
	tunnel.Close()
	// Its slot is free again once the gate has seen it close.
	for i := 0; ; i++ {
		c, br, code, _ := e.connect(t, srv.addr)
		if code == http.StatusOK {
			roundTrip(t, c, br, "a new one\n")
			break
		}
		c.Close()
		if i > 1000 {
			t.Fatalf("no slot after the first tunnel closed: %d", code)
		}
	}
}

// TestNestBadPreface: connections to nest.sock without a good preface are
// closed and never reach Mother.
func TestNestBadPreface(t *testing.T) {
	t.Parallel()
	e := startWithChicks(t, nil)
	for _, tc := range []struct{ name, data string }{
		{"TLS first (no preface)", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"},
		{"no key", "MOTHER-GATE/1 c-1\n"},
		{"made-up key", "MOTHER-GATE/1 c-1 " + strings.Repeat("0", 64) + "\n"},
		{"another chick's key", wire.GatePrefaceLine("c-1", keyOf("c-2"))},
		{"another gate's key", wire.GatePrefaceLine("c-1", wire.ChickGateKey("other-gate-token", "c-1"))},
		{"too long", "MOTHER-GATE/1 c-1 " + strings.Repeat("k", 5000) + "\n"},
	} {
		c := e.dialRaw(t, wire.GateNestSocket, tc.data)
		c.(*net.UnixConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if b, err := io.ReadAll(c); len(b) != 0 || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("%s: read %q, %v; want the connection closed", tc.name, b, err)
		}
		c.Close()
	}
	// A chick of network "none" has a nest-only key: good here.
	sock := filepath.Join(e.dir, wire.GateNestSocket)
	creds, err := wire.ClientTLS(e.m.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(wire.GateDialer(sock, "c-n", wire.ChickNestKey(gatetest.Token, "c-n"))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	st, err := pb.NewChickServiceClient(conn).Session(ctx, grpc.WaitForReady(true))
	if err == nil {
		err = st.Send(&pb.SessionRequest{Kind: &pb.SessionRequest_Hello{Hello: &pb.SessionHello{LastSentSeq: 7}}})
	}
	if err == nil {
		var resp *pb.SessionResponse
		if resp, err = st.Recv(); err == nil && resp.GetAck().GetSeq() != 7 {
			t.Errorf("ack %v", resp)
		}
	}
	if err != nil {
		t.Errorf("a nest-only key on nest.sock: %v", err)
	}
	// Only that one reached Mother (and nothing asked her about the rest).
	if n := e.m.Accepted(); n != 1 {
		t.Errorf("Mother accepted %d connections, want 1", n)
	}
}

// TestPendingPool: connections that never name their chick fill the
// pending pool, each new one pushing out the oldest, so a chick that
// names itself at once still gets in; the rest are closed at the preface
// deadline.
func TestPendingPool(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	const pool = 8
	e := startWithChicks(t, func(o *gate.Options) { o.Clock = fake; o.MaxPending = pool; o.PrefaceTimeout = 5 * time.Second })
	var loris []net.Conn
	for range 100 {
		// Half a preface, then nothing.
		loris = append(loris, e.dialRaw(t, wire.GateNestSocket, "MOTHER-GATE/1 c-a"))
	}
	t.Cleanup(func() {
		for _, c := range loris {
			c.Close()
		}
	})
	loris = waitOpen(t, loris, pool)
	if len(loris) != pool {
		t.Errorf("%d slow connections kept pending, want %d", len(loris), pool)
	}
	// A chick that names itself gets in with the pool full.
	e.chickStream(t, "c-b").roundTrip(t, "with the pending pool full")
	for fake.Pending() < len(loris)-1 {
		time.Sleep(time.Millisecond) // until their deadlines are armed
	}
	fake.Advance(5 * time.Second)
	if left := waitOpen(t, loris, 0); len(left) != 0 {
		t.Errorf("%d slow connections left after the deadline", len(left))
	}
}
