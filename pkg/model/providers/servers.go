package providers

import (
	"context"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
)

// ServerUses maps each provider that Mother's model and the chick tiers
// use to what uses it: "mother", "mother (fallback)", "tier local",
// "tier local (fallback)".
func ServerUses(cfg *config.Config) map[string][]string {
	uses := map[string][]string{}
	add := func(provider, what string) {
		if !slices.Contains(uses[provider], what) {
			uses[provider] = append(uses[provider], what)
		}
	}
	add(cfg.Model.Provider, "mother")
	for _, fb := range cfg.Model.Fallbacks {
		add(fb.Provider, "mother (fallback)")
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Chicks.Tiers)) {
		t := cfg.Chicks.Tiers[name]
		add(t.Provider, "tier "+name)
		for _, fb := range t.Fallbacks {
			add(fb.Provider, "tier "+name+" (fallback)")
		}
	}
	return uses
}

// pingTimeout bounds one ping.
const pingTimeout = 10 * time.Second

// WatchServers pings every server of uses (ServerUses) now and then every
// interval, until ctx ends, in the background; ModelServers tells what
// the last round found.
func (s *Set) WatchServers(ctx context.Context, clk clock.Clock, interval time.Duration, uses map[string][]string) {
	clk = clock.OrReal(clk)
	go func() {
		tk := clock.NewTicker(clk, interval)
		defer tk.Stop()
		for {
			s.pingAll(ctx, clk, uses)
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
}

func (s *Set) pingAll(ctx context.Context, clk clock.Clock, uses map[string][]string) {
	for name, what := range uses {
		st := model.ServerStatus{Name: name, For: what}
		p, err := s.Get(name)
		if err == nil {
			pinger, ok := p.(model.Pinger)
			if !ok {
				continue // nothing to ask it: not shown
			}
			pctx, cancel := context.WithTimeout(ctx, pingTimeout)
			start := clk.Now()
			err = pinger.Ping(pctx)
			st.Latency = clk.Now().Sub(start)
			cancel()
		}
		if ctx.Err() != nil {
			return
		}
		st.Up, st.CheckedAt = err == nil, clk.Now()
		if err != nil {
			st.Error = err.Error()
		}
		s.mu.Lock()
		if s.servers == nil {
			s.servers = map[string]model.ServerStatus{}
		}
		s.servers[name] = st
		s.mu.Unlock()
	}
}

// ModelServers is what the last pings found, by name.
func (s *Set) ModelServers() []model.ServerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]model.ServerStatus, 0, len(s.servers))
	for _, st := range s.servers {
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
