// Package daemon runs one Mother process: it builds the object graph from
// <data>/config.json, starts it in order, serves until its context ends or
// a signal arrives, and stops it in order.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/cli"
	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/dataformat"
	"github.com/mother-chat/mother/pkg/disk"
	"github.com/mother-chat/mother/pkg/events"
	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/metrics"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/providers"
	"github.com/mother-chat/mother/pkg/mother"
	"github.com/mother-chat/mother/pkg/prompt"
	"github.com/mother-chat/mother/pkg/store"
	"github.com/mother-chat/mother/pkg/termtext"
	"github.com/mother-chat/mother/pkg/tools"
	release "github.com/mother-chat/mother/pkg/version"
)

// Errors Run and CheckConfig return that callers branch on (the mother
// command exits 2 on them, 3 on dataformat.ErrNewer, 1 on any other
// error).
var (
	// ErrConfig: the configuration cannot run (config.json or the
	// environment; a model provider or an adapter it names).
	ErrConfig = errors.New("invalid configuration")
	// ErrUsage: the way Mother was started cannot work (a log level or
	// format that does not exist; no adapter outside terminal mode).
	ErrUsage = errors.New("usage")
)

// Options configure Run.
type Options struct {
	// DataDir holds config.json and everything Mother keeps.
	DataDir string
	// CLI makes the terminal a channel: lines on Stdin are messages,
	// replies go to Stdout; Run returns once Stdin ends and the work in
	// flight is done. Without it Run serves the configured adapters.
	CLI bool
	// LogLevel overrides the configuration's log.level (and the default
	// warn of terminal mode) when not empty.
	LogLevel string
	// Version is reported in logs, momctl status and metrics.
	Version string
	// Stdin and Stdout are the terminal of CLI mode (nil: empty, and
	// discarded).
	Stdin  io.Reader
	Stdout io.Writer
	// Stderr receives the log and, as "mother: <what>", every failure
	// when it happens.
	Stderr io.Writer
	// Getenv reads the environment: config.json's overrides and
	// systemd's NOTIFY_SOCKET and WATCHDOG_USEC (nil: os.Getenv).
	Getenv func(string) string
	// Clock schedules the events and the watchdog pings, bounds the wait
	// for host tool servers at start and gives the start time (nil:
	// clock.Real).
	Clock clock.Clock
}

// kindError gives err the kind of a sentinel (errors.Is) without changing
// its text.
type kindError struct {
	kind error
	err  error
}

func (e *kindError) Error() string        { return e.err.Error() }
func (e *kindError) Unwrap() error        { return e.err }
func (e *kindError) Is(target error) bool { return target == e.kind }

func configErr(err error) error { return &kindError{kind: ErrConfig, err: err} }
func usageErr(err error) error  { return &kindError{kind: ErrUsage, err: err} }

// loadConfig loads <data>/config.json with the environment overrides.
func loadConfig(dataDir string, getenv func(string) string) (*config.Config, error) {
	cfg, err := config.Load(dataDir, getenv)
	if err != nil {
		return nil, invalid(err)
	}
	return cfg, nil
}

// invalid is an ErrConfig that lists every problem of err, one per line.
func invalid(err error) error {
	return fmt.Errorf("%w:\n%s", ErrConfig, indent(err.Error()))
}

// CheckConfig validates <data>/config.json (config.Load refuses an adapter
// type this binary does not link) and returns a summary: a line on the
// configuration, then what starting this release would change (the data
// directory's migrations, old names of renamed fields). Its error
// (ErrConfig) lists every problem; a data directory of a newer format is
// dataformat.ErrNewer. It writes nothing.
func CheckConfig(dataDir string, getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if _, err := dataformat.Check(dataDir, dataformat.Release); err != nil {
		return "", err
	}
	cfg, err := loadConfig(dataDir, getenv)
	if err != nil {
		return "", err
	}
	if err := checkAdapters(dataDir, cfg); err != nil {
		return "", err
	}
	lines := []string{fmt.Sprintf("configuration OK: %d adapter(s), model %s/%s, %d chick tier(s), %d host tool server(s)", len(cfg.Adapters), cfg.Model.Provider, cfg.Model.ID, len(cfg.Chicks.Tiers), len(cfg.MCPServers))}
	preview, err := dataformat.Preview(dataDir, dataformat.Release)
	if err != nil {
		return "", err
	}
	lines = append(lines, preview)
	for _, r := range cfg.Renamed() {
		lines = append(lines, "warning: "+r.Warning())
	}
	return strings.Join(lines, "\n"), nil
}

