// Package metrics exposes Mother's metrics in the Prometheus text format
// (github.com/prometheus/client_golang) and a health endpoint, on the
// loopback HTTP listener of config metrics.listen:
//
//	GET /metrics   Prometheus exposition
//	GET /healthz   200 {"status":"ok",...} while Mother's core answers
//	               its health check, 503 {"status":"unhealthy",...} if not
//
// The packages that know the facts declare small hooks (mother.Metrics,
// hatchery.Metrics, broker.Metrics, events.Metrics) and Metrics implements
// all of them; gauges (queue depths, chicks by state, hosts, adapters,
// budgets) are read from their owners at scrape time. Only this package
// and cmd/mother link the Prometheus client.
package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/events"
	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/fallback"
	"github.com/mother-chat/mother/pkg/mother"
	"github.com/mother-chat/mother/pkg/version"
)

// Namespace prefixes every metric.
const Namespace = "mother"

// MotherState is what the metrics read from Mother's core.
type MotherState interface {
	QueueDepths() map[string]int
	AdapterReports() []chat.AdapterReport
	Healthy(ctx context.Context) error
}

// ChickState is what the metrics read from the hatchery.
type ChickState interface {
	List(all bool) []hatchery.Info
	HostStates() []hatchery.HostStatus
}

// BudgetState is what the metrics read from the broker.
type BudgetState interface {
	Budgets() []broker.Budget
}

// ProviderState is what the metrics read of the model providers
// (providers.Set): the health of those fallback chains call, and per
// provider the calls whose usage the server did not report.
type ProviderState interface {
	Statuses() []fallback.Status
	EstimatedCalls() map[string]int64
	// ModelServers is what the last pings of the model servers found.
	ModelServers() []model.ServerStatus
}

// Options build a Metrics.
type Options struct {
	// Version is Mother's version (mother_build_info).
	Version string
	// Clock tells the time (default clock.Real).
	Clock clock.Clock
}

// Metrics holds every metric. Its hook methods are safe for concurrent
// use and cheap.
type Metrics struct {
	// It hears the hatchery's lifecycle as a subscriber
	// (Hatchery.Subscribe): the one-method observers below; the rest of
	// hatchery.Observer is a no-op.
	hatchery.NopObserver

	reg     *prometheus.Registry
	version string
	clock   clock.Clock
	started time.Time

	messagesIn, messagesOut         *prometheus.CounterVec
	runs                            *prometheus.CounterVec
	runSeconds                      *prometheus.HistogramVec
	ownTokens                       *prometheus.CounterVec
	chicksSpawned, chicksFinished   *prometheus.CounterVec
	chickSeconds, spawnSeconds      *prometheus.HistogramVec
	modelCalls, chickTokens, costUS *prometheus.CounterVec
	ownCalls, ownCost               *prometheus.CounterVec
	eventsFired                     *prometheus.CounterVec
	gateConns, egressBytes          *prometheus.CounterVec

	// destinations are the destination labels in use (at most
	// MaxGateDestinations; later ones count as "other").
	destMu       sync.Mutex
	destinations map[string]bool

	mu      sync.Mutex
	mother  MotherState
	chicks  ChickState
	budgets BudgetState
	// providers is read for the providers' gauges (WatchProviders).
	providers ProviderState
	disk      DiskState
}

var (
	_ mother.Metrics          = (*Metrics)(nil)
	_ hatchery.Observer       = (*Metrics)(nil)
	_ hatchery.SpawnObserver  = (*Metrics)(nil)
	_ hatchery.JoinObserver   = (*Metrics)(nil)
	_ hatchery.FinishObserver = (*Metrics)(nil)
	_ broker.Metrics          = (*Metrics)(nil)
	_ events.Metrics          = (*Metrics)(nil)
)

