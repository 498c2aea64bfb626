package gate_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/gate"
	"github.com/mother-chat/mother/pkg/gate/gatetest"
	"github.com/mother-chat/mother/pkg/version"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

// socketDir is a short temporary directory: a unix socket's path must fit
// in 108 bytes, which t.TempDir under a long test name may not.
func socketDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

type env struct {
	m    *gatetest.Mother
	g    *gate.Gate
	dir  string
	stop func()

	mu      sync.Mutex
	lookups []string
	names   map[string][]netip.Addr
}

// start runs a gate against a gatetest Mother. names is what the test's
// resolver answers; any other name does not resolve.
func start(t *testing.T, mod func(*gate.Options)) *env {
	t.Helper()
	e := &env{m: gatetest.Start(t, nil), dir: socketDir(t), names: map[string][]netip.Addr{}}
	opts := gate.Options{
		Dir: e.dir, Upstream: e.m.Addr, CAPEM: e.m.CAPEM, HostName: gatetest.Host, Token: gatetest.Token,
		Resolver:   e.resolve,
		LocalAddrs: func() ([]netip.Addr, error) { return []netip.Addr{netip.MustParseAddr("203.0.113.7")}, nil },
	}
	if mod != nil {
		mod(&opts)
	}
	e.stop = e.run(t, opts)
	return e
}

func (e *env) run(t testing.TB, opts gate.Options) func() {
	t.Helper()
	g, err := gate.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.g = g
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func (e *env) resolve(_ context.Context, host string) ([]netip.Addr, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lookups = append(e.lookups, host)
	if a, ok := e.names[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (e *env) setName(host string, addrs ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, a := range addrs {
		e.names[host] = append(e.names[host], netip.MustParseAddr(a))
	}
}

func (e *env) lookupCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.lookups)
}

// allow makes Mother allow everything, with these extra answers.
func (e *env) allow(resp *pb.AuthorizeResponse) {
	e.m.SetDecide(func(*pb.AuthorizeRequest) *pb.AuthorizeResponse {
		return &pb.AuthorizeResponse{Allow: true, Addresses: resp.GetAddresses(), Trusted: resp.GetTrusted(), BytesRemaining: resp.GetBytesRemaining()}
	})
}

// keyOf is chick id's gate key at the gatetest gate.
func keyOf(id string) string { return wire.ChickGateKey(gatetest.Token, id) }

// proxy opens proxy.sock as chick c-1 and writes the preface.
func (e *env) proxy(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", filepath.Join(e.dir, wire.GateProxySocket))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, wire.GatePrefaceLine("c-1", keyOf("c-1"))); err != nil {
		t.Fatal(err)
	}
	return c
}

// connect sends CONNECT dest and reads the answer's status and body.
func (e *env) connect(t *testing.T, dest string) (net.Conn, *bufio.Reader, int, string) {
	t.Helper()
	c := e.proxy(t)
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", dest, dest)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", dest, err)
	}
	var body []byte
	if resp.StatusCode != http.StatusOK {
		body, _ = io.ReadAll(resp.Body)
	}
	return c, br, resp.StatusCode, string(body)
}

// echo is a TCP echo server on loopback that counts its connections.
type echo struct {
	addr     string
	port     string
	accepted atomic.Int32
}

func startEcho(t *testing.T) *echo {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	e := &echo{addr: lis.Addr().String()}
	_, e.port, _ = net.SplitHostPort(e.addr)
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			e.accepted.Add(1)
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return e
}

func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader, msg string) {
	t.Helper()
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(br, got); err != nil || string(got) != msg {
		t.Fatalf("echo of %q: %q, %v", msg, got, err)
	}
}

