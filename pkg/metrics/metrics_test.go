package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/events"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/jsonl"
	"github.com/mother-chat/mother/pkg/metrics"
	"github.com/mother-chat/mother/pkg/metrics/metricstest"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/fallback"
	"github.com/mother-chat/mother/pkg/mother"
	"github.com/mother-chat/mother/pkg/version"
)

// state stands in for Mother, the hatchery and the broker: the gauges are
// read from whatever owns the facts at scrape time.
type state struct {
	healthy error
	depths  map[string]int
	reports []chat.AdapterReport
	chicks  []hatchery.Info
	hosts   []hatchery.HostStatus
	budgets []broker.Budget
}

func (s *state) QueueDepths() map[string]int          { return s.depths }
func (s *state) AdapterReports() []chat.AdapterReport { return s.reports }
func (s *state) Healthy(context.Context) error        { return s.healthy }
func (s *state) List(bool) []hatchery.Info            { return s.chicks }
func (s *state) HostStates() []hatchery.HostStatus    { return s.hosts }
func (s *state) Budgets() []broker.Budget             { return s.budgets }

// modelServers is the model servers' last pings.
type modelServers []model.ServerStatus

func (m *modelServers) ModelServers() []model.ServerStatus { return *m }
func (m *modelServers) Statuses() []fallback.Status        { return nil }
func (m *modelServers) EstimatedCalls() map[string]int64   { return nil }

// providerState is two providers, one cooling down, and estimated usage.
type providerState struct{}

func (providerState) Statuses() []fallback.Status {
	return []fallback.Status{{Name: "ollama"}, {Name: "openai:vllm", Down: true, Failures: 2}}
}

func (providerState) ModelServers() []model.ServerStatus { return nil }

func (providerState) EstimatedCalls() map[string]int64 {
	return map[string]int64{"openai:llamacpp": 4, "ollama": 0}
}