// New creates the metrics and their registry (with the Go runtime and
// process collectors).
func New(opts Options) *Metrics {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	m := &Metrics{reg: prometheus.NewRegistry(), destinations: map[string]bool{}, version: opts.Version, clock: opts.Clock, started: opts.Clock.Now()}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
		m.reg.MustRegister(c)
		return c
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: buckets}, labels)
		m.reg.MustRegister(h)
		return h
	}
	m.messagesIn = counter("messages_in_total", "Messages received from other users, per adapter.", "adapter")
	m.messagesOut = counter("messages_out_total", "Messages Mother posted (answers, notices, chick results, files), per adapter.", "adapter")
	m.runs = counter("runs_total", "Mother's own runs, by adapter, kind (message, event, chick: her answer to a chick's result) and stop reason.", "adapter", "kind", "stop")
	m.runSeconds = histogram("run_duration_seconds", "Duration of Mother's own runs.", []float64{0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}, "kind")
	m.ownTokens = counter("model_tokens_total", "Tokens of Mother's own model, by direction (input, output).", "direction")
	m.chicksSpawned = counter("chicks_spawned_total", "Chicks accepted (started or queued), by tier.", "tier")
	m.chicksFinished = counter("chicks_finished_total", "Chicks that ended, by tier and outcome (done, error, killed, hung, timeout, budget, crashed, lost, no_start, shutdown).", "tier", "outcome")
	m.chickSeconds = histogram("chick_duration_seconds", "Chicks' time from getting a slot to their end.", []float64{5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600}, "tier")
	m.spawnSeconds = histogram("chick_spawn_seconds", "Spawn latency: from asking the Docker host for a chick's container to the chick dialling Mother.", []float64{0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60}, "host")
	m.modelCalls = counter("chick_model_calls_total", "Chicks' model calls through the broker, by tier and result (ok, error, refused: a budget).", "tier", "result")
	m.chickTokens = counter("chick_model_tokens_total", "Chicks' model tokens, by tier and direction (input, output).", "tier", "direction")
	m.costUS = counter("chick_model_cost_usd_total", "Chicks' model cost in US dollars, at the price of the model that answered (config prices, chicks.tiers.*.price).", "tier")
	m.ownCalls = counter("own_model_calls_total", "Mother's own model calls through the broker (every turn, compaction, retry and fallback), by result (ok, error, refused: a cap).", "result")
	m.ownCost = counter("own_model_cost_usd_total", "Mother's own model cost in US dollars, at the price of the model that answered (config prices).")
	m.gateConns = counter("gate_connections_total", "Connections of isolated chicks through their gate, by destination (host:port; \"other\" beyond the first 200) and outcome (allowed, refused, blocked_address, capped, failed).", "destination", "outcome")
	m.egressBytes = counter("chick_egress_bytes_total", "Bytes isolated chicks exchanged through their gate, by tier and direction (out: sent, counted against chicks.egress.maxBytes; in: received).", "tier", "direction")
	m.eventsFired = counter("events_fired_total", "Scheduled events fired, by type (immediate, one-shot, periodic).", "type")
	info := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "build_info", Help: "Mother's version.", ConstLabels: prometheus.Labels{"version": opts.Version}})
	info.Set(1)
	m.reg.MustRegister(info, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), &stateCollector{m: m})
	return m
}

// Watch sets where the gauges are read from; any may be nil.
func (m *Metrics) Watch(ms MotherState, cs ChickState, bs BudgetState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mother, m.chicks, m.budgets = ms, cs, bs
}

// WatchProviders sets where the providers' gauges are read from.
func (m *Metrics) WatchProviders(ps ProviderState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.providers = ps
}

func (m *Metrics) providerState() ProviderState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.providers
}

func (m *Metrics) sources() (MotherState, ChickState, BudgetState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mother, m.chicks, m.budgets
}

// MessageIn implements mother.Metrics.
func (m *Metrics) MessageIn(adapter string) { m.messagesIn.WithLabelValues(adapter).Inc() }

// MessageOut implements mother.Metrics.
func (m *Metrics) MessageOut(adapter string) { m.messagesOut.WithLabelValues(adapter).Inc() }

// RunEnded implements mother.Metrics.
func (m *Metrics) RunEnded(adapter string, kind mother.JobKind, stop string, d time.Duration, u model.Usage) {
	m.runs.WithLabelValues(adapter, string(kind), stop).Inc()
	m.runSeconds.WithLabelValues(string(kind)).Observe(d.Seconds())
	m.ownTokens.WithLabelValues("input").Add(float64(u.InputTokens))
	m.ownTokens.WithLabelValues("output").Add(float64(u.OutputTokens))
}

// ChickSpawned implements hatchery.SpawnObserver.
func (m *Metrics) ChickSpawned(r hatchery.Record) { m.chicksSpawned.WithLabelValues(r.Tier).Inc() }

// ChickJoined implements hatchery.JoinObserver.
func (m *Metrics) ChickJoined(r hatchery.Record, latency time.Duration) {
	m.spawnSeconds.WithLabelValues(r.Host).Observe(latency.Seconds())
}

// ChickFinished implements hatchery.FinishObserver.
func (m *Metrics) ChickFinished(r hatchery.Record, ran time.Duration) {
	m.chicksFinished.WithLabelValues(r.Tier, string(r.Reason)).Inc()
	if ran > 0 {
		m.chickSeconds.WithLabelValues(r.Tier).Observe(ran.Seconds())
	}
}

