package hosttools

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/prompt"
)

func newManager(t *testing.T, opts Options) *Manager {
	t.Helper()
	if opts.MinBackoff == 0 {
		opts.MinBackoff = 10 * time.Millisecond
	}
	if opts.ConnectTimeout == 0 {
		opts.ConnectTimeout = 10 * time.Second
	}
	if opts.StopTimeout == 0 {
		opts.StopTimeout = 300 * time.Millisecond
	}
	if opts.Logger == nil && testing.Verbose() {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	m := New(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

func dur(d time.Duration) config.Duration { return config.Dur(d) }

// notesServer is the example server over stdio, its notes in a file of
// the test.
func notesServer(t *testing.T) (config.MCPServer, string) {
	file := filepath.Join(t.TempDir(), "notes.jsonl")
	return config.MCPServer{Command: notesBin(t), Args: []string{"--file", file}, Timeout: dur(10 * time.Second)}, file
}

func testServer(mode string) config.MCPServer {
	return config.MCPServer{Command: selfBin, Env: map[string]string{"HOSTTOOLS_TEST_SERVER": mode}, Timeout: dur(10 * time.Second)}
}

func start(t *testing.T, m *Manager, servers map[string]config.MCPServer) {
	t.Helper()
	m.Apply(servers)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := m.WaitStarted(ctx); err != nil {
		t.Fatalf("WaitStarted: %v", err)
	}
}

func call(t *testing.T, m *Manager, name, args string) (string, bool) {
	t.Helper()
	res, err := m.Call(t.Context(), name, json.RawMessage(args))
	if err != nil {
		t.Fatalf("Call(%s, %s): %v", name, args, err)
	}
	return res.Text, res.IsError
}

func qualified(tools []Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Qualified)
	}
	return out
}

// TestDiscoveryAndCalls: the example server over stdio and a server over
// streamable HTTP are started, their tools discovered with descriptions
// and parameter summaries, and called.
func TestDiscoveryAndCalls(t *testing.T) {
	t.Parallel()
	hs := newHTTPServer(t)
	notes, file := notesServer(t)
	m := newManager(t, Options{})
	start(t, m, map[string]config.MCPServer{
		"notes": notes,
		"web":   {URL: hs.URL, Headers: map[string]config.Secret{"Authorization": "Bearer s3cret"}, Timeout: dur(10 * time.Second)},
	})

	got := qualified(m.Tools())
	want := []string{"notes.add", "notes.delete", "notes.list", "notes.search", "web.big", "web.count", "web.crash", "web.echo", "web.env", "web.hang", "web.picture", "web.pid"}
	if !slices.Equal(got, want) {
		t.Fatalf("Tools() = %v, want %v", got, want)
	}
	var add prompt.HostTool
	for _, pt := range m.PromptTools() {
		if pt.Name == "notes.add" {
			add = pt
		}
	}
	if got, want := add.Signature(), "notes.add(text: string, tags?: string[])"; got != want {
		t.Errorf("notes.add signature = %q, want %q", got, want)
	}
	if !strings.Contains(add.Details(), "text: the note's text") || !strings.Contains(add.Description, "Add a note") {
		t.Errorf("notes.add details = %q", add.Details())
	}

	if text, isErr := call(t, m, "notes.add", `{"text":"buy milk","tags":["home"]}`); isErr || text != "Added note 1." {
		t.Errorf("notes.add = %q (error %v)", text, isErr)
	}
	if text, _ := call(t, m, "notes.search", `{"query":"MILK"}`); !strings.Contains(text, "1. [") || !strings.Contains(text, "buy milk (tags: home)") {
		t.Errorf("notes.search = %q", text)
	}
	if b, err := os.ReadFile(file); err != nil || !strings.Contains(string(b), `"text":"buy milk"`) {
		t.Errorf("notes file = %q, %v", b, err)
	}
	// A bare name works when only one server has that tool.
	if text, _ := call(t, m, "echo", `{"text":"hi"}`); text != "echo: hi" {
		t.Errorf("echo = %q", text)
	}
	if text, _ := call(t, m, "web.count", `{"n":3}`); text != `counted: {"n":3}` {
		t.Errorf("web.count = %q", text)
	}
	if got := hs.auth.Load(); got != "Bearer s3cret" {
		t.Errorf("Authorization header at the server = %v", got)
	}
	// The server's own error result reaches the model as an error.
	if text, isErr := call(t, m, "notes.delete", `{"id":7}`); !isErr || text != "notes.delete failed: no note 7" {
		t.Errorf("notes.delete of a missing note = %q (error %v)", text, isErr)
	}

	st := m.Status()
	if len(st) != 2 || st[0].Name != "notes" || st[0].State != StateRunning || st[0].Transport != "stdio" ||
		st[1].Name != "web" || st[1].State != StateRunning || st[1].Transport != "http" || len(st[1].Tools) != 8 {
		t.Errorf("Status() = %+v", st)
	}
}

// TestUnknownTools: names that match nothing, or several tools, get an
// error listing what exists.
func TestUnknownTools(t *testing.T) {
	t.Parallel()
	hs := newHTTPServer(t)
	m := newManager(t, Options{})
	start(t, m, map[string]config.MCPServer{
		"a": testServer("stdio"),
		"b": {URL: hs.URL, Timeout: dur(10 * time.Second)},
	})
	tests := []struct {
		name string
		want []string
		is   error
	}{
		{"nope", []string{`unknown host tool "nope"; available: a.big, a.count, a.crash`}, ErrUnknownTool},
		{"a.nope", []string{`host tool server a has no tool "nope" (its tools: big, count, crash, echo, env, hang, picture, pid)`}, ErrUnknownTool},
		{"echo", []string{`host tool name "echo" is ambiguous: use one of a.echo, b.echo`}, ErrAmbiguous},
	}
	for _, tc := range tests {
		_, err := m.Call(t.Context(), tc.name, nil)
		if !errors.Is(err, tc.is) {
			t.Errorf("Call(%q) = %v, want %v", tc.name, err, tc.is)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Call(%q) = %q, want it to contain %q", tc.name, err, w)
			}
		}
	}
	if len(hs.Calls()) != 0 {
		t.Errorf("the HTTP server saw calls: %v", hs.Calls())
	}
	empty := newManager(t, Options{})
	if _, err := empty.Call(t.Context(), "x.y", nil); err == nil || !strings.Contains(err.Error(), "no host tools are available") {
		t.Errorf("Call with no servers = %v", err)
	}
}