func TestCountersAndGaugesAreScraped(t *testing.T) {
	t.Parallel()
	mx := metrics.New(metrics.Options{Version: "v1.2.3"})
	st := &state{
		depths:  map[string]int{"discord": 2, "slack": 0},
		reports: []chat.AdapterReport{{Name: "discord", Type: "discord", Status: chat.AdapterStatus{State: chat.ConnConnected, Reconnects: 3}}, {Name: "slack", Type: "slack", Status: chat.AdapterStatus{State: chat.ConnReconnecting}}},
		chicks:  []hatchery.Info{{Record: hatchery.Record{State: hatchery.StateRunning}}, {Record: hatchery.Record{State: hatchery.StateQueued}}, {Record: hatchery.Record{State: hatchery.StateRunning}}},
		hosts:   []hatchery.HostStatus{{Name: "p40", Up: true, Running: 2, Capacity: 6, GateRestarts: 3}, {Name: "spare", Up: false, Capacity: 2}},
		budgets: []broker.Budget{{Kind: "tier", Name: "local", Used: 100}, {Kind: "tier", Name: "claude", Used: 700, Limit: 1000}, {Kind: "channel", Name: "slack/C1", Used: 5},
			{Kind: "mother", Used: 9000, UsedMicroUSD: 250_000, LimitMicroUSD: 1_000_000}, {Kind: "event", Name: "check.json", UsedMicroUSD: 5},
			{Kind: "channel", Name: "slack/C2", UsedMicroUSD: 300_000, LimitMicroUSD: 2_000_000}},
	}
	mx.Watch(st, st, st)
	mx.WatchProviders(providerState{})
	for range 3 {
		mx.MessageIn("discord")
	}
	mx.MessageOut("discord")
	mx.RunEnded("discord", mother.KindMessage, "done", 1500*time.Millisecond, model.Usage{InputTokens: 10, OutputTokens: 4})
	mx.RunEnded("discord", mother.KindEvent, "error", time.Second, model.Usage{})
	mx.ChickSpawned(hatchery.Record{Tier: "claude"})
	mx.ChickJoined(hatchery.Record{Tier: "claude", Host: "p40"}, 2*time.Second)
	mx.ChickFinished(hatchery.Record{Tier: "claude", State: hatchery.StateDone, Reason: hatchery.ReasonDone}, time.Minute)
	mx.ChickFinished(hatchery.Record{Tier: "local", State: hatchery.StateFailed, Reason: hatchery.ReasonNoStart}, 0)
	claude, local := broker.Caller{Tier: "claude"}, broker.Caller{Tier: "local"}
	// The broker prices the calls: 1M in at $3 and 100k out at $15.
	mx.ModelCall(claude, model.Usage{InputTokens: 1_000_000, OutputTokens: 100_000}, 4_500_000, nil)
	mx.ModelCall(claude, model.Usage{}, 0, fmt.Errorf("broker: %w", model.ErrBudgetExhausted))
	mx.ModelCall(local, model.Usage{InputTokens: 7}, 0, errors.New("boom"))
	own := broker.Caller{Kind: broker.CallerMother, Channel: "discord/1"}
	mx.ModelCall(own, model.Usage{InputTokens: 2000, OutputTokens: 100}, 7_500, nil)
	mx.ModelCall(own, model.Usage{}, 0, &model.BudgetError{Scope: "mother", Msg: "budget exhausted"})
	mx.EventFired(events.Periodic, false)

	srv := httptest.NewServer(mx.Handler())
	defer srv.Close()
	s := metricstest.Get(t, srv.URL+"/metrics")
	want := []struct {
		name   string
		labels []string
		v      float64
	}{
		{"mother_messages_in_total", []string{"adapter", "discord"}, 3},
		{"mother_messages_out_total", []string{"adapter", "discord"}, 1},
		{"mother_runs_total", []string{"kind", "message", "stop", "done"}, 1},
		{"mother_runs_total", []string{"kind", "event", "stop", "error"}, 1},
		{"mother_run_duration_seconds", []string{"kind", "message"}, 1},
		{"mother_model_tokens_total", []string{"direction", "input"}, 10},
		{"mother_chicks_spawned_total", []string{"tier", "claude"}, 1},
		{"mother_chick_spawn_seconds", []string{"host", "p40"}, 1},
		{"mother_chicks_finished_total", []string{"tier", "claude", "outcome", "done"}, 1},
		{"mother_chicks_finished_total", []string{"tier", "local", "outcome", "no_start"}, 1},
		{"mother_chick_duration_seconds", []string{"tier", "claude"}, 1},
		{"mother_chick_model_calls_total", []string{"tier", "claude", "result", "ok"}, 1},
		{"mother_chick_model_calls_total", []string{"tier", "claude", "result", "refused"}, 1},
		{"mother_chick_model_calls_total", []string{"tier", "local", "result", "error"}, 1},
		{"mother_chick_model_tokens_total", []string{"tier", "claude", "direction", "output"}, 100_000},
		{"mother_chick_model_cost_usd_total", []string{"tier", "claude"}, 3 + 1.5},
		{"mother_own_model_calls_total", []string{"result", "ok"}, 1},
		{"mother_own_model_calls_total", []string{"result", "refused"}, 1},
		{"mother_own_model_cost_usd_total", nil, 0.0075},
		{"mother_events_fired_total", []string{"type", "periodic"}, 1},
		{"mother_queue_depth", []string{"adapter", "discord"}, 2},
		{"mother_adapter_connected", []string{"adapter", "discord"}, 1},
		{"mother_adapter_connected", []string{"adapter", "slack", "state", "reconnecting"}, 0},
		{"mother_adapter_reconnects_total", []string{"adapter", "discord"}, 3},
		{"mother_chicks", []string{"state", "running"}, 2},
		{"mother_chicks", []string{"state", "queued"}, 1},
		{"mother_chicks", []string{"state", "stopping"}, 0},
		{"mother_docker_host_up", []string{"host", "spare"}, 0},
		{"mother_docker_host_chicks", []string{"host", "p40"}, 2},
		{"mother_docker_host_capacity", []string{"host", "p40"}, 6},
		{"mother_gate_restarts_total", []string{"host", "p40"}, 3},
		{"mother_budget_used_tokens", []string{"kind", "tier", "name", "local"}, 100},
		{"mother_budget_remaining_tokens", []string{"kind", "tier", "name", "claude"}, 300},
		{"mother_budget_used_usd", []string{"kind", "mother"}, 0.25},
		{"mother_budget_limit_usd", []string{"kind", "mother"}, 1},
		{"mother_budget_remaining_usd", []string{"kind", "mother"}, 0.75},
		{"mother_budget_remaining_usd", []string{"kind", "channel", "name", "slack/C2"}, 1.7},
		{"mother_budget_used_tokens", []string{"kind", "mother"}, 9000},
		{"mother_healthy", nil, 1},
		{"mother_build_info", []string{"version", "v1.2.3"}, 1},
		{"mother_model_provider_up", []string{"provider", "ollama"}, 1},
		{"mother_model_provider_up", []string{"provider", "openai:vllm"}, 0},
		{"mother_model_usage_estimated_total", []string{"provider", "openai:llamacpp"}, 4},
	}
	for _, w := range want {
		got, ok := s.Value(w.name, w.labels...)
		if !ok || got != w.v {
			t.Errorf("%s%v = %v (present %v), want %v\n%s", w.name, w.labels, got, ok, w.v, s.Series(w.name))
		}
	}
	if _, ok := s.Value("mother_chick_model_cost_usd_total", "tier", "local"); ok {
		t.Error("a cost series for a tier without a price")
	}
	if _, ok := s.Value("mother_budget_used_tokens", "kind", "channel"); ok {
		t.Error("a budget series for an uncapped channel (unbounded label values)")
	}
	if _, ok := s.Value("mother_budget_used_usd", "kind", "event"); ok {
		t.Error("a money series for an event without a money cap")
	}
	if _, ok := s.Value("go_goroutines"); !ok {
		t.Error("no Go runtime metrics")
	}
}