// TestConnectTunnel: an allowed CONNECT to a trusted loopback address is
// answered 200 and piped both ways, the client's half-close reaches the
// server, and the end is reported with the bytes each way.
func TestConnectTunnel(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	srv := startEcho(t)
	e.allow(&pb.AuthorizeResponse{Trusted: []string{"127.0.0.1"}})
	c, br, code, body := e.connect(t, srv.addr)
	if code != http.StatusOK {
		t.Fatalf("CONNECT: %d %q", code, body)
	}
	roundTrip(t, c, br, "hello through the gate")
	c.(*net.UnixConn).CloseWrite()
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Errorf("after half-close: %q, %v; want a clean end", rest, err)
	}
	r := e.m.NextReport(t)
	if r.GetOutcome() != pb.EgressOutcome_EGRESS_OUTCOME_ALLOWED || r.GetBytesOut() != 22 || r.GetBytesIn() != 22 ||
		r.GetAddress() != "127.0.0.1" || r.GetChickId() != "c-1" || r.GetKey() != keyOf("c-1") || r.GetHost() != "127.0.0.1" || r.GetPort() != mustPort(srv.port) {
		t.Errorf("report %v", r)
	}
	a := e.m.Authorizes()
	if len(a) != 1 || a[0].GetChickId() != "c-1" || a[0].GetKey() != keyOf("c-1") || a[0].GetHost() != "127.0.0.1" || a[0].GetPort() != mustPort(srv.port) {
		t.Errorf("authorize calls %v", a)
	}
}