// TestSchemaValidationRefusesBadArguments: arguments that do not match the
// schema are refused with the reason and the parameters, and the server
// never sees the call.
func TestSchemaValidationRefusesBadArguments(t *testing.T) {
	t.Parallel()
	hs := newHTTPServer(t)
	notes, file := notesServer(t)
	m := newManager(t, Options{})
	start(t, m, map[string]config.MCPServer{"web": {URL: hs.URL, Timeout: dur(10 * time.Second)}, "notes": notes})
	tests := []struct {
		name, tool, args string
		want             []string
	}{
		{"too big", "web.count", `{"n":11}`, []string{"web.count was not called", "maximum", "Parameters: web.count(n: integer)", "n: how far"}},
		{"wrong type", "web.count", `{"n":"three"}`, []string{"web.count was not called", "integer"}},
		{"missing", "web.count", `{}`, []string{"web.count was not called", "n"}},
		{"extra", "web.count", `{"n":2,"m":1}`, []string{"web.count was not called", "m"}},
		{"not an object", "web.echo", `[1,2]`, []string{"args must be an object", "got an array"}},
		{"stdio missing text", "notes.add", `{"tags":["x"]}`, []string{"notes.add was not called", "text", "Parameters: notes.add(text: string, tags?: string[])"}},
		{"stdio tags not a list", "notes.add", `{"text":"x","tags":"home"}`, []string{"notes.add was not called"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Call(t.Context(), tc.tool, json.RawMessage(tc.args))
			if !errors.Is(err, ErrBadArguments) {
				t.Fatalf("Call(%s, %s) = %v, want ErrBadArguments", tc.tool, tc.args, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	if calls := hs.Calls(); len(calls) != 0 {
		t.Errorf("the server saw refused calls: %v", calls)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("the notes server wrote its file for a refused call: %v", err)
	}
	// Arguments given as a JSON string holding an object are accepted.
	if text, _ := call(t, m, "web.count", `"{\"n\":4}"`); text != `counted: {"n":4}` {
		t.Errorf("string-wrapped args: %q", text)
	}
}

// TestCrashMidCallRestarts: a stdio server that exits during a call fails
// that call with a clear error naming the crash, is restarted (a new
// process), and serves the next call; Status counts the restart and keeps
// the last stderr line.
func TestCrashMidCallRestarts(t *testing.T) {
	t.Parallel()
	m := newManager(t, Options{})
	start(t, m, map[string]config.MCPServer{"mail": testServer("stdio"), "other": testServer("stdio")})
	pid1, _ := call(t, m, "mail.pid", `{}`)
	otherPid, _ := call(t, m, "other.pid", `{}`)

	_, err := m.Call(t.Context(), "mail.crash", json.RawMessage(`{}`))
	if !errors.Is(err, ErrServerDown) || !strings.Contains(err.Error(), "stopped during the call to mail.crash and is being restarted") {
		t.Fatalf("crash call = %v", err)
	}
	waitFor(t, "the restart", func() bool {
		st := m.Status()[0]
		return st.State == StateRunning && st.Restarts == 1
	})
	pid2, _ := call(t, m, "mail.pid", `{}`)
	if pid2 == pid1 {
		t.Errorf("same process after the crash: %s", pid1)
	}
	if text, _ := call(t, m, "mail.echo", `{"text":"back"}`); text != "echo: back" {
		t.Errorf("echo after restart = %q", text)
	}
	if p, _ := call(t, m, "other.pid", `{}`); p != otherPid {
		t.Errorf("the other server was restarted too: %s, was %s", p, otherPid)
	}
	if st := m.Status()[1]; st.Restarts != 0 || st.State != StateRunning {
		t.Errorf("other server: %+v", st)
	}
}

// TestHungCallTimesOut: a tool that never answers fails after the server's
// timeout with a clear error, and the server goes on serving other calls.
func TestHungCallTimesOut(t *testing.T) {
	t.Parallel()
	hs := newHTTPServer(t)
	stdio := testServer("stdio")
	stdio.Timeout = dur(300 * time.Millisecond)
	m := newManager(t, Options{})
	start(t, m, map[string]config.MCPServer{"s": stdio, "h": {URL: hs.URL, Timeout: dur(300 * time.Millisecond)}})
	for _, name := range []string{"s", "h"} {
		_, err := m.Call(t.Context(), name+".hang", nil)
		if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), name+".hang did not answer within 300ms") {
			t.Errorf("hang on %s = %v", name, err)
		}
		if text, _ := call(t, m, name+".echo", `{"text":"still here"}`); text != "echo: still here" {
			t.Errorf("echo on %s after a hang = %q", name, text)
		}
	}
	if st := m.Status(); st[0].Restarts != 0 || st[1].Restarts != 0 {
		t.Errorf("a timeout restarted a server: %+v", st)
	}
}

// TestFailingServerBacksOff: a server that cannot start is retried with
// doubling waits on the injected clock, reports why it failed, and never
// keeps the others from working.
func TestFailingServerBacksOff(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2025, 1, 1, 9, 0, 0, 0, time.UTC))
	m := newManager(t, Options{Clock: clk, MinBackoff: time.Second, MaxBackoff: 4 * time.Second})
	start(t, m, map[string]config.MCPServer{
		"broken":  testServer("fail"),
		"missing": {Command: "/nonexistent/mcp-server", Timeout: dur(time.Second)},
		"ok":      testServer("stdio"),
	})
	if text, _ := call(t, m, "ok.echo", `{"text":"fine"}`); text != "echo: fine" {
		t.Errorf("ok.echo = %q", text)
	}
	byName := func() map[string]ServerStatus {
		out := map[string]ServerStatus{}
		for _, s := range m.Status() {
			out[s.Name] = s
		}
		return out
	}
	waitFor(t, "both to be retrying", func() bool {
		st := byName()
		return st["broken"].State == StateRetrying && st["missing"].State == StateRetrying
	})
	st := byName()
	if !strings.Contains(st["broken"].Error, "cannot open the mailbox: permission denied") {
		t.Errorf("broken error = %q", st["broken"].Error)
	}
	if !strings.Contains(st["missing"].Error, "/nonexistent/mcp-server") {
		t.Errorf("missing error = %q", st["missing"].Error)
	}
	t0 := clk.Now()
	if got := st["broken"].NextAttempt.Sub(t0); got != time.Second {
		t.Errorf("first wait = %v, want 1s", got)
	}
	// Each failure doubles the wait, up to MaxBackoff.
	for i, want := range []time.Duration{2 * time.Second, 4 * time.Second, 4 * time.Second} {
		clk.AdvanceTo(byName()["broken"].NextAttempt)
		waitFor(t, "the next attempt to fail", func() bool {
			s := byName()["broken"]
			return s.Restarts == i+1 && s.State == StateRetrying && !s.NextAttempt.IsZero()
		})
		if got := byName()["broken"].NextAttempt.Sub(clk.Now()); got != want {
			t.Errorf("wait after failure %d = %v, want %v", i+2, got, want)
		}
	}
	if _, err := m.Call(t.Context(), "broken.echo", nil); !errors.Is(err, ErrServerDown) ||
		!strings.Contains(err.Error(), "host tool server broken is not running right now (retrying: ") || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("call to a server that never started = %v", err)
	}
	if text, _ := call(t, m, "ok.echo", `{"text":"still fine"}`); text != "echo: still fine" {
		t.Errorf("ok.echo = %q", text)
	}
}

