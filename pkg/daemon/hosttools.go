package daemon

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/confwatch"
	"github.com/mother-chat/mother/pkg/hosttools"
)

// hostSide is what Mother runs on her host besides the chat: the MCP
// servers of config.json (host tools), the chicks' allow-listed access to
// them, and the reloading of config.json on change or SIGHUP.
type hostSide struct {
	tools   *hosttools.Manager
	chicks  *hosttools.ChickInvoker
	watcher *confwatch.Watcher
	logger  *slog.Logger
	hup     chan os.Signal
	done    chan struct{}

	// reloads are the other parts that take a reloaded configuration
	// (onReload).
	reloadMu sync.Mutex
	reloads  []func(*config.Config)

	closeOnce sync.Once
	closeErr  error
}

// startHostSide starts the configured MCP servers. It waits a little (at
// most startWait) for them, so the first prompt already lists their tools;
// a server still starting after that joins when it is ready.
func startHostSide(cfg *config.Config, dataDir string, logger *slog.Logger, version string, clk clock.Clock) *hostSide {
	// logger is the base logger: the packages scope it themselves; this
	// file's own lines are the host tools'.
	h := &hostSide{
		tools:  hosttools.New(hosttools.Options{Dir: dataDir, Logger: logger, Version: version}),
		logger: logger.With("component", "hosttools"),
		hup:    make(chan os.Signal, 1),
	}
	// SIGHUP is caught from here on, before the adapters start: one that
	// arrives while the chicks are reconciled waits for watch instead of
	// ending the process (Go's default for an uncaught SIGHUP).
	signal.Notify(h.hup, syscall.SIGHUP)
	h.chicks = hosttools.NewChickInvoker(h.tools, cfg.Chicks.HostTools, logger)
	h.tools.Apply(cfg.MCPServers)
	const startWait = 10 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer clk.AfterFunc(startWait, cancel).Stop()
	if err := h.tools.WaitStarted(ctx); err != nil {
		h.logger.Warn("host tool servers still starting; they join when ready", "after", startWait)
	}
	h.watcher = confwatch.New(confwatch.Options{
		Dir: dataDir, Current: cfg, Logger: logger,
		Apply: func(_ context.Context, _, cur *config.Config) {
			h.tools.Apply(cur.MCPServers)
			h.chicks.SetAllowed(cur.Chicks.HostTools)
			h.reloadMu.Lock()
			fs := slices.Clone(h.reloads)
			h.reloadMu.Unlock()
			for _, f := range fs {
				f(cur)
			}
		},
	})
	return h
}

// onReload makes f hear every reloaded configuration (after the host
// tools have taken theirs).
func (h *hostSide) onReload(f func(*config.Config)) {
	h.reloadMu.Lock()
	h.reloads = append(h.reloads, f)
	h.reloadMu.Unlock()
}

// watch reloads config.json when it changes and on SIGHUP, until ctx ends.
func (h *hostSide) watch(ctx context.Context) error {
	if err := h.watcher.Start(ctx); err != nil {
		return err
	}
	h.done = make(chan struct{})
	go func() {
		defer close(h.done)
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-h.hup:
				if !ok {
					return
				}
				h.logger.Info("SIGHUP: reloading config.json")
				_ = h.watcher.Reload()
			}
		}
	}()
	return nil
}

// close stops reloading, then every server (after the runs that might use
// them have ended). Only the first call does anything.
func (h *hostSide) close(ctx context.Context) error {
	h.closeOnce.Do(func() {
		if h.hup != nil {
			signal.Stop(h.hup)
			close(h.hup)
			if h.done != nil {
				<-h.done
			}
		}
		h.watcher.Stop()
		h.closeErr = h.tools.Close(ctx)
	})
	return h.closeErr
}
