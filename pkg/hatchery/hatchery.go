// Package hatchery supervises chicks: disposable, hardened containers on
// one or more hosts, each driven through a Runtime (the Docker Engine API
// driver is pkg/hatchery/docker; this package knows no Docker type). It
// owns a chick's whole life: the queue and the concurrency caps (global,
// per channel, per host), placement across hosts, the container (created
// hardened, labelled, watched, killed, removed or kept for inspection),
// the single-use token, the wall-clock limit, hang detection from
// heartbeats, the files the chick fetches at start (Files.List: the nest
// streams them) and those it sends back, the events the chick streams
// (stored before they are acknowledged), and reconciliation after
// a Mother restart: chicks that can go on are resumed, the rest reaped.
//
// Records live in <dir>/chicks.jsonl (one whole line per change, fsynced),
// each chick's events in <dir>/<id>/events.jsonl.
package hatchery

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/jsonl"
)

// Host is one engine chicks run on.
type Host struct {
	Name string
	// Runtime drives the engine (pkg/hatchery/docker).
	Runtime Runtime
	// Capacity is how many chicks it runs at once.
	Capacity int
	// Tiers it serves; empty: all.
	Tiers []string
	// MotherAddress is what its chicks dial.
	MotherAddress string
}

// Options build a Hatchery.
type Options struct {
	Config *config.Config
	// Dir holds the records and event logs (<data>/chicks).
	Dir string
	// Hosts are the engines; empty: Dial every host in Config.
	Hosts []Host
	// Dial opens the runtime of a configured host (docker.Open); needed
	// when Hosts is empty.
	Dial   func(config.DockerHost) (Runtime, error)
	Logger *slog.Logger
	// Clock is the time source (default clock.Real{}).
	Clock clock.Clock
	Meter Meter
	// Command overrides the image's entrypoint and command (tests and
	// debugging).
	Command []string
	// StartupGrace is how long a new chick may take to send its first
	// heartbeat (default 30s).
	StartupGrace time.Duration
	// DockerTimeout bounds each Docker call (default 60s).
	DockerTimeout time.Duration
	// ProbeInterval is how often every host is asked whether it answers
	// (default 30s); ProbeTimeout bounds one such check (default 10s).
	ProbeInterval, ProbeTimeout time.Duration
	// CAPEM is the nest's CA certificate, given to every chick so it can
	// verify Mother (MOTHER_CA_PEM). Empty: chicks cannot dial Mother.
	CAPEM []byte
	// GateKeys derive the gates' tokens and the chicks' gate keys
	// (egress.Secret, loaded from the nest's TLS directory). Nil: keys of
	// a random secret of this process (tests; a gate then cannot be
	// authorised by a Mother holding the real secret).
	GateKeys GateKeys
	// GateCommand overrides the gate container's entrypoint and command
	// (tests); empty: the chick image's entrypoint with "gate".
	GateCommand []string
	// Disk, if set, says why the data directory cannot be written now
	// (disk.Monitor.Err: "disk full: ..."), nil when it can: a spawn is
	// refused meanwhile (ErrDisk), since the chick's events could not be
	// kept.
	Disk func() error
}

// Hatchery manages every chick of one Mother instance.
type Hatchery struct {
	cfg      config.Chicks
	budgets  config.Budgets
	dir      string
	instance string
	hosts    []*host
	logger   *slog.Logger
	clock    clock.Clock
	meter    Meter
	command  []string
	grace    time.Duration
	dockerTO time.Duration
	obs      publisher
	caPEM    string
	// isolated: chicks.network is "isolated" or "none"; chicks reach
	// Mother through their host's gate. proxy: "isolated" only; the gate
	// is also their HTTP proxy ("none": Mother and nothing else).
	isolated bool
	proxy    bool
	keys     GateKeys
	gateCmd  []string
	// disk says why the data directory cannot be written (nil: none).
	disk func() error
	// unpersisted are the chicks whose last record could not be stored
	// (guarded by mu; see persist).
	unpersisted map[string]bool

	probeEvery time.Duration
	probeTO    time.Duration
	// evLimits bound each chick's events (chicks.events).
	evLimits EventLimits
	// quotaMu serialises measuring the channels' files and storing a
	// chick's file (the channel quota, quota.go).
	quotaMu sync.Mutex
	// usage is each channel's files as the quota last measured them
	// (quota.go), under quotaMu.
	usage map[string]channelBytes
	// egressMax caps each chick's egress.jsonl (chicks.egress.logMaxBytes).
	egressMax int64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	chicks  map[string]*chick
	queue   []*chick
	records *jsonl.File
	closed  bool
	// reconciling: StartReconcile runs; chicks spawned meanwhile wait in
	// the queue until the hosts' chicks are known (freeHost).
	reconciling bool
	watch       clock.Timer
	// lastTick is when the watchdog last checked the heartbeats.
	lastTick time.Time
	probe    clock.Timer
	keeps    []clock.Timer
}