// TestApplyReconciles: servers added, removed or changed are started,
// stopped or restarted; unchanged ones keep their process; disabled ones
// are listed but not run.
func TestApplyReconciles(t *testing.T) {
	t.Parallel()
	m := newManager(t, Options{})
	start(t, m, map[string]config.MCPServer{"keep": testServer("stdio"), "change": testServer("stdio"), "drop": testServer("stdio")})
	keepPid, _ := call(t, m, "keep.pid", `{}`)
	changePid, _ := call(t, m, "change.pid", `{}`)

	changed := testServer("stdio")
	changed.Args = []string{"-test.v=false"}
	disabled := testServer("stdio")
	disabled.Disabled = true
	ch := m.Apply(map[string]config.MCPServer{"keep": testServer("stdio"), "change": changed, "new": testServer("stdio"), "off": disabled})
	if !slices.Equal(ch.Added, []string{"new", "off"}) || !slices.Equal(ch.Removed, []string{"drop"}) ||
		!slices.Equal(ch.Restarted, []string{"change"}) || !slices.Equal(ch.Unchanged, []string{"keep"}) {
		t.Errorf("Apply = %+v", ch)
	}
	if err := m.WaitStarted(t.Context()); err != nil {
		t.Fatal(err)
	}
	if p, _ := call(t, m, "keep.pid", `{}`); p != keepPid {
		t.Errorf("unchanged server restarted: pid %s, was %s", p, keepPid)
	}
	if p, _ := call(t, m, "change.pid", `{}`); p == changePid {
		t.Errorf("changed server kept its process %s", p)
	}
	if text, _ := call(t, m, "new.echo", `{"text":"hello"}`); text != "echo: hello" {
		t.Errorf("new.echo = %q", text)
	}
	if _, err := m.Call(t.Context(), "drop.echo", nil); !errors.Is(err, ErrUnknownTool) {
		t.Errorf("removed server still answers: %v", err)
	}
	if _, err := m.Call(t.Context(), "off.echo", nil); err == nil || !strings.Contains(err.Error(), "disabled in config.json") {
		t.Errorf("disabled server: %v", err)
	}
	var states []string
	for _, s := range m.Status() {
		states = append(states, s.Name+"="+string(s.State))
	}
	if want := []string{"change=running", "keep=running", "new=running", "off=disabled"}; !slices.Equal(states, want) {
		t.Errorf("states = %v, want %v", states, want)
	}
	// The dropped process is gone.
	if err := processAlive(changePid); err == nil {
		t.Errorf("the replaced process %s is still running", changePid)
	}
}

