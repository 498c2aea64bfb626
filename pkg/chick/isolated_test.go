package chick_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/chick"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/gate"
	"github.com/mother-chat/mother/pkg/gate/gatetest"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/wire"
	pb "github.com/mother-chat/mother/proto/mother/v1"
)

const (
	chickID    = "c-7f3a"
	chickToken = "tok-c-7f3a"
)

// chickKey is the chick's gate key at gatetest's gate.
var chickKey = wire.ChickGateKey(gatetest.Token, chickID)

// fakeNest is Mother's ChickService at the wire: it answers Join, acks
// the session, runs a scripted model and answers RequestAccess.
type fakeNest struct {
	pb.UnimplementedChickServiceServer
	model  func(ctx context.Context, n int, req *pb.GenerateRequest) (model.Response, error)
	access func(*pb.RequestAccessRequest) *pb.RequestAccessResponse
	// files answers FetchFiles (nil: no files, just done).
	files func(pb.ChickService_FetchFilesServer) error

	mu      sync.Mutex
	fetches int
	calls   int
	stored  uint64
	asked   []*pb.RequestAccessRequest
	results chan *pb.ChickResult
}

func newFakeNest() *fakeNest { return &fakeNest{results: make(chan *pb.ChickResult, 1)} }

func auth(ctx context.Context) error {
	if id, tok := wire.FromIncoming(ctx); id != chickID || tok != chickToken {
		return status.Error(codes.Unauthenticated, "unknown chick")
	}
	return nil
}

func (f *fakeNest) Join(ctx context.Context, _ *pb.JoinRequest) (*pb.JoinResponse, error) {
	if err := auth(ctx); err != nil {
		return nil, err
	}
	return &pb.JoinResponse{ChickId: chickID, Channel: "cli/local", Goal: "fetch the data", Tier: "local", Limits: &pb.ChickLimits{MaxTurns: 10}}, nil
}

func (f *fakeNest) Session(s pb.ChickService_SessionServer) error {
	if err := auth(s.Context()); err != nil {
		return err
	}
	if _, err := s.Recv(); err != nil { // hello
		return err
	}
	ack := func() error {
		f.mu.Lock()
		seq := f.stored
		f.mu.Unlock()
		return s.Send(&pb.SessionResponse{Kind: &pb.SessionResponse_Ack{Ack: &pb.Ack{Seq: seq}}})
	}
	if err := ack(); err != nil {
		return err
	}
	for {
		m, err := s.Recv()
		if err != nil {
			return err
		}
		switch k := m.GetKind().(type) {
		case *pb.SessionRequest_Event:
			f.mu.Lock()
			f.stored = max(f.stored, k.Event.GetSeq())
			f.mu.Unlock()
			if err := ack(); err != nil {
				return err
			}
		case *pb.SessionRequest_Result:
			f.results <- k.Result
			return nil
		}
	}
}

func (f *fakeNest) FetchFiles(_ *pb.FetchFilesRequest, s pb.ChickService_FetchFilesServer) error {
	if err := auth(s.Context()); err != nil {
		return err
	}
	f.mu.Lock()
	f.fetches++
	f.mu.Unlock()
	if f.files != nil {
		return f.files(s)
	}
	return s.Send(&pb.FetchFilesResponse{Kind: &pb.FetchFilesResponse_Done{Done: &pb.FetchFilesDone{}}})
}

func (f *fakeNest) Generate(req *pb.GenerateRequest, s pb.ChickService_GenerateServer) error {
	if err := auth(s.Context()); err != nil {
		return err
	}
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.mu.Unlock()
	resp, err := f.model(s.Context(), n, req)
	if err != nil {
		return err
	}
	resp.Message.Role = model.RoleAssistant
	return s.Send(&pb.GenerateResponse{Kind: &pb.GenerateResponse_Done{Done: wire.DoneToProto(resp)}})
}

func (f *fakeNest) RequestAccess(ctx context.Context, req *pb.RequestAccessRequest) (*pb.RequestAccessResponse, error) {
	if err := auth(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.asked = append(f.asked, req)
	f.mu.Unlock()
	return f.access(req), nil
}

func toolNames(req *pb.GenerateRequest) []string {
	var out []string
	for _, t := range req.GetTools() {
		out = append(out, t.GetName())
	}
	return out
}

// lastToolResult is the content of the last tool message of a request.
func lastToolResult(req *pb.GenerateRequest) string {
	ms := req.GetMessages()
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].GetRole() == pb.Role_ROLE_TOOL {
			return ms[i].GetContent()
		}
	}
	return ""
}