type host struct {
	Host
	// gated: its isolated chicks reach Mother through its gate (the
	// network is isolated and the runtime does not confine chicks itself).
	gated   bool
	running int
	health  hostHealth
	// gateMu serializes the calls that ensure the host's gate, so two
	// chicks starting at once make one gate; gate is guarded by
	// Hatchery.mu.
	gateMu sync.Mutex
	gate   gateState
	// image: whether the host has the chick image (guarded by
	// Hatchery.mu).
	image imageState
}

type chick struct {
	rec     Record
	host    *host
	stopCh  chan struct{}
	stopped bool
	reason  Reason
	outcome string
	// lastSeen is the last time the chick said anything (in the future
	// while a startup or reconnect grace runs).
	lastSeen time.Time
	// beats is the watchdog's count of the chick's missed heartbeats and
	// the gaps it measured between them (watchdog.go). Guarded by h.mu.
	beats beats
	// evMu serialises the writes to events and guards lastSeq (the
	// highest sequence number fsynced: the ack) and written once events
	// is open; it is never taken with h.mu held.
	evMu    sync.Mutex
	lastSeq uint64
	// written is the highest sequence number written to events, durable
	// or with its fsync still to come (>= lastSeq).
	written uint64
	// evPos is where the last write to events ended (or where it stood
	// when events was opened): a failure cutting the file back since is
	// seen against it (guarded by evMu).
	evPos  jsonl.Pos
	events *jsonl.File
	// evBuf and evEnc encode a batch of events (guarded by evMu): one
	// buffer reused from batch to batch, no copy of each encoded line.
	evBuf bytes.Buffer
	evEnc *json.Encoder
	// egress is its open connection log (egress.go); nil until the first
	// connection. Guarded by h.mu.
	egress *egressLog
	// newEvent is closed when an event is stored (FollowEvents waits on
	// it); nil while no one waits. Guarded by h.mu.
	newEvent chan struct{}
	timers   []clock.Timer
	exited   bool
	ended    chan struct{}
	files    int64
	// restored marks a chick loaded from disk at start, which Reconcile
	// decides about; chicks spawned by this process are not its business.
	restored bool
	// detached: its host stopped answering and nothing watches its
	// container; reconcileHost decides when the host is back.
	detached bool
	// joined: it has dialled Mother (spawn latency is measured once).
	joined bool
	// evBucket is its token bucket of events (AdmitEvent); flooded is the
	// outcome it was stopped with for passing a bound of chicks.events
	// (empty: it has not). Both guarded by h.mu.
	evBucket bucket
	flooded  string
}

