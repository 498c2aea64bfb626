package hosttools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/prompt"
)

// Tool is one tool of a server.
type Tool struct {
	Server string
	// Name is the tool's own name on its server.
	Name string
	// Qualified is how Mother's model calls it: "server.tool".
	Qualified   string
	Description string
	// Schema is the JSON schema of its arguments, as the server gave it.
	Schema json.RawMessage
	// Params summarise Schema for the prompt.
	Params []prompt.HostToolParam
	// SchemaProblem says why arguments are not validated locally (a
	// schema this client cannot resolve); the server still validates.
	SchemaProblem string

	validator *jsonschema.Resolved
}

// Prompt is the tool as the system prompt lists it.
func (t Tool) Prompt() prompt.HostTool {
	return prompt.HostTool{Name: t.Qualified, Description: t.Description, Params: t.Params}
}

// server is one configured MCP server and the goroutine that keeps it
// alive.
type server struct {
	name   string
	cfg    config.MCPServer
	m      *Manager
	logger *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	// done is closed when the supervisor has returned (or never ran).
	done chan struct{}
	// firstTry is closed when the first attempt to start has finished.
	firstTry     chan struct{}
	firstTryOnce sync.Once

	mu       sync.Mutex
	state    State
	err      string
	restarts int
	since    time.Time
	next     time.Time
	live     *session
	tools    []*Tool // the last known tools, sorted by name
	stderr   *tail
}

// session is one connection to a server (one process for stdio).
type session struct {
	cs    *mcp.ClientSession
	proc  *stdioProcess // a stdio server's process (nil over HTTP)
	done  chan struct{} // closed when the connection has ended
	err   error         // why it ended, set before done closes
	tools map[string]*Tool
}

func (m *Manager) newServer(name string, cfg config.MCPServer) *server {
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{
		name: name, cfg: cfg, m: m,
		logger: m.logger.With("server", name),
		ctx:    ctx, cancel: cancel,
		done: make(chan struct{}), firstTry: make(chan struct{}),
		state: StateStarting, since: m.opts.Clock.Now(),
		stderr: &tail{},
	}
	if cfg.Disabled {
		s.state = StateDisabled
	}
	return s
}

func (s *server) transport() string {
	if s.cfg.Command != "" {
		return "stdio"
	}
	return "http"
}

// start launches the supervisor (not for a disabled server).
func (s *server) start() {
	if s.cfg.Disabled {
		close(s.done)
		s.firstTryOnce.Do(func() { close(s.firstTry) })
		s.logger.Info("host tool server disabled")
		return
	}
	go s.supervise()
}

// stop ends the supervisor, closing the session (the process exits) and
// waits for it.
func (s *server) stop() {
	s.cancel()
	<-s.done
	s.mu.Lock()
	if s.state != StateDisabled {
		s.setLocked(StateStopped, "")
	}
	s.mu.Unlock()
}

func (s *server) setLocked(st State, err string) {
	if s.state != st {
		s.since = s.m.opts.Clock.Now()
	}
	s.state, s.err = st, err
}

// supervise starts the server and starts it again, with backoff, whenever
// it fails, until the server is stopped.
func (s *server) supervise() {
	defer close(s.done)
	defer s.firstTryOnce.Do(func() { close(s.firstTry) })
	failures := 0
	for {
		s.mu.Lock()
		s.setLocked(StateStarting, s.err)
		s.mu.Unlock()
		began := s.m.opts.Clock.Now()
		l, err := s.connect(s.ctx)
		if err == nil {
			s.mu.Lock()
			s.live = l
			s.tools = sortedTools(l.tools)
			n := len(s.tools)
			s.setLocked(StateRunning, "")
			s.mu.Unlock()
			s.firstTryOnce.Do(func() { close(s.firstTry) })
			s.logger.Info("host tool server running", "transport", s.transport(), "tools", n)
			select {
			case <-l.done:
			case <-s.ctx.Done():
			}
			s.mu.Lock()
			s.live = nil
			s.mu.Unlock()
			// Closing reaps the process (stdin closed, then SIGTERM, then
			// SIGKILL after StopTimeout each).
			closed := s.close(l)
			err = s.exitError(l, closed)
			if s.ctx.Err() != nil {
				s.logger.Info("host tool server stopped")
				return
			}
			if s.m.opts.Clock.Now().Sub(began) >= s.m.opts.StableAfter {
				failures = 0
			}
		}
		if s.ctx.Err() != nil {
			return
		}
		failures++
		wait := s.backoff(failures)
		// The timer is armed before the next attempt is published, so
		// whoever reads NextAttempt (and advances a test clock to it)
		// finds the timer that fires then.
		fired := make(chan struct{})
		s.mu.Lock()
		s.setLocked(StateRetrying, err.Error())
		s.next = s.m.opts.Clock.Now().Add(wait)
		timer := s.m.opts.Clock.AfterFunc(wait, func() { close(fired) })
		s.mu.Unlock()
		s.firstTryOnce.Do(func() { close(s.firstTry) })
		s.logger.Warn("host tool server failed; retrying", "err", err, "in", wait, "failures", failures)
		if !s.await(fired, timer) {
			return
		}
		s.mu.Lock()
		s.restarts++
		s.next = time.Time{}
		s.mu.Unlock()
	}
}