// ModelCall implements broker.Metrics.
func (m *Metrics) ModelCall(c broker.Caller, u model.Usage, costMicroUSD int64, err error) {
	result := "ok"
	switch {
	case err == nil:
	case isBudget(err):
		result = "refused"
	default:
		result = "error"
	}
	if c.Kind == broker.CallerMother {
		m.ownCalls.WithLabelValues(result).Inc()
		if costMicroUSD > 0 {
			m.ownCost.WithLabelValues().Add(float64(costMicroUSD) / 1e6)
		}
		return
	}
	m.modelCalls.WithLabelValues(c.Tier, result).Inc()
	m.chickTokens.WithLabelValues(c.Tier, "input").Add(float64(u.InputTokens))
	m.chickTokens.WithLabelValues(c.Tier, "output").Add(float64(u.OutputTokens))
	if costMicroUSD > 0 {
		m.costUS.WithLabelValues(c.Tier).Add(float64(costMicroUSD) / 1e6)
	}
}

// EventFired implements events.Metrics.
func (m *Metrics) EventFired(t events.Type, _ bool) { m.eventsFired.WithLabelValues(string(t)).Inc() }

// MaxGateDestinations bounds the destination label of
// mother_gate_connections_total: a chick cannot grow the metrics without
// end by trying names; destinations beyond the first ones count as
// "other".
const MaxGateDestinations = 200

// GateConnection implements nest.GateMetrics.
func (m *Metrics) GateConnection(destination, outcome, tier string, bytesOut, bytesIn int64) {
	m.destMu.Lock()
	if !m.destinations[destination] {
		if len(m.destinations) < MaxGateDestinations {
			m.destinations[destination] = true
		} else {
			destination = "other"
		}
	}
	m.destMu.Unlock()
	m.gateConns.WithLabelValues(destination, outcome).Inc()
	m.egressBytes.WithLabelValues(tier, "out").Add(float64(max(bytesOut, 0)))
	m.egressBytes.WithLabelValues(tier, "in").Add(float64(max(bytesIn, 0)))
}

// stateCollector reads the gauges from their owners at scrape time.
type stateCollector struct{ m *Metrics }