type diskState struct{ err error }

func (d *diskState) Err() error { return d.err }

func TestHealthz(t *testing.T) {
	t.Parallel()
	mx := metrics.New(metrics.Options{Version: "v9"})
	srv := httptest.NewServer(mx.Handler())
	defer srv.Close()
	get := func() (int, metrics.Health) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var h metrics.Health
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
			t.Fatalf("healthz body: %v", err)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("Content-Type %q", ct)
		}
		return resp.StatusCode, h
	}
	if code, h := get(); code != 503 || h.Status != "unhealthy" {
		t.Errorf("before Mother is watched: %d %+v, want 503", code, h)
	}
	st := &state{reports: []chat.AdapterReport{{Name: "slack", Status: chat.AdapterStatus{State: chat.ConnReconnecting}}},
		hosts: []hatchery.HostStatus{{Name: "p40", Up: false}, {Name: "spare", Up: true}}}
	mx.Watch(st, st, st)
	servers := &modelServers{{Name: "ollama", For: []string{"mother"}, Up: true}, {Name: "openai:vllm", For: []string{"tier big"}}}
	mx.WatchProviders(servers)
	if code, h := get(); code != 200 || h.Status != "ok" || h.Version != "v9" || len(h.AdaptersDown) != 1 || len(h.HostsDown) != 1 ||
		!slices.Equal(h.ModelServersDown, []string{"openai:vllm"}) {
		t.Errorf("healthy, a part down: %d %+v, want 200 naming slack, p40 and openai:vllm", code, h)
	}
	// Every Docker host down: degraded, with the reason.
	st.hosts[1].Up = false
	if code, h := get(); code != 503 || h.Status != "degraded" || !strings.Contains(h.Reason, "no Docker host answers") {
		t.Errorf("every host down: %d %+v, want 503 degraded", code, h)
	}
	// The other one up, its chick image of a release this Mother does not
	// work with: degraded too, the host's state and sentence named.
	why := "the chick image on host spare is 0.9.2; this Mother (0.2.0) needs 0.1.x or 0.2.x: upgrade the mother package here, or install mother-chick 0.2.x there"
	st.hosts[1].Up, st.hosts[1].Incompatible = true, why
	if code, h := get(); code != 503 || h.Status != "degraded" || !strings.Contains(h.Reason, why) || len(h.HostsIncompatible) != 1 ||
		h.HostsIncompatible[0] != (metrics.HostIncompatible{Host: "spare", State: "incompatible", Reason: why}) || h.Release != version.Release || h.Protocol != version.Protocol {
		t.Errorf("the only host up incompatible: %d %+v, want 503 degraded naming it", code, h)
	}
	st.hosts[1].Incompatible = ""
	// Mother's model server down too.
	st.hosts[1].Up = true
	(*servers)[0].Up = false
	if code, h := get(); code != 503 || h.Status != "degraded" || !strings.Contains(h.Reason, "Mother's model server does not answer") {
		t.Errorf("Mother's model server down: %d %+v, want 503 degraded", code, h)
	}
	(*servers)[0].Up = true
	// The data directory full: degraded, saying so.
	d := &diskState{err: errors.New("disk full: write log.jsonl: no space left on device")}
	mx.WatchDisk(d)
	if code, h := get(); code != 503 || h.Status != "degraded" || !strings.HasPrefix(h.Reason, "disk full: write log.jsonl") || h.Disk != d.err.Error() {
		t.Errorf("disk full: %d %+v, want 503 degraded with the reason", code, h)
	}
	s := metricstest.Get(t, srv.URL+"/metrics")
	if v, ok := s.Value("mother_disk_ok"); !ok || v != 0 {
		t.Errorf("mother_disk_ok = %v (present %v) on a full disk, want 0", v, ok)
	}
	d.err = nil
	if code, h := get(); code != 200 || h.Disk != "" {
		t.Errorf("disk fine again: %d %+v, want 200", code, h)
	}
	if v, _ := metricstest.Get(t, srv.URL+"/metrics").Value("mother_disk_ok"); v != 1 {
		t.Errorf("mother_disk_ok = %v once the disk is fine, want 1", v)
	}
	st.healthy = errors.New("core lock not available")
	if code, h := get(); code != 503 || h.Status != "unhealthy" || !strings.Contains(h.Error, "core lock") {
		t.Errorf("unhealthy: %d %+v, want 503 with the reason", code, h)
	}
	resp, err := http.Post(srv.URL+"/healthz", "text/plain", nil)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST /healthz: %d, want 405", resp.StatusCode)
		}
	}
}

