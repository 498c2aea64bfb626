// Command mother runs Mother: the chat adapters configured in
// <data>/config.json as a daemon, or the terminal as a channel with --cli.
//
//	mother [--cli] [--log-level LEVEL] <data>
//	mother --check-config <data>
//	mother migrate OLD NEW --adapter NAME
//	mother --version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	// IANA zones for periodic events, even where the host has no zoneinfo.
	_ "time/tzdata"

	"github.com/mother-chat/mother/pkg/adapters/cli"
	_ "github.com/mother-chat/mother/pkg/adapters/discord" // registers "discord"
	_ "github.com/mother-chat/mother/pkg/adapters/slack"   // registers "slack"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/events"
	"github.com/mother-chat/mother/pkg/metrics"
	"github.com/mother-chat/mother/pkg/migrate"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/providers"
	"github.com/mother-chat/mother/pkg/mother"
	"github.com/mother-chat/mother/pkg/prompt"
	"github.com/mother-chat/mother/pkg/store"
	"github.com/mother-chat/mother/pkg/tools"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "migrate" {
		return runMigrate(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("mother", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cliMode := fs.Bool("cli", false, "make the terminal a channel: lines on stdin are messages, replies go to stdout")
	checkConfig := fs.Bool("check-config", false, "validate <data>/config.json, print every problem, and exit")
	showVersion := fs.Bool("version", false, "print the version and exit")
	logLevel := fs.String("log-level", "", "log level: debug, info, warn, error (default: config, or warn with --cli)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: mother [--cli] [--log-level LEVEL] <data>\n       mother --check-config <data>\n       mother migrate OLD NEW --adapter NAME\n       mother --version\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *showVersion {
		fmt.Fprintf(stdout, "mother %s\n", version)
		return exitOK
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	dataDir := fs.Arg(0)

	cfg, err := config.Load(dataDir, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "mother: invalid configuration:\n%s\n", indent(err.Error()))
		return exitUsage
	}
	if *checkConfig {
		// Adapter types must also be ones this binary knows.
		var es config.Errors
		known := chat.Types()
		for _, name := range cfg.SortedAdapterNames() {
			if !contains(known, cfg.Adapters[name].Type) {
				es = append(es, config.FieldError{Field: "adapters." + name + ".type", Msg: fmt.Sprintf("this build has no %q adapter (has: %s)", cfg.Adapters[name].Type, strings.Join(known, ", "))})
			}
		}
		if len(es) > 0 {
			fmt.Fprintf(stderr, "mother: invalid configuration:\n%s\n", indent(es.Error()))
			return exitUsage
		}
		fmt.Fprintf(stdout, "configuration OK: %d adapter(s), model %s/%s, %d chick tier(s), %d host tool server(s)\n", len(cfg.Adapters), cfg.Model.Provider, cfg.Model.ID, len(cfg.Chicks.Tiers), len(cfg.MCPServers))
		return exitOK
	}

	level := cfg.Log.Level
	if *cliMode {
		level = "warn"
	}
	if *logLevel != "" {
		level = *logLevel
	}
	// base carries no component; each subsystem scopes it with its own
	// (component=store, mother, events, nest, ...), so every line has
	// exactly one. logger is this command's own.
	base, err := newLogger(stderr, cfg.Log.Format, level)
	if err != nil {
		fmt.Fprintf(stderr, "mother: %v\n", err)
		return exitUsage
	}
	logger := base.With("component", "daemon")

	st, err := store.Open(dataDir, store.Options{Logger: base})
	if err != nil {
		fmt.Fprintf(stderr, "mother: %v\n", err)
		return exitFailure
	}
	defer st.Close()

	// MOTHER.md, MEMORY.md and SYSTEM.md are created on first start;
	// REFERENCE.md is regenerated at every start.
	if created, err := prompt.Scaffold(st.Workspace()); err != nil {
		fmt.Fprintf(stderr, "mother: %v\n", err)
		return exitFailure
	} else if len(created) > 0 {
		logger.Info("workspace files created", "files", strings.Join(created, ", "))
	}
	if err := prompt.WriteReference(st.Workspace(), time.Local); err != nil {
		fmt.Fprintf(stderr, "mother: %v\n", err)
		return exitFailure
	}
	// Mother's own file tool: read, confined to the workspace and to the
	// channel of the run. She never gets bash, write or edit.
	motherTools, err := tools.ReadOnly(st.Workspace(), mother.ReadPolicy(st.Workspace()))
	if err != nil {
		fmt.Fprintf(stderr, "mother: %v\n", err)
		return exitFailure
	}

	provider, err := providers.New(cfg.Providers, cfg.Model.Provider, nil)
	// A burst across many channels queues here rather than opening a
	// stream per channel (see model.Limit).
	provider = model.Limit(provider, cfg.Model.MaxParallel)
	if err != nil {
		fmt.Fprintf(stderr, "mother: model.provider: %v\n", err)
		return exitUsage
	}
	// Host tools: the MCP servers of config.json, called through
	// invoke_tool, listed in the prompt, and offered to chicks as far as
	// chicks.hostTools allows.
	host := startHostSide(cfg, st.DataDir(), base)
	// Every return stops the servers; shutdown does it first, in order.
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = host.close(cctx)
	}()
	mx := metrics.New(metrics.Options{Version: version, Prices: tierPrices(cfg)})
	ch, err := startChicks(cfg, st, host, base, mx)
	if err != nil {
		fmt.Fprintf(stderr, "mother: %v\n", err)
		return exitFailure
	}
	defer ch.close()
	// Events target "<adapter>/<channel>"; in terminal mode the one
	// adapter is "cli", so "local" alone also works.
	adapterNames := cfg.SortedAdapterNames()
	if *cliMode {
		adapterNames = []string{"cli"}
	}
	watcher, err := events.New(events.Options{
		Dir:      st.EventsDir(),
		StateDir: filepath.Join(st.DataDir(), "state", "events"),
		Resolve:  events.AdapterResolver(adapterNames),
		Clock:    clock.Real{},
		Logger:   base,
		Grace:    cfg.Events.OneShotGrace.Duration,
		Metrics:  mx,
	})
	if err != nil {
		fmt.Fprintf(stderr, "mother: %v\n", err)
		return exitFailure
	}
	ch.nest.SetEvents(watcher)
	motherTools = append(motherTools, mother.MemoryTool(st.Workspace()))
	motherTools = append(motherTools, events.Tools(watcher)...)
	motherTools = append(motherTools, host.tools.InvokeTool())
	m, err := mother.New(mother.Options{Config: cfg, Store: st, Provider: provider, Logger: base, Tools: motherTools, Chicks: ch.hatchery,
		HostTools: host.tools.PromptTools, ChickHostTools: host.chicks.PromptTools, Metrics: mx})
	if err != nil {
		fmt.Fprintf(stderr, "mother: %v\n", err)
		return exitFailure
	}
	ch.hatchery.Subscribe(m.ChickObserver())
	ch.nest.SetAdapters(m)
	mx.Watch(m, ch.hatchery, ch.broker)
	stopMetrics, err := serveMetrics(cfg.Metrics.Listen, mx, base)
	if err != nil {
		fmt.Fprintf(stderr, "mother: %v\n", err)
		return exitFailure
	}
	defer stopMetrics()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if *cliMode {
		return runCLI(ctx, m, watcher, ch, host, stdin, stdout, stderr, logger)
	}
	return runDaemon(ctx, m, watcher, ch, host, cfg, st, stderr, base)
}

// startCore starts Mother's core (the adapters already added), then
// reconciles the chicks, then starts the events watcher and the watch on
// config.json for host tools. If a step fails it shuts down what started and
// returns the exit status with ok false.
func startCore(ctx context.Context, m *mother.Mother, w *events.Watcher, ch *chicks, host *hostSide, stderr io.Writer) (code int, ok bool) {
	if err := m.Start(ctx); err != nil {
		fmt.Fprintf(stderr, "mother: %v\n", err)
		return exitFailure, false
	}
	ch.reconcile(ctx)
	for _, start := range []func() error{func() error { return w.Start(ctx, m) }, func() error { return host.watch(ctx) }} {
		if err := start(); err != nil {
			fmt.Fprintf(stderr, "mother: %v\n", err)
			shutdown(m, w, host, stderr)
			return exitFailure, false
		}
	}
	return exitOK, true
}

// runCLI makes the terminal a channel. When stdin ends, it finishes the
// work in flight and returns 0.
func runCLI(ctx context.Context, m *mother.Mother, w *events.Watcher, ch *chicks, host *hostSide, stdin io.Reader, stdout, stderr io.Writer, logger *slog.Logger) int {
	term := cli.New("cli", stdin, stdout)
	if err := m.AddAdapter(term); err != nil {
		fmt.Fprintf(stderr, "mother: %v\n", err)
		return exitFailure
	}
	if code, ok := startCore(ctx, m, w, ch, host, stderr); !ok {
		return code
	}
	select {
	case <-term.Done():
		if err := m.Idle(ctx); err != nil {
			logger.Warn("interrupted before the work in flight finished")
		}
	case <-ctx.Done():
	}
	return shutdown(m, w, host, stderr)
}

// runDaemon runs the configured adapters until SIGTERM or SIGINT.
func runDaemon(ctx context.Context, m *mother.Mother, w *events.Watcher, ch *chicks, host *hostSide, cfg *config.Config, st *store.Store, stderr io.Writer, base *slog.Logger) int {
	logger := base.With("component", "daemon")
	if len(cfg.Adapters) == 0 {
		fmt.Fprintf(stderr, "mother: no adapters in %s/config.json (or DISCORD_BOT_TOKEN / SLACK_BOT_TOKEN); use --cli for the terminal\n", st.DataDir())
		return exitUsage
	}
	for _, name := range cfg.SortedAdapterNames() {
		a, err := chat.New(chat.Env{
			Name:   name,
			Config: cfg.Adapters[name],
			// Adapters scope it themselves (component=<type>, adapter=<name>).
			Logger: base,
			ChannelDir: func(channelID string) (string, error) {
				ch, err := st.Channel(name, channelID)
				if err != nil {
					return "", err
				}
				return ch.Dir(), nil
			},
			LoggedChannels: func() ([]string, error) {
				refs, err := st.ListChannels()
				if err != nil {
					return nil, err
				}
				var ids []string
				for _, r := range refs {
					if r.Adapter == name {
						ids = append(ids, r.ID)
					}
				}
				return ids, nil
			},
		})
		if err != nil {
			fmt.Fprintf(stderr, "mother: adapters.%s: %v\n", name, err)
			return exitUsage
		}
		if err := m.AddAdapter(a); err != nil {
			fmt.Fprintf(stderr, "mother: %v\n", err)
			return exitUsage
		}
	}
	if code, ok := startCore(ctx, m, w, ch, host, stderr); !ok {
		return code
	}
	logger.Info("mother running", "version", version, "data", st.DataDir())
	stopping := notifySystemd(ctx, m, base, fmt.Sprintf("serving %d adapter(s)", len(cfg.Adapters)))
	<-ctx.Done()
	logger.Info("shutting down")
	stopping()
	return shutdown(m, w, host, stderr)
}

// shutdown stops the events watcher first (no new runs), then Mother: runs
// in flight are interrupted and kept for the next start; then the host
// tool servers.
func shutdown(m *mother.Mother, w *events.Watcher, host *hostSide, stderr io.Writer) int {
	w.Stop()
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := exitOK
	if err := m.Shutdown(sctx); err != nil {
		fmt.Fprintf(stderr, "mother: shutdown: %v\n", err)
		code = exitFailure
	}
	if err := host.close(sctx); err != nil {
		fmt.Fprintf(stderr, "mother: shutdown: %v\n", err)
		code = exitFailure
	}
	return code
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, errors.New("log format must be text or json")
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n  ")
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// runMigrate imports a TypeScript Mother or mom data directory:
// mother migrate OLD NEW --adapter NAME (flags may come anywhere).
func runMigrate(args []string, stdout, stderr io.Writer) int {
	usage := func() int {
		fmt.Fprintln(stderr, "usage: mother migrate OLD NEW --adapter NAME\n\nImports the data directory of the TypeScript Mother (Discord) or mom (Slack)\ninto NEW, placing its channels under the adapter NAME. OLD is never modified.")
		return exitUsage
	}
	var adapter string
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--adapter" || a == "-adapter":
			if i+1 >= len(args) {
				return usage()
			}
			adapter = args[i+1]
			i++
		case strings.HasPrefix(a, "--adapter="):
			adapter = strings.TrimPrefix(a, "--adapter=")
		case a == "-h" || a == "--help":
			return usage()
		case strings.HasPrefix(a, "-"):
			fmt.Fprintf(stderr, "mother migrate: unknown flag %s\n", a)
			return usage()
		default:
			pos = append(pos, a)
		}
	}
	if len(pos) != 2 || adapter == "" {
		return usage()
	}
	rep, err := migrate.Run(migrate.Options{OldDir: pos[0], NewDir: pos[1], Adapter: adapter})
	if err != nil {
		fmt.Fprintf(stderr, "mother migrate: %v\n", err)
		return exitFailure
	}
	fmt.Fprint(stdout, rep.String())
	return exitOK
}