// Run runs Mother on opts.DataDir until ctx ends, SIGINT or SIGTERM
// arrives (SIGHUP reloads config.json) or, in terminal mode, stdin ends.
// Each failure is written to opts.Stderr when it happens, so it reads in
// order with the log; the returned error holds them all (nil after a
// clean stop). errors.Is(err, ErrConfig) and errors.Is(err, ErrUsage) tell
// a configuration or usage problem from a failure.
func Run(ctx context.Context, opts Options) error {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Stdin == nil {
		opts.Stdin = strings.NewReader("")
	}
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	stderr := opts.Stderr
	if stderr == nil {
		stderr = io.Discard
	}
	r := &reporter{w: stderr}
	dataDir := opts.DataDir

	// The data directory's format comes first, before anything under it
	// is created or written: one of a newer release is refused as it is.
	if _, err := dataformat.Check(dataDir, dataformat.Release); err != nil {
		return r.fail(err)
	}
	cfg, err := loadConfig(dataDir, opts.Getenv)
	if err != nil {
		return r.fail(err)
	}

	level := cfg.Log.Level
	if opts.CLI {
		level = "warn"
	}
	if opts.LogLevel != "" {
		level = opts.LogLevel
	}
	// base carries no component; each subsystem scopes it with its own
	// (component=store, mother, events, nest, ...), so every line has
	// exactly one. logger is this package's own.
	base, err := newLogger(stderr, cfg.Log.Format, level)
	if err != nil {
		return r.fail(usageErr(err))
	}
	logger := base.With("component", "daemon")
	for _, rn := range cfg.Renamed() {
		logger.Warn(rn.Warning())
	}

	// An older format is migrated before any store opens; the directory
	// is held (a rollback waits for her to stop) until Run returns.
	dd, err := dataformat.Prepare(dataDir, dataformat.Release)
	if err != nil {
		return r.fail(err)
	}
	defer dd.Close()
	logMigration(logger, dd)

	st, err := store.Open(dataDir, store.Options{Logger: base})
	if err != nil {
		return r.fail(err)
	}
	defer st.Close()
	// The data directory's disk: every failed write or fsync of Mother's
	// files is reported to it; a full or failing disk makes her refuse
	// what she could not keep until a probe can write again.
	dk := disk.New(st.DataDir(), disk.Options{Logger: base, Clock: opts.Clock})
	defer dk.Close()
	defer fsync.OnFailure(dk.Report)()

	// MOTHER.md, MEMORY.md and SYSTEM.md are created on first start;
	// REFERENCE.md is regenerated at every start.
	if created, err := prompt.Scaffold(st.Workspace()); err != nil {
		return r.fail(err)
	} else if len(created) > 0 {
		logger.Info("workspace files created", "files", strings.Join(created, ", "))
	}
	if err := prompt.WriteReference(st.Workspace(), time.Local, prompt.LimitsFrom(cfg)); err != nil {
		// The one from the last start is there (or none: the prompt
		// then lacks its pointer to it); a full disk is no reason to
		// stay down.
		logger.Warn("REFERENCE.md not written; the last one stays", "err", err)
	}
	// Mother's own read, confined to the workspace and to the channel of
	// the run. Her write and edit (confined to her own files) come with
	// mother.New; she never gets bash.
	motherTools, err := tools.ReadOnly(st.Workspace(), mother.ReadPolicy(st.Workspace()))
	if err != nil {
		return r.fail(err)
	}

	// Every provider is built once; Mother's model and each tier with
	// fallbacks share the providers' health (the status page shows it).
	models := providers.NewSet(cfg.Providers, opts.Clock, nil)
	// Host tools: the MCP servers of config.json, called through
	// invoke_tool, listed in the prompt, and offered to chicks as far as
	// chicks.hostTools allows.
	host := startHostSide(cfg, st.DataDir(), base, opts.Version, opts.Clock)
	// Every return stops the servers; shutdown does it first, in order.
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = host.close(cctx)
	}()
	mx := metrics.New(metrics.Options{Version: opts.Version, Clock: opts.Clock})
	ch, err := startChicks(cfg, st, dk, host, models, base, mx, opts.Version, opts.Clock)
	if err != nil {
		return r.fail(err)
	}
	defer ch.close()
	// Mother's own model goes through the broker like a chick's: every
	// call reserved against her caps before it is sent.
	provider, err := ch.broker.MotherModel(motherCaller)
	if err != nil {
		return r.fail(configErr(fmt.Errorf("model.provider: %w", err)))
	}
	// A burst across many channels queues here rather than opening a
	// stream per channel (see model.Limit).
	provider = model.Limit(provider, cfg.Model.MaxParallel)
	// Events target "<adapter>/<channel>"; in terminal mode the one
	// adapter is "cli", so "local" alone also works.
	adapterNames := cfg.SortedAdapterNames()
	if opts.CLI {
		adapterNames = []string{"cli"}
	}
	watcher, err := events.New(events.Options{
		Dir:      st.EventsDir(),
		StateDir: filepath.Join(st.DataDir(), "state", "events"),
		Resolve:  events.AdapterResolver(adapterNames),
		Clock:    opts.Clock,
		Logger:   base,
		Grace:    cfg.Events.OneShotGrace.Duration,
		Metrics:  mx,
	})
	if err != nil {
		return r.fail(err)
	}
	ch.nest.SetEvents(watcher)
	motherTools = append(motherTools, mother.MemoryTool(st.Workspace()))
	motherTools = append(motherTools, events.Tools(watcher)...)
	motherTools = append(motherTools, host.tools.InvokeTool())
	// The search over the channels' history: its index catches up in
	// the background (recall.go).
	idx, stopRecall := startRecall(cfg, st, recallEmbedder(cfg, ch.broker, logger), base, opts.Clock)
	defer stopRecall()
	var rec mother.Recaller
	if idx != nil {
		rec = idx
	}
	m, err := mother.New(mother.Options{Config: cfg, Store: st, Provider: provider, Logger: base, Tools: motherTools, Chicks: ch.hatchery,
		HostTools: host.tools.PromptTools, ChickHostTools: host.chicks.PromptTools, Metrics: mx, Egress: ch.policy, Disk: dk,
		Reports: reportMeter{ch.broker}, Recall: rec, Ears: ears{ch.broker}})
	if err != nil {
		return r.fail(err)
	}
	ch.hatchery.Subscribe(m.ChickObserver())
	ch.broker.SetNotifier(func(n broker.Notice) {
		m.Notify(mother.SpendNotice{Channel: n.Channel, Admins: n.Admins, Level: n.Level, Scope: n.Scope, Text: n.Text})
	})
	ch.nest.SetAdapters(m)
	ch.nest.SetAccess(m)
	ch.nest.SetHostToolGate(m)
	ch.nest.SetRoles(m)
	ch.nest.SetContributions(m)
	if rec != nil {
		ch.nest.SetRecall(m)
		idx.SetBusy(m.Busy) // indexing is work: trimmed after, as a job is
	}
	mx.Watch(m, ch.hatchery, ch.broker)
	mx.WatchProviders(models)
	mx.WatchDisk(dk)
	page := statusPage(cfg, opts, m, ch, watcher, host, dk, idx)
	stopMetrics, err := serveMetrics(cfg.Metrics, mx, page, base)
	if err != nil {
		return r.fail(err)
	}
	defer stopMetrics()

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// The model servers are pinged now and every half minute: /healthz,
	// the status page and momctl status tell one that does not answer
	// before a message finds out.
	models.WatchServers(ctx, opts.Clock, modelPingInterval, providers.ServerUses(cfg))

	p := &parts{m: m, w: watcher, ch: ch, host: host, r: r, ready: readyLine(cfg, opts.CLI), jsonLog: cfg.Log.Format == "json", logger: logger}
	if opts.CLI {
		return runCLI(ctx, p, opts.Stdin, opts.Stdout, logger)
	}
	return runDaemon(ctx, p, cfg, st, base, opts)
}