// TestGateConnectionsCardinality: connections are counted by destination
// and outcome, bytes by tier and direction, and the destination label has
// a cap (a chick trying names cannot grow the metrics without end).
func TestGateConnectionsCardinality(t *testing.T) {
	t.Parallel()
	mx := metrics.New(metrics.Options{Version: "v"})
	mx.GateConnection("pypi.org:443", "allowed", "web", 1000, 50_000)
	mx.GateConnection("pypi.org:443", "allowed", "web", 500, 0)
	mx.GateConnection("github.com:443", "refused", "local", 0, 0)
	for i := range metrics.MaxGateDestinations + 50 {
		mx.GateConnection(fmt.Sprintf("h%d.example:443", i), "refused", "local", 0, 0)
	}
	mx.GateConnection("pypi.org:443", "capped", "web", 10, 0) // known: keeps its label
	srv := httptest.NewServer(mx.Handler())
	defer srv.Close()
	s := metricstest.Get(t, srv.URL+"/metrics")
	for _, w := range []struct {
		labels []string
		v      float64
	}{
		{[]string{"destination", "pypi.org:443", "outcome", "allowed"}, 2},
		{[]string{"destination", "pypi.org:443", "outcome", "capped"}, 1},
		{[]string{"destination", "github.com:443", "outcome", "refused"}, 1},
		{[]string{"destination", "other", "outcome", "refused"}, 52},
	} {
		if got, ok := s.Value("mother_gate_connections_total", w.labels...); !ok || got != w.v {
			t.Errorf("mother_gate_connections_total%v = %v (present %v), want %v", w.labels, got, ok, w.v)
		}
	}
	if got, _ := s.Value("mother_chick_egress_bytes_total", "tier", "web", "direction", "out"); got != 1510 {
		t.Errorf("bytes out of tier web = %v, want 1510", got)
	}
	if got, _ := s.Value("mother_chick_egress_bytes_total", "tier", "web", "direction", "in"); got != 50_000 {
		t.Errorf("bytes in of tier web = %v, want 50000", got)
	}
	if n := strings.Count(s.Series("mother_gate_connections_total"), "\n"); n > metrics.MaxGateDestinations+5 {
		t.Errorf("%d series of mother_gate_connections_total", n)
	}
}

func TestStoreFsyncsAreCountedByKind(t *testing.T) {
	t.Parallel()
	mx := metrics.New(metrics.Options{})
	srv := httptest.NewServer(mx.Handler())
	defer srv.Close()
	before, _ := metricstest.Get(t, srv.URL+"/metrics").Value("mother_store_fsyncs_total", "kind", "test_metrics")
	j, _, err := jsonl.OpenWith(filepath.Join(t.TempDir(), "l.jsonl"), jsonl.Options{Sync: true, Kind: "test_metrics"})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for i := range 3 {
		if _, _, err := j.Append(i); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := j.AppendBatch(4, 5, 6); err != nil {
		t.Fatal(err)
	}
	got, ok := metricstest.Get(t, srv.URL+"/metrics").Value("mother_store_fsyncs_total", "kind", "test_metrics")
	if !ok || got-before != 4 {
		t.Errorf("mother_store_fsyncs_total{kind=test_metrics} = %v (present %v), want 4 more than %v (3 appends and one batch)", got, ok, before)
	}
}