var (
	descQueue      = prometheus.NewDesc(Namespace+"_queue_depth", "Jobs (messages, events) waiting in Mother's channel queues, per adapter.", []string{"adapter"}, nil)
	descConnected  = prometheus.NewDesc(Namespace+"_adapter_connected", "1 when the adapter is connected to its platform, else 0.", []string{"adapter", "type", "state"}, nil)
	descReconnects = prometheus.NewDesc(Namespace+"_adapter_reconnects_total", "Connections re-established after a loss, per adapter.", []string{"adapter"}, nil)
	descChicks     = prometheus.NewDesc(Namespace+"_chicks", "Chicks alive, by state (queued, starting, running, stopping).", []string{"state"}, nil)
	descHostUp     = prometheus.NewDesc(Namespace+"_docker_host_up", "1 when the Docker host answers, else 0.", []string{"host"}, nil)
	descHostRun    = prometheus.NewDesc(Namespace+"_docker_host_chicks", "Chicks placed on the Docker host.", []string{"host"}, nil)
	descHostCap    = prometheus.NewDesc(Namespace+"_docker_host_capacity", "How many chicks the Docker host runs at once.", []string{"host"}, nil)
	descGateRest   = prometheus.NewDesc(Namespace+"_gate_restarts_total", "Times the gate of isolated chicks on the Docker host exited and Mother started it again.", []string{"host"}, nil)
	descBudgetUsed = prometheus.NewDesc(Namespace+"_budget_used_tokens", "Chick tokens used today, per tier (and per channel when channels have a cap).", []string{"kind", "name"}, nil)
	descBudgetLim  = prometheus.NewDesc(Namespace+"_budget_limit_tokens", "Daily token caps that are set.", []string{"kind", "name"}, nil)
	descBudgetLeft = prometheus.NewDesc(Namespace+"_budget_remaining_tokens", "Tokens left today under each daily cap that is set.", []string{"kind", "name"}, nil)
	descSpendUsed  = prometheus.NewDesc(Namespace+"_budget_used_usd", "US dollars spent today, per tier, Mother's own (kind mother), and per channel or event when it has a money cap.", []string{"kind", "name"}, nil)
	descSpendLim   = prometheus.NewDesc(Namespace+"_budget_limit_usd", "Daily money caps that are set.", []string{"kind", "name"}, nil)
	descSpendLeft  = prometheus.NewDesc(Namespace+"_budget_remaining_usd", "US dollars left today under each daily money cap that is set.", []string{"kind", "name"}, nil)
	descHealthy    = prometheus.NewDesc(Namespace+"_healthy", "1 when Mother's core answers its health check (as /healthz), else 0.", nil, nil)
	descUptime     = prometheus.NewDesc(Namespace+"_uptime_seconds", "Seconds since Mother started.", nil, nil)
	descFsyncs     = prometheus.NewDesc(Namespace+"_store_fsyncs_total", "fsync(2) calls on Mother's files, by kind (log, context, chick_events, chicks, usage, replace, dir, attachment, other).", []string{"kind"}, nil)
	descProvUp     = prometheus.NewDesc(Namespace+"_model_provider_up", "1 while a model provider that a fallback chain calls is up, 0 while it cools down (its calls go to the next model).", []string{"provider"}, nil)
	descEstimated  = prometheus.NewDesc(Namespace+"_model_usage_estimated_total", "Model calls whose token usage the server did not report, so it was estimated, per provider.", []string{"provider"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueue, descConnected, descReconnects, descChicks, descHostUp, descHostRun, descHostCap, descGateRest, descBudgetUsed, descBudgetLim, descBudgetLeft, descSpendUsed, descSpendLim, descSpendLeft, descHealthy, descUptime, descFsyncs, descProvUp, descEstimated, descDiskOK} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ms, cs, bs := c.m.sources()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	ch <- prometheus.MustNewConstMetric(descUptime, prometheus.GaugeValue, c.m.clock.Now().Sub(c.m.started).Seconds())
	if ps := c.m.providerState(); ps != nil {
		for _, st := range ps.Statuses() {
			gauge(descProvUp, b2f(!st.Down), st.Name)
		}
		est := ps.EstimatedCalls()
		for _, name := range sortedKeys(est) {
			ch <- prometheus.MustNewConstMetric(descEstimated, prometheus.CounterValue, float64(est[name]), name)
		}
	}
	for _, f := range fsync.Counts() {
		ch <- prometheus.MustNewConstMetric(descFsyncs, prometheus.CounterValue, float64(f.N), f.Kind)
	}
	c.collectDisk(ch)
	if ms != nil {
		depths := ms.QueueDepths()
		for _, a := range sortedKeys(depths) {
			gauge(descQueue, float64(depths[a]), a)
		}
		for _, r := range ms.AdapterReports() {
			gauge(descConnected, b2f(r.Status.State == chat.ConnConnected), r.Name, r.Type, string(r.Status.State))
			ch <- prometheus.MustNewConstMetric(descReconnects, prometheus.CounterValue, float64(r.Status.Reconnects), r.Name)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		gauge(descHealthy, b2f(ms.Healthy(ctx) == nil))
		cancel()
	}
	if cs != nil {
		counts := map[hatchery.State]int{hatchery.StateQueued: 0, hatchery.StateStarting: 0, hatchery.StateRunning: 0, hatchery.StateStopping: 0}
		for _, in := range cs.List(false) {
			counts[in.State]++
		}
		for st, n := range counts {
			gauge(descChicks, float64(n), string(st))
		}
		for _, h := range cs.HostStates() {
			gauge(descHostUp, b2f(h.Up), h.Name)
			gauge(descHostRun, float64(h.Running), h.Name)
			gauge(descHostCap, float64(h.Capacity), h.Name)
			ch <- prometheus.MustNewConstMetric(descGateRest, prometheus.CounterValue, float64(h.GateRestarts), h.Name)
		}
	}
	if bs != nil {
		for _, b := range bs.Budgets() {
			if b.Kind == "user" {
				continue // no user ids in metrics (momctl status shows them)
			}
			// Channels and events have a series each only in a unit they
			// are capped in (their number has no bound).
			each := b.Kind == "channel" || b.Kind == "mother-channel" || b.Kind == "event"
			if !each || b.Limit > 0 {
				gauge(descBudgetUsed, float64(b.Used), b.Kind, b.Name)
			}
			if b.Limit > 0 {
				gauge(descBudgetLim, float64(b.Limit), b.Kind, b.Name)
				gauge(descBudgetLeft, float64(max(0, b.Limit-b.Used)), b.Kind, b.Name)
			}
			if !each || b.LimitMicroUSD > 0 {
				gauge(descSpendUsed, float64(b.UsedMicroUSD)/1e6, b.Kind, b.Name)
			}
			if b.LimitMicroUSD > 0 {
				gauge(descSpendLim, float64(b.LimitMicroUSD)/1e6, b.Kind, b.Name)
				gauge(descSpendLeft, float64(max(0, b.LimitMicroUSD-b.UsedMicroUSD))/1e6, b.Kind, b.Name)
			}
		}
	}
}

// Handler serves /metrics and /healthz.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Timeout: 10 * time.Second}))
	mux.HandleFunc("GET /healthz", m.health)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("Mother: /metrics (Prometheus), /healthz, /status (status page)\n"))
	})
	return mux
}