// logMigration says what Prepare changed in the data directory.
func logMigration(logger *slog.Logger, dd *dataformat.Dir) {
	for _, st := range dd.Recovered {
		logger.Warn("an interrupted migration of the data directory was undone from its snapshot and runs again", "from", st.From, "to", st.To)
	}
	for _, st := range dd.Migrated {
		logger.Info("data directory migrated", "from", st.From, "to", st.To, "changes", st.Changes, "snapshot", filepath.Join(dataformat.UpgradeDir, fmt.Sprintf("%d-%d", st.From, st.To)))
	}
	if dd.Fresh {
		logger.Info("new data directory", "format", dataformat.Current)
	}
}

// modelPingInterval is how often the model servers are pinged.
const modelPingInterval = 30 * time.Second

// reporter writes each failure to stderr when it happens and keeps them
// all for Run's result.
type reporter struct {
	w    io.Writer
	errs []error
}

// fail reports err as "mother: <err>" and returns everything reported.
func (r *reporter) fail(err error) error {
	io.WriteString(r.w, termtext.String(fmt.Sprintf("mother: %v\n", err)))
	r.errs = append(r.errs, err)
	return r.err()
}

// err is everything reported so far (nil: nothing).
func (r *reporter) err() error { return errors.Join(r.errs...) }