// close ends a session. A stdio server is killed within about three
// StopTimeouts; an HTTP server that does not answer the closing DELETE is
// left behind after as long, so a stuck server cannot hold up a reload or
// a shutdown.
func (s *server) close(l *session) (closed bool) {
	done := make(chan struct{})
	go func() {
		_ = l.cs.Close()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-clock.After(s.m.opts.Clock, 3*s.m.opts.StopTimeout+time.Second):
		s.logger.Warn("host tool server did not close in time; leaving it")
		return false
	}
}

func (s *server) backoff(failures int) time.Duration {
	d := s.m.opts.MinBackoff
	for i := 1; i < failures && d < s.m.opts.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, s.m.opts.MaxBackoff)
}

// await waits for a timer armed on the Manager's clock to fire; false
// when the server is stopped first.
func (s *server) await(fired <-chan struct{}, t clock.Timer) bool {
	select {
	case <-fired:
		return true
	case <-s.ctx.Done():
		t.Stop()
		return false
	}
}

// exitError describes why a session ended: the process's exit status and
// the last line it wrote to stderr, when there are any. The exit status is
// read only once the session has closed (the process has been waited
// for by then, see stdioProcess).
func (s *server) exitError(l *session, closed bool) error {
	var parts []string
	if l.proc != nil {
		if ps, ok := l.proc.exitState(); closed && ok {
			parts = append(parts, "the process exited ("+ps.String()+")")
		} else {
			parts = append(parts, "the process closed its output")
		}
	} else {
		msg := "the connection ended"
		select {
		case <-l.done:
			if l.err != nil {
				msg += " (" + l.err.Error() + ")"
			}
		default:
		}
		parts = append(parts, msg)
	}
	if last := s.stderr.last(); last != "" {
		parts = append(parts, "last stderr line: "+last)
	}
	return errors.New(strings.Join(parts, "; "))
}

// connect starts the server (or reaches it), completes the MCP handshake
// and lists its tools, within ConnectTimeout.
func (s *server) connect(ctx context.Context) (*session, error) {
	cctx, cancel := context.WithTimeout(ctx, s.m.opts.ConnectTimeout)
	defer cancel()
	l := &session{done: make(chan struct{})}
	var tr mcp.Transport
	if s.cfg.Command != "" {
		l.proc = newStdioProcess(s.command(), s.m.opts.StopTimeout, s.m.opts.Clock)
		tr = l.proc
	} else {
		tr = &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: s.httpClient(), MaxRetries: 2}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mother", Version: s.m.opts.Version}, &mcp.ClientOptions{
		// No roots, sampling or elicitation: Mother only calls tools.
		Capabilities:           &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { go s.refreshTools(l) },
	})
	cs, err := client.Connect(cctx, tr, nil)
	if err != nil {
		return nil, s.connectError(cctx, "start", err)
	}
	l.cs = cs
	tools, err := s.listTools(cctx, cs)
	if err != nil {
		_ = cs.Close()
		return nil, s.connectError(cctx, "list tools", err)
	}
	l.tools = tools
	go func() {
		l.err = cs.Wait()
		close(l.done)
	}()
	return l, nil
}

func (s *server) connectError(ctx context.Context, op string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %s", s.m.opts.ConnectTimeout)
	}
	if last := s.stderr.last(); last != "" {
		return fmt.Errorf("%s: %w; last stderr line: %s", op, err, last)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// command builds the stdio server's process: in Dir, with the base
// environment plus the configured env, its stderr logged at debug level,
// in its own process group (a terminal's Ctrl-C reaches Mother, who then
// stops it properly).
func (s *server) command() *exec.Cmd {
	path := s.cfg.Command
	if strings.ContainsRune(path, filepath.Separator) && !filepath.IsAbs(path) && s.m.opts.Dir != "" {
		path = filepath.Join(s.m.opts.Dir, path)
	}
	cmd := exec.Command(path, s.cfg.Args...)
	cmd.Dir = s.m.opts.Dir
	cmd.Env = append([]string(nil), s.m.opts.BaseEnv...)
	keys := make([]string, 0, len(s.cfg.Env))
	for k := range s.cfg.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd.Env = append(cmd.Env, k+"="+s.cfg.Env[k])
	}
	cmd.Stderr = &lineLogger{logger: s.logger, tail: s.stderr}
	setProcessGroup(cmd)
	return cmd
}

