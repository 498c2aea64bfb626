package daemon

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/disk"
	"github.com/mother-chat/mother/pkg/events"
	"github.com/mother-chat/mother/pkg/metrics"
	"github.com/mother-chat/mother/pkg/mother"
	"github.com/mother-chat/mother/pkg/recall"
	"github.com/mother-chat/mother/pkg/statuspage"
)

// serveMetrics serves /metrics, /healthz and the status page (/status) on
// mc.Listen (empty: off); with mc.Token every request must carry it. It
// returns a func that stops it.
func serveMetrics(mc config.Metrics, mx *metrics.Metrics, page *statuspage.Page, base *slog.Logger) (func(), error) {
	addr := mc.Listen
	if addr == "" {
		return func() {}, nil
	}
	lg := base.With("component", "metrics")
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics.listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", mx.Handler())
	ph := page.Handler()
	for _, p := range []string{"GET /status", "GET /status/live", "GET /status/spend.svg", "GET /status.json", "GET /status.js", "GET /status.css"} {
		mux.Handle(p, ph)
	}
	var h http.Handler = mux
	if tok := mc.Token.Value(); tok != "" {
		h = requireToken(tok, mux)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			lg.Error("metrics listener stopped", "err", err)
		}
	}()
	lg.Info("metrics listening", "addr", lis.Addr().String(), "paths", "/metrics /healthz /status", "token", mc.Token != "")
	if ip, ok := lis.Addr().(*net.TCPAddr); ok && !ip.IP.IsLoopback() {
		lg.Warn("the metrics listener is not on loopback: its token and pages travel in clear; put a TLS reverse proxy or a tunnel in front across networks you do not trust", "addr", lis.Addr().String())
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// requireToken lets a request through only with the token, as
// "Authorization: Bearer TOKEN" or as the password of HTTP basic
// authentication (any user name), so that Prometheus, curl and a browser
// can all give it. The comparison takes the same time whatever the guess.
func requireToken(token string, next http.Handler) http.Handler {
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var got string
		if _, pass, ok := r.BasicAuth(); ok {
			got = pass
		} else if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
			got = strings.TrimSpace(a[7:])
		}
		if subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="Mother", charset="UTF-8"`)
			w.Header().Add("WWW-Authenticate", `Bearer realm="Mother"`)
			http.Error(w, "this listener needs Mother's metrics.token (Authorization: Bearer TOKEN, or basic auth with the token as password)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// statusPage builds the status page over Mother's parts; it hears the
// chicks' events and follows config reloads (the secrets it must never
// show).
func statusPage(cfg *config.Config, opts Options, m *mother.Mother, ch *chicks, w *events.Watcher, host *hostSide, dk *disk.Monitor, idx *recall.Indexer) *statuspage.Page {
	page := statuspage.New(statuspage.Options{Version: opts.Version, ChickImage: cfg.Chicks.Image, StartedAt: opts.Clock.Now(), Secrets: cfg.SecretValues(), Clock: opts.Clock})
	ch.hatchery.Subscribe(page)
	src := statuspage.Sources{Adapters: m, Chicks: ch.hatchery, Budgets: ch.broker, Events: w, ToolServers: host.tools, Providers: ch.models, Spend: ch.broker, Disk: dk, Roles: m}
	if idx != nil {
		src.Recall = func() statuspage.Recall {
			st := idx.Status()
			return statuspage.Recall{CatchingUp: st.CatchingUp, Channels: st.Channels, Done: st.Done, Added: st.Added, Docs: st.Docs,
				Embedded: st.Embedded, EmbedModel: st.EmbedModel, Error: st.Err}
		}
	}
	page.Watch(src)
	host.onReload(func(cur *config.Config) { page.SetSecrets(cur.SecretValues()) })
	return page
}