func mustPort(s string) uint32 {
	n, _ := strconv.Atoi(s)
	return uint32(n)
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLoopbackRefusedWithoutTrusted: Mother allows the destination, but
// it is a loopback address the operator did not list: refused, never
// dialled.
func TestLoopbackRefusedWithoutTrusted(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	srv := startEcho(t)
	e.allow(&pb.AuthorizeResponse{Trusted: []string{"127.0.0.2", "127.0.0.1:1"}})
	_, _, code, body := e.connect(t, srv.addr)
	if want := "blocked: " + srv.addr + " (is a loopback address)\n"; code != http.StatusForbidden || body != want {
		t.Errorf("CONNECT: %d %q, want 403 %q", code, body, want)
	}
	r := e.m.NextReport(t)
	if r.GetOutcome() != pb.EgressOutcome_EGRESS_OUTCOME_BLOCKED_ADDRESS || r.GetReason() != "is a loopback address" {
		t.Errorf("report %v", r)
	}
	if n := srv.accepted.Load(); n != 0 {
		t.Errorf("the destination saw %d connections", n)
	}
}

// TestRefusedByMother: a destination Mother does not allow gets the
// exact 403 line and is never even looked up. It is not reported: Mother
// recorded the refusal as she decided it (one call a refusal).
func TestRefusedByMother(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	e := start(t, func(o *gate.Options) {
		o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	_, _, code, body := e.connect(t, "github.com:443")
	if want := "blocked: github.com:443 (not allowed for this chick)\n"; code != http.StatusForbidden || body != want {
		t.Errorf("CONNECT: %d %q, want 403 %q", code, body, want)
	}
	if n := e.lookupCount(); n != 0 {
		t.Errorf("%d lookups for a refused destination", n)
	}
	// Each call says the gate's release and protocol (Mother logs them).
	if said, want := e.m.Said(), version.Release+"/"+strconv.Itoa(version.Protocol); len(said) == 0 || said[0] != want {
		t.Errorf("the gate's calls said %q of its release, want %q", said, want)
	}
	if want := `level=DEBUG msg=refused component=gate chick=c-1 destination=github.com:443 outcome=EGRESS_OUTCOME_REFUSED reason="not allowed for this chick"`; !strings.Contains(logs.String(), want) {
		t.Errorf("log:\n%s\nwant a line with %s", logs.String(), want)
	}
	// A plain-HTTP request gets the same answer.
	c := e.proxy(t)
	fmt.Fprint(c, "GET http://GitHub.com./x HTTP/1.1\r\nHost: github.com\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if want := "blocked: github.com:80 (not allowed for this chick)\n"; resp.StatusCode != http.StatusForbidden || string(b) != want {
		t.Errorf("GET: %d %q, want 403 %q", resp.StatusCode, b, want)
	}
}

// TestBlockedAddresses: Mother allows each name, but what it resolves to
// is not public and not trusted: refused before any dial.
func TestBlockedAddresses(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.allow(&pb.AuthorizeResponse{Trusted: []string{"10.9.9.9"}})
	for _, tc := range []struct{ name, addr, want string }{
		{"loop.test", "127.0.0.1", "resolves to a loopback address 127.0.0.1"},
		{"loop6.test", "::1", "resolves to a loopback address ::1"},
		{"metadata.test", "169.254.169.254", "resolves to a link-local address 169.254.169.254"},
		{"ll6.test", "fe80::1", "resolves to a link-local address fe80::1"},
		{"lan.test", "10.0.0.5", "resolves to a private address 10.0.0.5"},
		{"lan2.test", "192.168.1.1", "resolves to a private address 192.168.1.1"},
		{"ula.test", "fd00::5", "resolves to a private address fd00::5"},
		{"cgnat.test", "100.64.1.1", "resolves to a private address 100.64.1.1"},
		{"zero.test", "0.0.0.0", "resolves to an unspecified address 0.0.0.0"},
		{"zero8.test", "0.1.2.3", "resolves to an unspecified address 0.1.2.3"},
		{"mcast.test", "239.1.2.3", "resolves to a multicast address 239.1.2.3"},
		{"llmcast.test", "224.0.0.251", "resolves to a link-local address 224.0.0.251"},
		{"bcast.test", "255.255.255.255", "resolves to a reserved address 255.255.255.255"},
		{"mapped.test", "::ffff:127.0.0.1", "resolves to a loopback address 127.0.0.1"},
		{"nat64.test", "64:ff9b::a00:5", "resolves to a private address 10.0.0.5 in 64:ff9b::a00:5"},
		{"self.test", "203.0.113.7", "resolves to an address of the gate's own host 203.0.113.7"},
	} {
		e.setName(tc.name, tc.addr)
		_, _, code, body := e.connect(t, tc.name+":443")
		if want := "blocked: " + tc.name + ":443 (" + tc.want + ")\n"; code != http.StatusForbidden || body != want {
			t.Errorf("%s: %d %q, want 403 %q", tc.name, code, body, want)
		}
		if r := e.m.NextReport(t); r.GetOutcome() != pb.EgressOutcome_EGRESS_OUTCOME_BLOCKED_ADDRESS || r.GetReason() != tc.want {
			t.Errorf("%s: report %v", tc.name, r)
		}
	}
	// A literal private address gets the same treatment.
	_, _, code, body := e.connect(t, "[fe80::1]:80")
	if want := "blocked: [fe80::1]:80 (is a link-local address)\n"; code != http.StatusForbidden || body != want {
		t.Errorf("literal: %d %q, want 403 %q", code, body, want)
	}
}

// TestNameDoesNotResolve: an allowed name without addresses is refused.
func TestNameDoesNotResolve(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.allow(&pb.AuthorizeResponse{})
	_, _, code, body := e.connect(t, "nowhere.test:443")
	if want := "blocked: nowhere.test:443 (does not resolve)\n"; code != http.StatusForbidden || body != want {
		t.Errorf("CONNECT: %d %q, want 403 %q", code, body, want)
	}
	if r := e.m.NextReport(t); r.GetOutcome() != pb.EgressOutcome_EGRESS_OUTCOME_BLOCKED_ADDRESS || r.GetReason() != "does not resolve" {
		t.Errorf("report %v", r)
	}
}

// TestTrustedExactAddress: a name resolving to a loopback address is
// reached when Mother lists exactly that address as trusted (with or
// without the port), and only that one of its addresses is dialled.
func TestTrustedExactAddress(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	srv := startEcho(t)
	e.setName("svc.test", "10.0.0.5", "127.0.0.1")
	for _, trusted := range []string{"127.0.0.1", "127.0.0.1:" + srv.port, "::ffff:127.0.0.1"} {
		e.allow(&pb.AuthorizeResponse{Trusted: []string{trusted}})
		c, br, code, body := e.connect(t, "svc.test:"+srv.port)
		if code != http.StatusOK {
			t.Fatalf("trusted %s: %d %q", trusted, code, body)
		}
		roundTrip(t, c, br, "ping")
		c.Close()
		if r := e.m.NextReport(t); r.GetOutcome() != pb.EgressOutcome_EGRESS_OUTCOME_ALLOWED || r.GetAddress() != "127.0.0.1" {
			t.Errorf("trusted %s: report %v", trusted, r)
		}
	}
}

// TestOperatorAddresses: Authorize's addresses are used instead of DNS.
func TestOperatorAddresses(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	srv := startEcho(t)
	e.setName("pkg.test", "10.0.0.5")
	e.allow(&pb.AuthorizeResponse{Addresses: []string{"127.0.0.1"}, Trusted: []string{"127.0.0.1"}})
	c, br, code, body := e.connect(t, "pkg.test:"+srv.port)
	if code != http.StatusOK {
		t.Fatalf("CONNECT: %d %q", code, body)
	}
	roundTrip(t, c, br, "ping")
	if n := e.lookupCount(); n != 0 {
		t.Errorf("%d DNS lookups despite the operator's addresses", n)
	}
}

// TestPlainHTTPForward: GET http://name:port/path reaches the server in
// origin form with Connection: close and without proxy headers; the
// answer comes back whole.
func TestPlainHTTPForward(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	type seen struct {
		uri, host, conn, proxyConn, body string
	}
	got := make(chan seen, 1)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.RequestURI, r.Host, strings.Join(r.Header.Values("Connection"), ","), r.Header.Get("Proxy-Connection"), string(b)}
		w.Header().Set("X-From", "dest")
		io.WriteString(w, "answer body")
	})}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Close() })
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	e.setName("web.test", "127.0.0.1")
	e.allow(&pb.AuthorizeResponse{Trusted: []string{"127.0.0.1"}})

	c := e.proxy(t)
	fmt.Fprintf(c, "POST http://web.test:%s/path?q=1 HTTP/1.1\r\nHost: web.test:%s\r\nProxy-Connection: keep-alive\r\nContent-Length: 5\r\n\r\nhello", port, port)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "answer body" || resp.Header.Get("X-From") != "dest" || !resp.Close {
		t.Errorf("answer %d %q %v close=%v", resp.StatusCode, b, resp.Header, resp.Close)
	}
	s := <-got
	if s.uri != "/path?q=1" || s.host != "web.test:"+port || s.proxyConn != "" || s.body != "hello" {
		t.Errorf("the server saw %+v", s)
	}
	r := e.m.NextReport(t)
	if r.GetOutcome() != pb.EgressOutcome_EGRESS_OUTCOME_ALLOWED || r.GetHost() != "web.test" || r.GetBytesOut() == 0 || r.GetBytesIn() == 0 {
		t.Errorf("report %v", r)
	}
}