// Health is the /healthz body.
type Health struct {
	// Status is "ok", "degraded" (Mother runs but cannot answer or cannot
	// run chicks: Reason says why) or "unhealthy".
	Status        string  `json:"status"`
	Error         string  `json:"error,omitempty"`
	Reason        string  `json:"reason,omitempty"`
	Version       string  `json:"version"`
	UptimeSeconds float64 `json:"uptime_seconds"`
	// AdaptersDown, HostsDown and ModelServersDown name what is not
	// connected. Mother is degraded when every model server her own
	// model has is down, or every Docker host is, or when her data
	// directory cannot be written (Disk says why).
	AdaptersDown     []string `json:"adapters_down,omitempty"`
	HostsDown        []string `json:"hosts_down,omitempty"`
	ModelServersDown []string `json:"model_servers_down,omitempty"`
	Disk             string   `json:"disk,omitempty"`
	// HostsIncompatible are the Docker hosts (up) whose chick image is of
	// a release this Mother does not work with, each with the sentence
	// that names both releases and the fix. Mother is degraded when no
	// host is both up and compatible.
	HostsIncompatible []HostIncompatible `json:"hosts_incompatible,omitempty"`
	// Release and Protocol are this Mother's (pkg/version); Version is
	// the build's label.
	Release  string `json:"release"`
	Protocol int    `json:"protocol"`
}

// HostIncompatible is a host whose chick image Mother does not work with.
type HostIncompatible struct {
	Host   string `json:"host"`
	State  string `json:"state"`
	Reason string `json:"reason"`
}

func (m *Metrics) health(w http.ResponseWriter, r *http.Request) {
	ms, cs, _ := m.sources()
	h := Health{Status: "ok", Version: m.version, Release: version.Release, Protocol: version.Protocol, UptimeSeconds: float64(int64(m.clock.Now().Sub(m.started).Seconds()))}
	code := http.StatusOK
	if ms == nil {
		h.Status, h.Error, code = "unhealthy", "starting", http.StatusServiceUnavailable
	} else {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		err := ms.Healthy(ctx)
		cancel()
		if err != nil {
			h.Status, h.Error, code = "unhealthy", err.Error(), http.StatusServiceUnavailable
		}
		for _, a := range ms.AdapterReports() {
			if a.Status.State != chat.ConnConnected {
				h.AdaptersDown = append(h.AdaptersDown, a.Name)
			}
		}
	}
	var reasons []string
	if err := m.diskErr(); err != nil {
		h.Disk = err.Error()
		reasons = append(reasons, err.Error()+": Mother stores no messages (they wait on their platform) and starts no chicks")
	}
	if cs != nil {
		hosts := cs.HostStates()
		for _, hs := range hosts {
			switch {
			case !hs.Up:
				h.HostsDown = append(h.HostsDown, hs.Name)
			case hs.Incompatible != "":
				h.HostsIncompatible = append(h.HostsIncompatible, HostIncompatible{Host: hs.Name, State: "incompatible", Reason: hs.Incompatible})
			}
		}
		switch {
		case len(hosts) > 0 && len(h.HostsDown) == len(hosts):
			reasons = append(reasons, "no Docker host answers: chicks cannot start")
		case len(hosts) > 0 && len(h.HostsDown)+len(h.HostsIncompatible) == len(hosts):
			for _, hi := range h.HostsIncompatible {
				reasons = append(reasons, hi.Reason)
			}
			reasons = append(reasons, "no Docker host can start chicks")
		}
	}
	if ps := m.providerState(); ps != nil {
		mine, mineDown := 0, 0
		for _, st := range ps.ModelServers() {
			if !st.Up {
				h.ModelServersDown = append(h.ModelServersDown, st.Name)
			}
			if slices.Contains(st.For, "mother") || slices.Contains(st.For, "mother (fallback)") {
				mine++
				if !st.Up {
					mineDown++
				}
			}
		}
		if mine > 0 && mineDown == mine {
			reasons = append(reasons, "Mother's model server does not answer: she cannot answer messages")
		}
	}
	if len(reasons) > 0 && h.Status == "ok" {
		h.Status, h.Reason, code = "degraded", strings.Join(reasons, "; "), http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(h)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func isBudget(err error) bool { return errors.Is(err, model.ErrBudgetExhausted) }
