package hosttools

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/prompt"
)

// State is where a server is in its life.
type State string

// States.
const (
	// StateStarting: starting the process or connecting, then listing its
	// tools.
	StateStarting State = "starting"
	// StateRunning: connected; its tools can be called.
	StateRunning State = "running"
	// StateRetrying: it failed, crashed or exited; the next attempt is due
	// at ServerStatus.NextAttempt.
	StateRetrying State = "retrying"
	// StateStopped: removed from the configuration, or Mother is stopping.
	StateStopped State = "stopped"
	// StateDisabled: "disabled": true in config.json.
	StateDisabled State = "disabled"
)

// Options configure a Manager. Zero values take the defaults.
type Options struct {
	// Dir is where stdio servers run (the data directory); a relative
	// command path ("bin/mcp-notes") is relative to it.
	Dir    string
	Logger *slog.Logger
	// Clock times the backoff between attempts (default the wall clock).
	Clock clock.Clock
	// MinBackoff is the wait after a first failure, doubling with each
	// further one up to MaxBackoff (defaults 1s and 1m).
	MinBackoff, MaxBackoff time.Duration
	// StableAfter: a session that lived this long resets the backoff
	// (default 1m).
	StableAfter time.Duration
	// ConnectTimeout bounds starting, the MCP handshake and listing the
	// tools (default 30s).
	ConnectTimeout time.Duration
	// StopTimeout is how long a stdio server gets to exit after its stdin
	// closes, and again after SIGTERM, before it is killed (default 3s).
	StopTimeout time.Duration
	// BaseEnv is the environment every stdio server starts with, before
	// its own "env" (default: PATH, HOME, USER, LOGNAME, SHELL, TERM, LANG,
	// LC_ALL, LC_CTYPE, TZ and TMPDIR from Mother's environment; never her
	// tokens or keys).
	BaseEnv []string
	// MaxResultBytes caps the text of one result (default 50 KiB).
	MaxResultBytes int
	// Version is reported to servers as Mother's client version.
	Version string
}

// Manager runs the configured MCP servers. It is safe for concurrent use.
type Manager struct {
	opts   Options
	logger *slog.Logger

	mu      sync.Mutex
	servers map[string]*server
	closed  bool
	// applyMu orders Apply calls: one reconciliation at a time.
	applyMu sync.Mutex
}

// New returns a Manager with no servers; Apply gives it its configuration.
func New(opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = time.Minute
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = opts.MinBackoff
	}
	if opts.StableAfter <= 0 {
		opts.StableAfter = time.Minute
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 30 * time.Second
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = 3 * time.Second
	}
	if opts.BaseEnv == nil {
		opts.BaseEnv = DefaultEnv(os.Getenv)
	}
	if opts.MaxResultBytes <= 0 {
		opts.MaxResultBytes = 50 * 1024
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	return &Manager{opts: opts, logger: opts.Logger.With("component", "hosttools"), servers: map[string]*server{}}
}

// inheritedEnv are the variables a stdio server gets from Mother.
var inheritedEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR"}