// TestResultContent: text parts are joined, images passed on, links named,
// and a long result cut at MaxResultBytes on a character boundary.
func TestResultContent(t *testing.T) {
	t.Parallel()
	hs := newHTTPServer(t)
	m := newManager(t, Options{MaxResultBytes: 1001})
	start(t, m, map[string]config.MCPServer{"web": {URL: hs.URL, Timeout: dur(10 * time.Second)}})
	res, err := m.Call(t.Context(), "web.picture", nil)
	if err != nil || res.Text != "a red dot\n[resource dot: file:///dot.png]" || len(res.Images) != 1 ||
		res.Images[0].MimeType != "image/png" || string(res.Images[0].Data) != "\x89PNG fake" {
		t.Errorf("picture = %+v, %v", res, err)
	}
	res, err = m.Call(t.Context(), "web.big", nil)
	if err != nil || !strings.HasPrefix(res.Text, strings.Repeat("é", 500)+"\n[... result cut at 1000 bytes of 81920]") {
		t.Errorf("big = %.80q..., %v", res.Text, err)
	}
}

// TestHTTPServerComesAndGoes: an HTTP server that is not up yet is retried
// until it answers; when it goes away a call fails clearly and the
// connection is re-established once it is back.
func TestHTTPServerComesAndGoes(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	serve := func() *http.Server {
		t.Helper()
		var l net.Listener
		waitFor(t, "the port", func() bool {
			var err error
			l, err = net.Listen("tcp", addr)
			return err == nil
		})
		srv := mcp.NewServer(&mcp.Implementation{Name: "later", Version: "1"}, nil)
		testTools(srv, releasedAtEnd(t))
		hs := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)}
		go hs.Serve(l)
		return hs
	}
	m := newManager(t, Options{MaxBackoff: 50 * time.Millisecond})
	start(t, m, map[string]config.MCPServer{"later": {URL: "http://" + addr + "/", Timeout: dur(5 * time.Second)}})
	if st := m.Status()[0]; st.State != StateRetrying || !strings.Contains(st.Error, "connection refused") {
		t.Errorf("status before the server is up = %+v", st)
	}
	hs := serve()
	waitFor(t, "the connection", func() bool { return m.Status()[0].State == StateRunning })
	if text, _ := call(t, m, "later.echo", `{"text":"up"}`); text != "echo: up" {
		t.Errorf("echo = %q", text)
	}
	hs.Close()
	if _, err := m.Call(t.Context(), "later.echo", json.RawMessage(`{"text":"down"}`)); !errors.Is(err, ErrServerDown) {
		t.Errorf("call while the server is down = %v", err)
	}
	hs = serve()
	defer hs.Close()
	waitFor(t, "the reconnection", func() bool {
		res, err := m.Call(t.Context(), "later.echo", json.RawMessage(`{"text":"again"}`))
		return err == nil && res.Text == "echo: again"
	})
	if st := m.Status()[0]; st.Restarts == 0 {
		t.Errorf("no reconnection counted: %+v", st)
	}
}