// TestUnreachable: an allowed, checked address that refuses the
// connection gets 502 and is reported FAILED.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	e.allow(&pb.AuthorizeResponse{Trusted: []string{"127.0.0.1"}})
	_, _, code, body := e.connect(t, addr)
	if want := "blocked: " + addr + " (unreachable: connect: connection refused)\n"; code != http.StatusBadGateway || body != want {
		t.Errorf("CONNECT: %d %q, want 502 %q", code, body, want)
	}
	if r := e.m.NextReport(t); r.GetOutcome() != pb.EgressOutcome_EGRESS_OUTCOME_FAILED {
		t.Errorf("report %v", r)
	}
}

// TestByteCap: the chick's allowance is shared by its connections; the
// one that crosses it is cut and reported CAPPED, and then the chick is
// refused until Mother says otherwise.
func TestByteCap(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	srv := startEcho(t)
	e.allow(&pb.AuthorizeResponse{Trusted: []string{"127.0.0.1"}, BytesRemaining: 100})
	a, abr, code, _ := e.connect(t, srv.addr)
	if code != http.StatusOK {
		t.Fatal(code)
	}
	b, bbr, code, _ := e.connect(t, srv.addr)
	if code != http.StatusOK {
		t.Fatal(code)
	}
	roundTrip(t, a, abr, strings.Repeat("a", 60))
	io.WriteString(b, strings.Repeat("b", 60))
	rest, _ := io.ReadAll(bbr) // cut: what came back, then the end
	if len(rest) > 40 {
		t.Errorf("connection b echoed %d bytes past the cap", len(rest))
	}
	r := e.m.NextReport(t)
	if r.GetOutcome() != pb.EgressOutcome_EGRESS_OUTCOME_CAPPED || r.GetBytesOut() != 40 {
		t.Errorf("report of b: %v, want CAPPED with 40 bytes out", r)
	}
	// a has nothing left either.
	io.WriteString(a, "x")
	io.ReadAll(abr)
	r = e.m.NextReport(t)
	if r.GetOutcome() != pb.EgressOutcome_EGRESS_OUTCOME_CAPPED || r.GetBytesOut() != 60 {
		t.Errorf("report of a: %v, want CAPPED with 60 bytes out", r)
	}
	// Mother's figure lags (she saw none of it yet): the gate's is lower.
	_, _, code, body := e.connect(t, srv.addr)
	if want := "blocked: " + srv.addr + " (byte cap reached)\n"; code != http.StatusForbidden || body != want {
		t.Errorf("after the cap: %d %q, want 403 %q", code, body, want)
	}
	if r := e.m.NextReport(t); r.GetOutcome() != pb.EgressOutcome_EGRESS_OUTCOME_CAPPED {
		t.Errorf("report %v", r)
	}
	// No cap from Mother any more: through again.
	e.allow(&pb.AuthorizeResponse{Trusted: []string{"127.0.0.1"}})
	c, cbr, code, _ := e.connect(t, srv.addr)
	if code != http.StatusOK {
		t.Fatal(code)
	}
	roundTrip(t, c, cbr, "free again")
}

