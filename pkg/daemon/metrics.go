package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/metrics"
)

// serveMetrics serves /metrics and /healthz on addr (config metrics.listen,
// a loopback address; empty: off). It returns a func that stops it.
func serveMetrics(addr string, mx *metrics.Metrics, base *slog.Logger) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	lg := base.With("component", "metrics")
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics.listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mx.Handler(), ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			lg.Error("metrics listener stopped", "err", err)
		}
	}()
	lg.Info("metrics listening", "addr", lis.Addr().String(), "paths", "/metrics /healthz")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// tierPrices are the configured tier prices, for the cost metric.
func tierPrices(cfg *config.Config) map[string]config.Price {
	out := map[string]config.Price{}
	for name, t := range cfg.Chicks.Tiers {
		if t.Price != nil {
			out[name] = *t.Price
		}
	}
	return out
}