// httpClient sends the configured headers (an API key, say) with every
// request. No overall timeout: the server's event stream is long-lived;
// calls are bounded by their context.
func (s *server) httpClient() *http.Client {
	if len(s.cfg.Headers) == 0 {
		return &http.Client{}
	}
	return &http.Client{Transport: headerTransport{base: http.DefaultTransport, headers: s.cfg.Headers}}
}

type headerTransport struct {
	base    http.RoundTripper
	headers map[string]config.Secret
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v.Value())
	}
	return h.base.RoundTrip(r)
}

// listTools reads every page of the server's tools and prepares their
// schemas.
func (s *server) listTools(ctx context.Context, cs *mcp.ClientSession) (map[string]*Tool, error) {
	tools := map[string]*Tool{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		if t == nil || t.Name == "" {
			continue
		}
		if _, dup := tools[t.Name]; dup {
			s.logger.Warn("host tool listed twice; keeping the first", "tool", t.Name)
			continue
		}
		tools[t.Name] = s.prepare(t)
	}
	return tools, nil
}

func (s *server) prepare(t *mcp.Tool) *Tool {
	schema, _ := json.Marshal(t.InputSchema)
	tool := &Tool{
		Server:      s.name,
		Name:        t.Name,
		Qualified:   s.name + "." + t.Name,
		Description: strings.TrimSpace(t.Description),
		Schema:      schema,
		Params:      summarise(schema),
	}
	if tool.Description == "" {
		tool.Description = strings.TrimSpace(t.Title)
	}
	v, err := compileSchema(schema)
	if err != nil {
		tool.SchemaProblem = err.Error()
		s.logger.Warn("host tool arguments will not be validated locally", "tool", t.Name, "err", err)
	}
	tool.validator = v
	return tool
}

// refreshTools re-lists the tools after the server said they changed.
func (s *server) refreshTools(l *session) {
	s.mu.Lock()
	current := s.live == l
	s.mu.Unlock()
	if !current {
		// A notice during the handshake: the listing that follows it
		// is fresh anyway.
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.m.opts.ConnectTimeout)
	defer cancel()
	tools, err := s.listTools(ctx, l.cs)
	if err != nil {
		s.logger.Warn("cannot re-list host tools after a change notice", "err", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live != l {
		return
	}
	l.tools = tools
	s.tools = sortedTools(tools)
	s.logger.Info("host tools changed", "tools", len(tools))
}

func sortedTools(m map[string]*Tool) []*Tool {
	out := make([]*Tool, 0, len(m))
	for _, t := range m {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (s *server) knownTools() []*Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == StateDisabled || s.state == StateStopped {
		return nil
	}
	return append([]*Tool(nil), s.tools...)
}

func (s *server) status() ServerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := ServerStatus{
		Name: s.name, Transport: s.transport(), State: s.state, Error: s.err,
		Restarts: s.restarts, Since: s.since, NextAttempt: s.next,
	}
	for _, t := range s.tools {
		st.Tools = append(st.Tools, *t)
	}
	return st
}

// current is the live session and its tool, or why there is none.
func (s *server) current(tool string) (*session, *Tool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == nil {
		why := string(s.state)
		if s.err != "" {
			why += ": " + s.err
		}
		return nil, nil, kindf(ErrServerDown, "host tool server %s is not running right now (%s); try again later", s.name, why)
	}
	t, ok := s.live.tools[tool]
	if !ok {
		return nil, nil, kindf(ErrUnknownTool, "host tool server %s has no tool %q (its tools: %s)", s.name, tool, toolNames(s.tools))
	}
	return s.live, t, nil
}

func toolNames(tools []*Tool) string {
	if len(tools) == 0 {
		return "none"
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// tail keeps the last lines a server wrote to stderr.
type tail struct {
	mu    sync.Mutex
	lines []string
}

const tailLines, tailLineMax = 8, 300

func (t *tail) add(line string) {
	if len(line) > tailLineMax {
		line = line[:tailLineMax] + "…"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > tailLines {
		t.lines = t.lines[len(t.lines)-tailLines:]
	}
}

func (t *tail) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return ""
	}
	return t.lines[len(t.lines)-1]
}

// lineLogger logs a server's stderr line by line at debug level (servers
// may log what they handle) and keeps the tail for error messages.
type lineLogger struct {
	logger  *slog.Logger
	tail    *tail
	mu      sync.Mutex
	partial []byte
}

func (w *lineLogger) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	for {
		i := strings.IndexByte(string(w.partial), '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(w.partial[:i]), "\r")
		w.partial = w.partial[i+1:]
		if line == "" {
			continue
		}
		w.tail.add(line)
		w.logger.Debug("server stderr", "line", line)
	}
	if len(w.partial) > 64*1024 {
		w.tail.add(string(w.partial))
		w.partial = w.partial[:0]
	}
	return len(p), nil
}