// TestBadPreface: connections without a well-formed preface are closed
// unanswered, and Mother is never asked.
func TestBadPreface(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.allow(&pb.AuthorizeResponse{})
	for _, tc := range []struct{ name, data string }{
		{"http first", "CONNECT example.com:443 HTTP/1.1\r\n\r\n"},
		{"wrong version", "MOTHER-GATE/2 c-1 key\nCONNECT a:1 HTTP/1.1\r\n\r\n"},
		{"no key", "MOTHER-GATE/1 c-1\nCONNECT a:1 HTTP/1.1\r\n\r\n"},
		{"extra field", "MOTHER-GATE/1 c-1 key more\nCONNECT a:1 HTTP/1.1\r\n\r\n"},
		{"empty id", "MOTHER-GATE/1  key\n"},
		{"control byte", "MOTHER-GATE/1 c-1 k\x01y\n"},
		{"too long", "MOTHER-GATE/1 c-1 " + strings.Repeat("k", 5000) + "\n"},
		{"binary", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n"},
		{"closed early", "MOTHER-GATE/1 c-1"},
		{"made-up key", "MOTHER-GATE/1 c-1 " + strings.Repeat("0", 64) + "\nCONNECT a:1 HTTP/1.1\r\n\r\n"},
		{"another chick's key", wire.GatePrefaceLine("c-1", keyOf("c-2")) + "CONNECT a:1 HTTP/1.1\r\n\r\n"},
		{"another gate's key", wire.GatePrefaceLine("c-1", wire.ChickGateKey("other-gate-token", "c-1")) + "CONNECT a:1 HTTP/1.1\r\n\r\n"},
		// A chick of network "none" has a key for nest.sock only.
		{"nest-only key", wire.GatePrefaceLine("c-1", wire.ChickNestKey(gatetest.Token, "c-1")) + "CONNECT a:1 HTTP/1.1\r\n\r\n"},
	} {
		c, err := net.Dial("unix", filepath.Join(e.dir, wire.GateProxySocket))
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, tc.data)
		c.(*net.UnixConn).CloseWrite()
		if b, _ := io.ReadAll(c); len(b) != 0 {
			t.Errorf("%s: answered %q, want the connection closed", tc.name, b)
		}
		c.Close()
	}
	// A preface then something that is not a proxy request: 400.
	for _, req := range []string{"GET /relative HTTP/1.1\r\nHost: a\r\n\r\n", "GET https://a.test/ HTTP/1.1\r\nHost: a\r\n\r\n", "CONNECT a.test HTTP/1.1\r\n\r\n", "CONNECT a.test:0 HTTP/1.1\r\n\r\n", "not http\r\n\r\n"} {
		c := e.proxy(t)
		io.WriteString(c, req)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%q: %v %v, want 400", req, resp, err)
		}
	}
	if a := e.m.Authorizes(); len(a) != 0 {
		t.Errorf("Mother was asked %v", a)
	}
}