// parts are what start and stop in order once the graph is built.
type parts struct {
	m    *mother.Mother
	w    *events.Watcher
	ch   *chicks
	host *hostSide
	r    *reporter
	// ready is the line written to stderr once Mother listens: as it is,
	// or as a log record when the log is JSON (every line of it stays
	// JSON).
	ready   string
	jsonLog bool
	logger  *slog.Logger
}

// startCore starts Mother's core (the adapters already added), then the
// reconcile of the chicks in the background, then starts the events watcher and the watch on
// config.json for host tools. If a step fails it shuts down what started
// and returns what was reported.
func startCore(ctx context.Context, p *parts) error {
	if err := p.m.Start(ctx); err != nil {
		return p.r.fail(err)
	}
	p.ch.startReconcile(ctx)
	for _, start := range []func() error{func() error { return p.w.Start(ctx, p.m) }, func() error { return p.host.watch(ctx) }} {
		if err := start(); err != nil {
			p.r.fail(err)
			return shutdown(p)
		}
	}
	if p.jsonLog {
		p.logger.Info("mother ready", "summary", strings.TrimPrefix(p.ready, "mother ready: "))
	} else {
		fmt.Fprintln(p.r.w, p.ready)
	}
	return nil
}

// readyLine says, once Mother listens, where she listens and what she
// runs on: "mother ready: terminal, model ollama/qwen3:30b-a3b at
// http://127.0.0.1:11434, chicks on local (image mother-chick:dev)".
func readyLine(cfg *config.Config, cliMode bool) string {
	where := "terminal"
	if !cliMode {
		names := cfg.SortedAdapterNames()
		where = fmt.Sprintf("%d adapter(s): %s", len(names), strings.Join(names, ", "))
	}
	modelAt := cfg.Model.Provider + "/" + cfg.Model.ID
	switch {
	case cfg.Model.Provider == "ollama":
		modelAt += " at " + cfg.Providers.Ollama.URL
	case strings.HasPrefix(cfg.Model.Provider, "openai"):
		if name, err := cfg.Providers.OpenAIEndpoint(cfg.Model.Provider); err == nil {
			modelAt += " at " + cfg.Providers.OpenAI[name].BaseURL
		}
	}
	if n := len(cfg.Model.Fallbacks); n > 0 {
		modelAt += fmt.Sprintf(" (+%d fallback(s))", n)
	}
	var hosts []string
	for _, h := range cfg.Chicks.Hosts {
		hosts = append(hosts, h.Name)
	}
	chicks := "chicks on " + strings.Join(hosts, ", ")
	if len(hosts) == 0 {
		chicks = "chicks on the local engine"
	}
	return fmt.Sprintf("mother ready: %s, model %s, %s (image %s)", where, modelAt, chicks, cfg.Chicks.Image)
}