// TestStdioEnvironmentAndDirectory: a stdio server runs in Dir (a relative
// command path is relative to it) with the base environment and its own
// env only: none of Mother's other variables (tokens, keys) reach it.
func TestStdioEnvironmentAndDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "bin"), 0o755)
	b, err := os.ReadFile(selfBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "server"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		return map[string]string{"PATH": "/usr/bin:/bin", "HOME": "/home/mother", "DISCORD_BOT_TOKEN": "secret", "ANTHROPIC_API_KEY": "sk-secret"}[k]
	}
	m := newManager(t, Options{Dir: dir, BaseEnv: DefaultEnv(getenv)})
	start(t, m, map[string]config.MCPServer{"s": {Command: "bin/server",
		Env: map[string]string{"HOSTTOOLS_TEST_SERVER": "stdio", "MAIL_PASSWORD": "for-this-server"}, Timeout: dur(10 * time.Second)}})
	text, _ := call(t, m, "s.env", `{}`)
	lines := strings.Split(text, "\n")
	want := []string{"cwd=" + dir, "PATH=/usr/bin:/bin", "HOME=/home/mother", "HOSTTOOLS_TEST_SERVER=stdio", "MAIL_PASSWORD=for-this-server"}
	if !slices.Equal(lines, want) {
		t.Errorf("server environment = %q, want %q", lines, want)
	}
}