// TestPrefaceTimeout: a connection that says nothing is closed when the
// preface deadline passes on the gate's clock.
func TestPrefaceTimeout(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	e := start(t, func(o *gate.Options) { o.Clock = fake; o.PrefaceTimeout = 5 * time.Second })
	c, err := net.Dial("unix", filepath.Join(e.dir, wire.GateProxySocket))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "MOTHER-GATE/1 c-1 k") // no newline: it waits
	for fake.Pending() == 0 {
		time.Sleep(time.Millisecond) // until the gate has armed its deadline
	}
	fake.Advance(5 * time.Second)
	// Closed with the partial line unread, Linux may reset rather than end it.
	if b, err := io.ReadAll(c); len(b) != 0 || (err != nil && !errors.Is(err, syscall.ECONNRESET)) {
		t.Errorf("read %q, %v; want the connection closed", b, err)
	}
}

// TestMotherUnreachable: when the gate cannot ask Mother, the chick is
// told so and nothing is dialled.
func TestMotherUnreachable(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	e := start(t, func(o *gate.Options) { o.Upstream = addr; o.CallTimeout = 2 * time.Second })
	_, _, code, body := e.connect(t, "example.com:443")
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "blocked: example.com:443 (the gate cannot ask Mother: ") {
		t.Errorf("CONNECT: %d %q", code, body)
	}
}

// TestNestPipe: gRPC over TLS to Mother through nest.sock, as a chick
// dials it (unix:// target, TLS end to end), survives the gate stopping
// and starting again, and a stale socket file does not stop a new gate.
func TestNestPipe(t *testing.T) {
	t.Parallel()
	e := start(t, nil)
	e.m.SetDecide(func(*pb.AuthorizeRequest) *pb.AuthorizeResponse {
		return &pb.AuthorizeResponse{Reason: "through the pipe"}
	})
	creds, err := wire.ClientTLS(e.m.CAPEM)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(e.dir, wire.GateNestSocket)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(creds), grpc.WithContextDialer(wire.GateDialer(sock, "c-9", keyOf("c-9"))))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewGateServiceClient(conn)
	call := func() error {
		ctx, cancel := context.WithTimeout(wire.Credentials(t.Context(), gatetest.Host, gatetest.Token), 10*time.Second)
		defer cancel()
		resp, err := client.Authorize(ctx, &pb.AuthorizeRequest{ChickId: "c-9"}, grpc.WaitForReady(true))
		if err == nil && resp.GetReason() != "through the pipe" {
			return fmt.Errorf("answer %v", resp)
		}
		return err
	}
	if err := call(); err != nil {
		t.Fatalf("through nest.sock: %v", err)
	}
	e.stop()
	if _, err := os.Stat(filepath.Join(e.dir, wire.GateNestSocket)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a stopped gate left its socket: %v", err)
	}
	// A gate that died leaves its files behind: the next one replaces them.
	os.WriteFile(filepath.Join(e.dir, wire.GateNestSocket), nil, 0o600)
	e.run(t, gate.Options{Dir: e.dir, Upstream: e.m.Addr, CAPEM: e.m.CAPEM, HostName: gatetest.Host, Token: gatetest.Token})
	// The first call may still go to the connection the old gate cut
	// (Unavailable, which a chick retries), as with a Mother restart.
	err = call()
	for i := 0; i < 3 && status.Code(err) == codes.Unavailable; i++ {
		err = call()
	}
	if err != nil {
		t.Fatalf("after the gate restarted: %v", err)
	}
	st, err := os.Stat(filepath.Join(e.dir, wire.GateProxySocket))
	if err != nil || st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o666 {
		t.Errorf("proxy.sock: %v %v", st.Mode(), err)
	}
}

// TestBadOptions: missing settings are named.
func TestBadOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		opts gate.Options
		want string
	}{
		{gate.Options{}, "no socket directory"},
		{gate.Options{Dir: "x"}, "no upstream"},
		{gate.Options{Dir: "x", Upstream: "a:1"}, "host name and token"},
		{gate.Options{Dir: "x", Upstream: "a", HostName: "h", Token: "t"}, "not host:port"},
		{gate.Options{Dir: "x", Upstream: "a:1", HostName: "h", Token: "t"}, "CA certificate"},
	} {
		if _, err := gate.New(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want %q", tc.opts, err, tc.want)
		}
	}
}