func call(name string, args map[string]any) model.Response {
	b, _ := json.Marshal(args)
	return model.Response{Message: model.Message{ToolCalls: []model.ToolCall{{ID: "call-" + name, Name: name, Args: b}}}}
}

// shortDir is a temporary directory short enough for unix socket paths.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// runGate serves a gate in dir until the returned stop (or the test's end).
func runGate(t *testing.T, m *gatetest.Mother, dir string) (stop func()) {
	t.Helper()
	g, err := gate.New(gate.Options{
		Dir: dir, Upstream: m.Addr, CAPEM: m.CAPEM, HostName: gatetest.Host, Token: gatetest.Token,
		Resolver: func(_ context.Context, host string) ([]netip.Addr, error) {
			if host == "web.test" {
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			return nil, fmt.Errorf("%s: no such host", host)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Serve(ctx)
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// allowWeb makes Mother allow web.test (at its loopback address, which
// the operator trusts) for the chick with the right key, and nothing else.
func allowWeb(m *gatetest.Mother) {
	m.SetDecide(func(r *pb.AuthorizeRequest) *pb.AuthorizeResponse {
		if r.GetChickId() != chickID || r.GetKey() != chickKey {
			return &pb.AuthorizeResponse{Reason: "unknown chick"}
		}
		if r.GetHost() != "web.test" {
			return &pb.AuthorizeResponse{Reason: "not allowed for this chick"}
		}
		return &pb.AuthorizeResponse{Allow: true, Trusted: []string{"127.0.0.1"}}
	})
}

// webServers are the destinations: one plain HTTP, one HTTPS, on
// loopback, reached by the name web.test.
type webServers struct {
	plain, secure *httptest.Server
	plainPort     string
	securePort    string
}

func startWeb(t *testing.T) *webServers {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello from %s over %s", r.Host, r.Proto) })
	w := &webServers{plain: httptest.NewServer(h), secure: httptest.NewTLSServer(h)}
	t.Cleanup(w.plain.Close)
	t.Cleanup(w.secure.Close)
	_, w.plainPort, _ = net.SplitHostPort(w.plain.Listener.Addr().String())
	_, w.securePort, _ = net.SplitHostPort(w.secure.Listener.Addr().String())
	return w
}

// proxyClient is what a tool in the chick uses: an http.Client with
// HTTP_PROXY and HTTPS_PROXY set to the chick's proxy address. (The
// value of the environment, not the environment itself: net/http reads
// it once per process, and never for a loopback destination.)
func (w *webServers) proxyClient(proxyAddr string) *http.Client {
	tr := w.secure.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: proxyAddr})
	tr.TLSClientConfig.ServerName = "example.com" // in httptest's certificate
	tr.DisableKeepAlives = true
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// fetch is get for another goroutine: "code body", or the error.
func fetch(c *http.Client, u string) string {
	resp, err := c.Get(u)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprint(resp.StatusCode, " ", string(b))
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestForwarderThroughGate: a real http.Client with the chick's proxy
// settings reaches an allowed destination over plain HTTP and over HTTPS
// (CONNECT, TLS end to end) through the chick's forwarder and the gate;
// the gate learns the chick's id and key from the forwarder's preface;
// a destination Mother refuses comes back as the 403 line.
func TestForwarderThroughGate(t *testing.T) {
	t.Parallel()
	m := gatetest.Start(t, nil)
	allowWeb(m)
	dir := shortDir(t)
	runGate(t, m, dir)
	web := startWeb(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &chick.Forwarder{Socket: filepath.Join(dir, wire.GateProxySocket), ChickID: chickID, Key: chickKey}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Serve(ctx, lis) }()
	defer func() { cancel(); <-done }()
	c := web.proxyClient(lis.Addr().String())

	if code, body := get(t, c, "http://web.test:"+web.plainPort+"/"); code != 200 || body != "hello from web.test:"+web.plainPort+" over HTTP/1.1" {
		t.Errorf("plain: %d %q", code, body)
	}
	if code, body := get(t, c, "https://web.test:"+web.securePort+"/"); code != 200 || body != "hello from web.test:"+web.securePort+" over HTTP/1.1" {
		t.Errorf("https: %d %q", code, body)
	}
	if code, body := get(t, c, "http://github.com/"); code != 403 || body != "blocked: github.com:80 (not allowed for this chick)\n" {
		t.Errorf("refused: %d %q", code, body)
	}
	if _, err := c.Get("https://github.com/"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Errorf("refused CONNECT: %v", err)
	}
	for _, a := range m.Authorizes() {
		if a.GetChickId() != chickID || a.GetKey() != chickKey {
			t.Errorf("the gate was told %q %q", a.GetChickId(), a.GetKey())
		}
	}
}

// TestIsolatedChickThroughGate runs the real chick runtime as an isolated
// chick: gRPC to Mother over the gate's nest.sock (unix://, TLS end to
// end), its proxy forwarding to the gate. The model asks for access with
// request_access; an admin's grant comes back as the tool's result; the
// gate is restarted in the middle of a model call, and both the chick's
// gRPC connection and its proxy recover.
func TestIsolatedChickThroughGate(t *testing.T) {
	t.Parallel()
	nest := newFakeNest()
	m := gatetest.Start(t, nest)
	dir := shortDir(t)
	stopGate := runGate(t, m, dir)
	web := startWeb(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	client := web.proxyClient(lis.Addr().String())
	webURL := "https://web.test:" + web.securePort + "/data"

	inCall2, release := make(chan struct{}), make(chan struct{})
	var tools1 []string
	nest.access = func(r *pb.RequestAccessRequest) *pb.RequestAccessResponse {
		allowWeb(m) // what an admin's approval does on Mother's side
		return &pb.RequestAccessResponse{Granted: true, Scope: pb.AccessScope_ACCESS_SCOPE_CHICK, Message: "approved by @ana for this chick"}
	}
	nest.model = func(ctx context.Context, n int, req *pb.GenerateRequest) (model.Response, error) {
		switch n {
		case 1:
			tools1 = toolNames(req)
			return call("request_access", map[string]any{"destination": webURL, "reason": "the data is there"}), nil
		case 2:
			close(inCall2)
			<-ctx.Done() // until the gate goes away under it
			return model.Response{}, ctx.Err()
		}
		<-release
		return model.Response{Message: model.Message{Content: "access: " + lastToolResult(req)}}, nil
	}

	// Its files come through the gate too.
	nest.files = sendAll(file("MEMORY.md", []byte("through the gate"), 5), []*pb.FetchFilesResponse{doneMsg(1, 16)})
	ws := t.TempDir()
	runDone := make(chan error, 1)
	go func() {
		runDone <- chick.Run(context.Background(), chick.Options{
			Addr: "unix://" + filepath.Join(dir, wire.GateNestSocket), Token: chickToken, ChickID: chickID, CAPEM: m.CAPEM,
			Workspace: ws, GateProxy: filepath.Join(dir, wire.GateProxySocket), GateKey: chickKey, ProxyListener: lis,
			MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, ReconnectFor: time.Minute,
		})
	}()
	select {
	case <-inCall2:
	case err := <-runDone:
		t.Fatalf("chick ended early: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the chick never made its second model call")
	}
	if !contains(tools1, "request_access") {
		t.Errorf("tools offered to the model %v: want request_access", tools1)
	}
	// Granted: the chick's tools reach it through its proxy.
	if code, body := get(t, client, webURL); code != 200 || !strings.HasPrefix(body, "hello from web.test") {
		t.Errorf("after the grant: %d %q", code, body)
	}
	stopGate()
	runGate(t, m, dir)
	if code, body := get(t, client, webURL); code != 200 || !strings.HasPrefix(body, "hello from web.test") {
		t.Errorf("after the gate restarted: %d %q", code, body)
	}
	close(release)
	select {
	case err := <-runDone:
		if err != nil {
			t.Fatalf("chick.Run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the chick did not finish after the gate restarted")
	}
	res := <-nest.results
	if want := "access: approved by @ana for this chick\nweb.test:" + web.securePort + " is now allowed through the proxy: retry what was blocked (a refusal answers 403 with the reason)."; res.GetText() != want {
		t.Errorf("result %q, want %q", res.GetText(), want)
	}
	if len(nest.asked) != 1 || nest.asked[0].GetDestination() != "web.test:"+web.securePort || nest.asked[0].GetReason() != "the data is there" {
		t.Errorf("access requests %v", nest.asked)
	}
	// The proxy ended with the chick.
	if c, err := net.Dial("tcp", lis.Addr().String()); err == nil {
		c.Close()
		t.Error("the chick's proxy still listens after Run returned")
	}
	if b, err := os.ReadFile(filepath.Join(ws, "MEMORY.md")); string(b) != "through the gate" {
		t.Errorf("MEMORY.md fetched through the gate = %q, %v", b, err)
	}
}

// TestRequestAccessTool: only an isolated chick has request_access; bad
// arguments are the model's errors to fix; a refusal comes back as the
// tool's result.
func TestRequestAccessTool(t *testing.T) {
	t.Parallel()
	for _, isolated := range []bool{false, true} {
		nest := newFakeNest()
		m := gatetest.Start(t, nest)
		var tools []string
		nest.access = func(*pb.RequestAccessRequest) *pb.RequestAccessResponse {
			return &pb.RequestAccessResponse{Message: "refused by @ana"}
		}
		var results []string
		nest.model = func(_ context.Context, n int, req *pb.GenerateRequest) (model.Response, error) {
			if n > 1 {
				results = append(results, lastToolResult(req))
			}
			switch n {
			case 1:
				tools = toolNames(req)
				if !isolated {
					return model.Response{Message: model.Message{Content: "done"}}, nil
				}
				return call("request_access", map[string]any{"reason": "install"}), nil
			case 2:
				return call("request_access", map[string]any{"destination": "pypi.org", "reason": " "}), nil
			case 3:
				return call("request_access", map[string]any{"destination": "http://files.test/x", "reason": "install"}), nil
			}
			return model.Response{Message: model.Message{Content: "done"}}, nil
		}
		opts := chick.Options{Addr: m.Addr, Token: chickToken, ChickID: chickID, CAPEM: m.CAPEM, Workspace: t.TempDir()}
		if isolated {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			opts.GateProxy, opts.GateKey, opts.ProxyListener = filepath.Join(shortDir(t), "absent.sock"), chickKey, lis
		}
		if err := chick.Run(t.Context(), opts); err != nil {
			t.Fatalf("isolated=%v: chick.Run: %v", isolated, err)
		}
		if got := contains(tools, "request_access"); got != isolated {
			t.Errorf("isolated=%v: tools %v", isolated, tools)
		}
		if !isolated {
			continue
		}
		// The first call lacks its destination: the loop's check of the
		// arguments against the tool's schema refuses it before it runs.
		want := []string{
			`missing required field "destination" (string: one host and port`,
			"request_access: say why the goal needs it (reason)",
			"refused by @ana",
		}
		if len(results) != len(want) || !strings.Contains(results[0], want[0]) || results[1] != want[1] || results[2] != want[2] {
			t.Errorf("tool results %q, want %q", results, want)
		}
		if len(nest.asked) != 1 || nest.asked[0].GetDestination() != "files.test:80" {
			t.Errorf("access requests %v", nest.asked)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestForwarderWaitsForGate: while the gate restarts (its socket gone),
// a connection to the chick's proxy waits for it to come back, then goes
// through; if it does not come back in time, the client is told so.
func TestForwarderWaitsForGate(t *testing.T) {
	t.Parallel()
	m := gatetest.Start(t, nil)
	allowWeb(m)
	dir := shortDir(t)
	web := startWeb(t)
	fake := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &chick.Forwarder{Socket: filepath.Join(dir, wire.GateProxySocket), ChickID: chickID, Key: chickKey, Clock: fake, WaitFor: 10 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Serve(ctx, lis) }()
	defer func() { cancel(); <-done }()
	c := web.proxyClient(lis.Addr().String())
	waitRetrying := func() {
		for fake.Pending() == 0 { // until the forwarder waits for the socket
			time.Sleep(time.Millisecond)
		}
	}

	// No gate, and none comes: 502 once WaitFor has passed.
	got := make(chan string, 1)
	go func() { got <- fetch(c, "http://web.test:"+web.plainPort+"/") }()
	waitRetrying()
	for len(got) == 0 {
		fake.Advance(time.Second)
		time.Sleep(time.Millisecond)
	}
	if s := <-got; s != "502 blocked: the gate is not reachable (restarting?); try again\n" {
		t.Errorf("without a gate: %q", s)
	}

	// The gate comes back while a request waits: it goes through.
	go func() { got <- fetch(c, "http://web.test:"+web.plainPort+"/") }()
	waitRetrying()
	runGate(t, m, dir)
	fake.Advance(time.Second)
	if s, want := <-got, "200 hello from web.test:"+web.plainPort+" over HTTP/1.1"; s != want {
		t.Errorf("after the gate came back: %q, want %q", s, want)
	}
}