// TestToolListChanged: a server that adds a tool while connected says so,
// and the new tool is listed and callable without a restart.
func TestToolListChanged(t *testing.T) {
	t.Parallel()
	srv := mcp.NewServer(&mcp.Implementation{Name: "growing", Version: "1"}, nil)
	release := make(chan struct{})
	testTools(srv, release)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close) // after the manager's cleanup has closed its session
	t.Cleanup(func() { close(release) })
	m := newManager(t, Options{})
	start(t, m, map[string]config.MCPServer{"g": {URL: hs.URL, Timeout: dur(5 * time.Second)}})
	if _, err := m.Call(t.Context(), "g.shout", nil); !errors.Is(err, ErrUnknownTool) {
		t.Fatalf("g.shout before it exists: %v", err)
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "shout", Description: "Say it loud."},
		func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
			return textResult(strings.ToUpper(a.Text)), nil, nil
		})
	waitFor(t, "the new tool", func() bool { return slices.Contains(qualified(m.Tools()), "g.shout") })
	if text, _ := call(t, m, "g.shout", `{"text":"hey"}`); text != "HEY" {
		t.Errorf("g.shout = %q", text)
	}
	if st := m.Status()[0]; st.Restarts != 0 {
		t.Errorf("the server was restarted: %+v", st)
	}
}

// BenchmarkCall measures one host tool call end to end: validation against
// the schema, a JSON-RPC round trip to a stdio process and back, and the
// result conversion.
func BenchmarkCall(b *testing.B) {
	m := New(Options{Dir: b.TempDir(), MinBackoff: 10 * time.Millisecond})
	defer m.Close(context.Background())
	m.Apply(map[string]config.MCPServer{"s": testServer("stdio")})
	if err := m.WaitStarted(b.Context()); err != nil {
		b.Fatal(err)
	}
	args := json.RawMessage(`{"n":3}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Call(b.Context(), "s.count", args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidate is the local schema check alone.
func BenchmarkValidate(b *testing.B) {
	r, err := compileSchema(json.RawMessage(`{"type":"object","required":["text"],"properties":{"text":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}}}`))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		obj, _ := decodeArgs(json.RawMessage(`{"text":"buy milk","tags":["home","shopping"]}`))
		if err := r.Validate(obj); err != nil {
			b.Fatal(err)
		}
	}
}