// DefaultEnv is the base environment of stdio servers: the harmless
// variables of Mother's environment (never tokens or keys).
func DefaultEnv(getenv func(string) string) []string {
	env := []string{}
	for _, k := range inheritedEnv {
		if v := getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// Changes is what an Apply did, by server name.
type Changes struct {
	Added, Removed, Restarted, Unchanged []string
}

// Apply makes the running servers match servers (config.json's
// mcpServers): new ones start, removed ones stop, changed ones restart,
// unchanged ones keep running untouched (a server waiting to retry keeps
// waiting). It returns once the stopped servers have exited; starting
// happens in the background (see WaitStarted).
func (m *Manager) Apply(servers map[string]config.MCPServer) Changes {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	var ch Changes
	var stop, start []*server
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ch
	}
	for name, old := range m.servers {
		cfg, ok := servers[name]
		switch {
		case !ok:
			ch.Removed = append(ch.Removed, name)
			stop = append(stop, old)
			delete(m.servers, name)
		case !sameConfig(old.cfg, cfg):
			ch.Restarted = append(ch.Restarted, name)
			stop = append(stop, old)
			s := m.newServer(name, cfg)
			m.servers[name] = s
			start = append(start, s)
		default:
			ch.Unchanged = append(ch.Unchanged, name)
		}
	}
	for name, cfg := range servers {
		if _, ok := m.servers[name]; ok {
			continue
		}
		ch.Added = append(ch.Added, name)
		s := m.newServer(name, cfg)
		m.servers[name] = s
		start = append(start, s)
	}
	m.mu.Unlock()

	stopAll(stop)
	for _, s := range start {
		s.start()
	}
	for _, l := range [][]string{ch.Added, ch.Removed, ch.Restarted, ch.Unchanged} {
		sort.Strings(l)
	}
	if len(ch.Added)+len(ch.Removed)+len(ch.Restarted) > 0 {
		m.logger.Info("host tool servers applied", "added", strings.Join(ch.Added, ","), "removed", strings.Join(ch.Removed, ","),
			"restarted", strings.Join(ch.Restarted, ","), "unchanged", len(ch.Unchanged))
	}
	return ch
}

// sameConfig compares two server entries as written in config.json.
func sameConfig(a, b config.MCPServer) bool {
	norm := func(s config.MCPServer) config.MCPServer {
		if len(s.Args) == 0 {
			s.Args = nil
		}
		if len(s.Env) == 0 {
			s.Env = nil
		}
		if len(s.Headers) == 0 {
			s.Headers = nil
		}
		return s
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

func stopAll(servers []*server) {
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Add(1)
		go func() { defer wg.Done(); s.stop() }()
	}
	wg.Wait()
}

// Close stops every server and waits for them (until ctx ends). The
// Manager accepts no configuration afterwards.
func (m *Manager) Close(ctx context.Context) error {
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.mu.Lock()
	m.closed = true
	var all []*server
	for _, s := range m.servers {
		all = append(all, s)
	}
	m.mu.Unlock()
	done := make(chan struct{})
	go func() { stopAll(all); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return errors.New("host tool servers still stopping: " + ctx.Err().Error())
	}
}

// WaitStarted blocks until every enabled server has finished its first
// attempt to start (successfully or not), or ctx ends. Mother waits a
// little for it at start so the first prompt lists the tools.
func (m *Manager) WaitStarted(ctx context.Context) error {
	for _, s := range m.snapshot() {
		select {
		case <-s.firstTry:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (m *Manager) snapshot() []*server {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*server, 0, len(m.servers))
	for _, s := range m.servers {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// ServerStatus is one server as momctl tools ls shows it.
type ServerStatus struct {
	Name string
	// Transport is "stdio" or "http".
	Transport string
	State     State
	// Error is the last failure ("" when running cleanly).
	Error string
	// Restarts counts attempts after the first.
	Restarts int
	// Since is when the server entered its state.
	Since time.Time
	// NextAttempt is when a retrying server tries again.
	NextAttempt time.Time
	// Tools are its tools (the last known ones while it is retrying).
	Tools []Tool
}

// Status reports every configured server, by name.
func (m *Manager) Status() []ServerStatus {
	var out []ServerStatus
	for _, s := range m.snapshot() {
		out = append(out, s.status())
	}
	return out
}

// Tools returns the tools of every enabled server (the last known ones for
// a server that is restarting), sorted by qualified name.
func (m *Manager) Tools() []Tool {
	var out []Tool
	for _, s := range m.snapshot() {
		for _, t := range s.knownTools() {
			out = append(out, *t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Qualified < out[j].Qualified })
	return out
}

// PromptTools describes the tools for the system prompt.
func (m *Manager) PromptTools() []prompt.HostTool {
	return promptTools(m.Tools())
}

func promptTools(tools []Tool) []prompt.HostTool {
	out := make([]prompt.HostTool, 0, len(tools))
	for _, t := range tools {
		out = append(out, t.Prompt())
	}
	return out
}