// New opens the hatchery's state under opts.Dir. Call Reconcile next, then
// Spawn; Close when Mother exits (it leaves running chicks alone).
func New(opts Options) (*Hatchery, error) {
	if opts.Config == nil || opts.Dir == "" {
		return nil, errors.New("hatchery: config and dir are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.StartupGrace <= 0 {
		opts.StartupGrace = 30 * time.Second
	}
	if opts.DockerTimeout <= 0 {
		opts.DockerTimeout = 60 * time.Second
	}
	if opts.ProbeInterval <= 0 {
		opts.ProbeInterval = 30 * time.Second
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = 10 * time.Second
	}
	if err := fsync.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("hatchery: %w", err)
	}
	inst, err := instanceID(opts.Dir)
	if err != nil {
		return nil, err
	}
	cfg := opts.Config
	h := &Hatchery{
		cfg: cfg.Chicks, budgets: cfg.Budgets, dir: opts.Dir, instance: inst,
		logger: opts.Logger.With("component", "hatchery"), clock: opts.Clock, meter: opts.Meter,
		command: opts.Command, grace: opts.StartupGrace, dockerTO: opts.DockerTimeout,
		chicks: map[string]*chick{}, caPEM: string(opts.CAPEM),
		probeEvery: opts.ProbeInterval, probeTO: opts.ProbeTimeout,
		isolated: cfg.Chicks.Network == config.NetworkIsolated || cfg.Chicks.Network == config.NetworkNone,
		proxy:    cfg.Chicks.Network == config.NetworkIsolated, keys: opts.GateKeys, gateCmd: opts.GateCommand,
		disk: opts.Disk,
	}
	if h.keys == nil {
		h.keys = newProcessKeys()
	}
	h.evLimits = eventLimits(cfg.Chicks.Events)
	h.egressMax = egressLogMax(cfg.Chicks.Egress)
	if cfg.Chicks.Network == config.NetworkHost {
		h.logger.Warn("chicks.network is \"host\" (unsafe): chicks can reach everything the Docker host can, its loopback services, the LAN and the internet; \"isolated\" lets them reach only Mother and what chicks.egress allows")
	}
	hosts := opts.Hosts
	if len(hosts) == 0 {
		if opts.Dial == nil && len(cfg.Chicks.Hosts) > 0 {
			return nil, errors.New("hatchery: no Hosts given and no Dial to open the configured ones")
		}
		for _, hc := range cfg.Chicks.Hosts {
			rt, err := opts.Dial(hc)
			if err != nil {
				h.closeHosts(hosts)
				return nil, err
			}
			addr := hc.MotherAddress
			if addr == "" {
				addr = cfg.GRPC.Advertise
			}
			hosts = append(hosts, Host{Name: hc.Name, Runtime: rt, Capacity: hc.Capacity, Tiers: hc.Tiers, MotherAddress: addr})
		}
	}
	for _, hs := range hosts {
		if hs.Capacity <= 0 {
			hs.Capacity = cfg.Chicks.MaxConcurrent
		}
		if hs.MotherAddress == "" {
			hs.MotherAddress = cfg.GRPC.Advertise
		}
		h.hosts = append(h.hosts, &host{Host: hs, gated: h.isolated && !selfIsolating(hs.Runtime)})
	}
	if len(h.hosts) == 0 {
		return nil, errors.New("hatchery: no Docker hosts")
	}
	if err := h.loadRecords(); err != nil {
		h.closeHosts(hosts)
		return nil, err
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h, nil
}

func (h *Hatchery) closeHosts(hs []Host) {
	for _, x := range hs {
		if x.Runtime != nil {
			x.Runtime.Close()
		}
	}
}

// Instance is the value of the mother.instance label on this Mother's
// containers.
func (h *Hatchery) Instance() string { return h.instance }

// Subscribe adds o to those who hear what chicks do (Mother posts it to
// channels, momctl and metrics may listen too) and returns the call that
// removes it. Each subscriber gets every call, in order; subscribe before
// Reconcile to hear the chicks it resumes and the ends it announces.
func (h *Hatchery) Subscribe(o Observer) (unsubscribe func()) { return h.obs.subscribe(o) }

// Config is the chicks configuration in force.
func (h *Hatchery) Config() config.Chicks { return h.cfg }

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return hex.EncodeToString(b)
}

func (h *Hatchery) dctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(h.ctx), h.dockerTO)
}

// removeIdleGates removes this instance's gate from every host that has
// one, when Mother stops cleanly with no chick container to come back to:
// the gate would otherwise run on with nothing to serve until her next
// start (which makes it again), and a Mother stopped for good would leave
// it behind. Only hosts that answered are asked, all at once, each for at most gateRemoveTimeout,
// so an unreachable host does not hold up the stop; a failure is logged.
func (h *Hatchery) removeIdleGates() {
	to := min(h.dockerTO, gateRemoveTimeout)
	var wg sync.WaitGroup
	for _, hs := range h.hosts {
		g, ok := hs.Runtime.(Gater)
		h.mu.Lock()
		answered := hs.health.checked && !hs.health.down
		h.mu.Unlock()
		if !ok || !answered {
			// A host that did not answer in this process cannot now
			// either; its gate, if any, is the next start's.
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), to)
			defer cancel()
			if err := g.RemoveGate(ctx, h.instance); err != nil {
				h.logger.Warn("cannot remove the gate at stop; the next start reuses or replaces it", "host", hs.Name, "err", err)
				return
			}
			h.logger.Debug("gate removed at stop: no chick left to serve", "host", hs.Name)
		})
	}
	wg.Wait()
}

// gateRemoveTimeout caps how long a clean stop waits on one host to remove
// its idle gate.
const gateRemoveTimeout = 10 * time.Second

// Close stops the hatchery's timers and watchers. Running chicks are left
// alone: they reconnect to the next Mother (decision 5).
func (h *Hatchery) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	if h.watch != nil {
		h.watch.Stop()
	}
	if h.probe != nil {
		h.probe.Stop()
	}
	for _, t := range h.keeps {
		t.Stop()
	}
	for _, c := range h.chicks {
		for _, t := range c.timers {
			t.Stop()
		}
		c.timers = nil
	}
	idle := h.isolated
	for _, c := range h.chicks {
		if c.rec.State != StateQueued && !c.rec.State.Final() {
			idle = false
		}
	}
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
	if idle {
		h.removeIdleGates()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	for _, c := range h.chicks {
		if c.events != nil {
			errs = append(errs, c.events.Close())
			c.events = nil
		}
		errs = append(errs, h.closeEgressLocked(c))
	}
	if h.records != nil {
		errs = append(errs, h.records.Close())
	}
	for _, hs := range h.hosts {
		errs = append(errs, hs.Runtime.Close())
	}
	return errors.Join(errs...)
}
