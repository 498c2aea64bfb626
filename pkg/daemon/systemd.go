package daemon

import (
	"context"
	"log/slog"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/sdnotify"
)

// healthChecker is Mother's core health check (mother.Mother).
type healthChecker interface {
	Healthy(ctx context.Context) error
}

// notifySystemd reports readiness to systemd (Type=notify, NOTIFY_SOCKET
// read through getenv) and, when the unit sets WatchdogSec, pings the
// watchdog for as long as Mother's core answers a health check. It returns
// a func to call when stopping.
func notifySystemd(ctx context.Context, m healthChecker, logger *slog.Logger, status string, clk clock.Clock, getenv func(string) string) (stopping func()) {
	n := sdnotify.FromEnv(getenv)
	if !n.Enabled() {
		return func() {}
	}
	lg := logger.With("component", "systemd")
	if err := n.Ready(status); err != nil {
		lg.Warn("readiness notification failed", "err", err)
	}
	if every := n.WatchdogInterval(); every > 0 {
		go func() {
			// A tick every interval from now, like a ticker: a check
			// that runs late skips the ticks it missed.
			next := clk.Now().Add(every)
			for {
				if clock.Sleep(ctx, clk, next.Sub(clk.Now())) != nil {
					return
				}
				for now := clk.Now(); !next.After(now); {
					next = next.Add(every)
				}
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
		}()
	}
	return func() { _ = n.Stopping() }
}
