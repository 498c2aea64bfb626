package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/mother-chat/mother/pkg/mother"
	"github.com/mother-chat/mother/pkg/sdnotify"
)

// notifySystemd reports readiness to systemd (Type=notify) and, when the
// unit sets WatchdogSec, pings the watchdog for as long as Mother's core
// answers a health check. It returns a func to call when stopping.
func notifySystemd(ctx context.Context, m *mother.Mother, logger *slog.Logger, status string) (stopping func()) {
	n := sdnotify.FromEnv(nil)
	if !n.Enabled() {
		return func() {}
	}
	lg := logger.With("component", "systemd")
	if err := n.Ready(status); err != nil {
		lg.Warn("readiness notification failed", "err", err)
	}
	if every := n.WatchdogInterval(); every > 0 {
		go func() {
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					hctx, cancel := context.WithTimeout(ctx, every/2)
					err := m.Healthy(hctx)
					cancel()
					if err != nil {
						// No ping: systemd restarts a Mother that is stuck.
						lg.Error("health check failed; not pinging the watchdog", "err", err)
						continue
					}
					if err := n.Watchdog(); err != nil {
						lg.Warn("watchdog ping failed", "err", err)
					}
				}
			}
		}()
	}
	return func() { _ = n.Stopping() }
}