// runCLI makes the terminal a channel. When stdin ends, it finishes the
// work in flight and returns nil.
func runCLI(ctx context.Context, p *parts, stdin io.Reader, stdout io.Writer, logger *slog.Logger) error {
	term := cli.New("cli", stdin, stdout)
	if err := p.m.AddAdapter(term); err != nil {
		return p.r.fail(err)
	}
	if err := startCore(ctx, p); err != nil {
		return err
	}
	term.Prompt() // after the ready line
	select {
	case <-term.Done():
		// The chicks a previous Mother left running are in flight too,
		// but Idle sees them only once the reconcile in the background
		// has resumed them: without this wait, stdin ending right after
		// the start (a script, a pipe) exited under them.
		err := p.ch.waitReconciled(ctx)
		if err == nil {
			err = p.m.Idle(ctx)
		}
		if err != nil {
			logger.Warn("interrupted before the work in flight finished")
		}
	case <-ctx.Done():
	}
	return shutdown(p)
}

// runDaemon runs the configured adapters until SIGTERM or SIGINT (or ctx
// ends).
func runDaemon(ctx context.Context, p *parts, cfg *config.Config, st *store.Store, base *slog.Logger, opts Options) error {
	logger := base.With("component", "daemon")
	if len(cfg.Adapters) == 0 {
		or := ""
		if vars := tokenVars(); len(vars) > 0 {
			or = " (or " + strings.Join(vars, " / ") + ")"
		}
		return p.r.fail(usageErr(fmt.Errorf("no adapters in %s/config.json%s; use --cli for the terminal", st.DataDir(), or)))
	}
	for _, name := range cfg.SortedAdapterNames() {
		a, err := chat.New(chat.Env{
			Name:   name,
			Config: cfg.Adapters[name],
			// Adapters scope it themselves (component=<type>, adapter=<name>).
			Logger:  base,
			Files:   st.AdapterFiles(name),
			Clock:   opts.Clock,
			DataDir: st.DataDir(),
		})
		if err != nil {
			return p.r.fail(configErr(fmt.Errorf("adapters.%s: %w", name, err)))
		}
		if err := p.m.AddAdapter(a); err != nil {
			return p.r.fail(configErr(err))
		}
	}
	if err := startCore(ctx, p); err != nil {
		return err
	}
	logger.Info("mother running", "release", release.Release, "protocol", release.Protocol, "version", opts.Version, "data", st.DataDir())
	stopping := notifySystemd(ctx, p.m, base, fmt.Sprintf("serving %d adapter(s)", len(cfg.Adapters)), opts.Clock, opts.Getenv)
	<-ctx.Done()
	logger.Info("shutting down")
	stopping()
	return shutdown(p)
}

// shutdown stops the events watcher first (no new runs), then Mother: runs
// in flight are interrupted and kept for the next start; then the host
// tool servers. It returns what was reported, before and during it.
func shutdown(p *parts) error {
	p.w.Stop()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.m.Shutdown(sctx); err != nil {
		p.r.fail(fmt.Errorf("shutdown: %w", err))
	}
	if err := p.host.close(sctx); err != nil {
		p.r.fail(fmt.Errorf("shutdown: %w", err))
	}
	return p.r.err()
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	// A logged string may be a chick's (a skill's name, a file's, an
	// error it caused). The text handler quotes one with a control
	// character in it ("\x1b"), and the writer under it shows any it
	// missed; the JSON handler escapes C0 but not DEL and C1 (U+009B is
	// CSI), which termtext.NewJSONWriter escapes (each record is one
	// write). So journald and a terminal get no control from the log.
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(termtext.NewJSONWriter(w), opts)), nil
	case "text", "":
		return slog.New(slog.NewTextHandler(termtext.NewWriter(w), opts)), nil
	}
	return nil, errors.New("log format must be text or json")
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n  ")
}

// tokenVars are the environment variables that give a linked adapter type
// its bot token (and so create that adapter), in type order.
func tokenVars() []string {
	var vars []string
	for _, typ := range config.AdapterTypes() {
		spec, _ := config.LookupAdapter(typ)
		for _, o := range spec.Env {
			if o.Field == "botToken" {
				vars = append(vars, o.Var)
			}
		}
	}
	return vars
}
