// Package hatchery runs chicks: disposable, hardened containers on Docker
// engines (Docker Engine API, github.com/docker/docker/client). It owns a
// chick's whole life: the queue and the concurrency caps (global, per
// channel, per host), the container (created hardened, labelled, filled with
// the channel's files through the archive API, watched, killed, removed or
// kept for inspection), the single-use token, the wall-clock limit, hang
// detection from heartbeats, the events the chick streams (stored before
// they are acknowledged), the files it sends back, and reconciliation after
// a Mother restart: chicks that can go on are resumed, the rest reaped.
//
// Records live in <dir>/chicks.jsonl (one whole line per change, fsynced),
// each chick's events in <dir>/<id>/events.jsonl.
package hatchery

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/jsonl"
)

// Host is one Docker engine chicks run on.
type Host struct {
	Name string
	// API is the engine's client (see Dial).
	API dockerAPI
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
	// Hosts are the engines; empty: dial every host in Config.
	Hosts  []Host
	Logger *slog.Logger
	Clock  Clock
	Meter  Meter
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
	// Metrics hears countable facts (nil: none).
	Metrics Metrics
	// CAPEM is the nest's CA certificate, given to every chick so it can
	// verify Mother (MOTHER_CA_PEM). Empty: chicks cannot dial Mother.
	CAPEM []byte
}

// Metrics hears what the hatchery can count; pkg/metrics implements it.
// Calls must be quick and must not call back into the hatchery.
type Metrics interface {
	// ChickSpawned: a chick was accepted (started or queued).
	ChickSpawned(tier string)
	// ChickJoined: a chick dialled Mother for the first time, latency after
	// its container was asked for (create, copy, start, dial).
	ChickJoined(tier, host string, latency time.Duration)
	// ChickEnded: a chick ended; ran is its time since it got a slot (0
	// if it never did).
	ChickEnded(tier string, state State, reason Reason, ran time.Duration)
}

type nopMetrics struct{}

func (nopMetrics) ChickSpawned(string)                             {}
func (nopMetrics) ChickJoined(string, string, time.Duration)       {}
func (nopMetrics) ChickEnded(string, State, Reason, time.Duration) {}

// Hatchery manages every chick of one Mother instance.
type Hatchery struct {
	cfg      config.Chicks
	budgets  config.Budgets
	dir      string
	instance string
	hosts    []*host
	logger   *slog.Logger
	clock    Clock
	meter    Meter
	command  []string
	grace    time.Duration
	dockerTO time.Duration
	obs      observerSlot
	metrics  Metrics
	caPEM    string

	probeEvery time.Duration
	probeTO    time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	chicks  map[string]*chick
	queue   []*chick
	records *jsonl.File
	closed  bool
	watch   Timer
	probe   Timer
	keeps   []Timer
}

type host struct {
	Host
	running int
	health  hostHealth
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
	lastSeq  uint64
	events   *jsonl.File
	timers   []Timer
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
		opts.Clock = SystemClock
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
	if opts.Metrics == nil {
		opts.Metrics = nopMetrics{}
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
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
		chicks: map[string]*chick{}, metrics: opts.Metrics, caPEM: string(opts.CAPEM),
		probeEvery: opts.ProbeInterval, probeTO: opts.ProbeTimeout,
	}
	hosts := opts.Hosts
	if len(hosts) == 0 {
		for _, hc := range cfg.Chicks.Hosts {
			api, err := Dial(hc, nil)
			if err != nil {
				h.closeHosts(hosts)
				return nil, err
			}
			addr := hc.MotherAddress
			if addr == "" {
				addr = cfg.GRPC.Advertise
			}
			hosts = append(hosts, Host{Name: hc.Name, API: api, Capacity: hc.Capacity, Tiers: hc.Tiers, MotherAddress: addr})
		}
	}
	for _, hs := range hosts {
		if hs.Capacity <= 0 {
			hs.Capacity = cfg.Chicks.MaxConcurrent
		}
		if hs.MotherAddress == "" {
			hs.MotherAddress = cfg.GRPC.Advertise
		}
		h.hosts = append(h.hosts, &host{Host: hs})
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
		if x.API != nil {
			x.API.Close()
		}
	}
}

// instanceID is this Mother's identity on the Docker hosts, kept in
// <dir>/instance so it survives restarts.
func instanceID(dir string) (string, error) {
	p := filepath.Join(dir, "instance")
	b, err := os.ReadFile(p)
	if err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("hatchery: read instance id: %w", err)
	}
	id := "m-" + randomHex(8)
	if err := atomicfile.WriteFile(p, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("hatchery: %w", err)
	}
	return id, nil
}

// Instance is the value of the mother.instance label on this Mother's
// containers.
func (h *Hatchery) Instance() string { return h.instance }

// SetObserver sets who hears about chicks.
func (h *Hatchery) SetObserver(o Observer) { h.obs.set(o) }

// Config is the chicks configuration in force.
func (h *Hatchery) Config() config.Chicks { return h.cfg }

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return hex.EncodeToString(b)
}

func hashToken(tok string) string {
	s := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(s[:])
}

// loadRecords reads chicks.jsonl (last line per chick wins), keeps the
// chicks that are still alive or ended less than a week ago, and rewrites
// the file with just those.
func (h *Hatchery) loadRecords() error {
	path := filepath.Join(h.dir, "chicks.jsonl")
	recs := map[string]Record{}
	err := jsonl.Scan(path, 0, -1, func(line []byte, start, _ int64) error {
		var r Record
		if err := json.Unmarshal(line, &r); err != nil || r.ID == "" {
			h.logger.Warn("skipping unreadable chicks.jsonl line", "offset", start)
			return nil
		}
		recs[r.ID] = r
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("hatchery: load records: %w", err)
	}
	// A torn tail is repaired by OpenJSONL; open first so ScanLines above
	// never saw one as a record (it skips lines without a newline).
	var buf []byte
	cutoff := h.clock.Now().Add(-7 * 24 * time.Hour)
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range recs {
			if !yield(id) {
				return
			}
		}
	})
	for _, id := range ids {
		r := recs[id]
		if r.State.Final() && r.Removed && r.EndedAt.Before(cutoff) {
			os.RemoveAll(filepath.Join(h.dir, id))
			continue
		}
		line, _ := json.Marshal(r)
		buf = append(append(buf, line...), '\n')
		c := &chick{rec: r, stopCh: make(chan struct{}), ended: make(chan struct{}), restored: true}
		if r.State.Final() {
			c.stopped = true
			close(c.stopCh)
			close(c.ended)
		}
		h.chicks[id] = c
	}
	if err := atomicfile.WriteFile(path, buf, 0o600); err != nil {
		return fmt.Errorf("hatchery: compact records: %w", err)
	}
	j, torn, err := jsonl.Open(path, true)
	if err != nil {
		return fmt.Errorf("hatchery: %w", err)
	}
	if torn > 0 {
		h.logger.Warn("repaired torn last line of chicks.jsonl", "bytes", torn)
	}
	h.records = j
	h.pruneLocked()
	return nil
}

// persist appends c's record. Callers hold h.mu.
func (h *Hatchery) persist(c *chick) {
	if h.records == nil {
		return
	}
	if _, _, err := h.records.Append(c.rec); err != nil {
		h.logger.Error("cannot persist chick record", "chick", c.rec.ID, "err", err)
	}
}

func (h *Hatchery) info(c *chick) Info {
	in := Info{Record: c.rec, Channel: chat.QualifiedID(c.rec.Adapter, c.rec.ChannelID)}
	in.TokenHash = ""
	in.System = ""
	if h.meter != nil {
		in.Usage = h.meter.ChickUsage(c.rec.ID)
	}
	return in
}

// SpawnRequest asks for a chick.
type SpawnRequest struct {
	Adapter   string
	ChannelID string
	Goal      string
	// Tier is a configured tier; empty: chicks.defaultTier.
	Tier string
	// System is extra system prompt text for the chick.
	System string
	Files  Files
	// StartedBy is the user who asked for it (for "stop all").
	StartedBy string
}

// Spawn creates a chick: it starts at once when a slot is free, or waits
// in the queue. It fails with ErrQueueFull when the queue is full and
// ErrUnknownTier for a tier not in the configuration.
func (h *Hatchery) Spawn(ctx context.Context, req SpawnRequest) (Info, error) {
	if strings.TrimSpace(req.Goal) == "" {
		return Info{}, errors.New("spawn chick: empty goal")
	}
	tier := req.Tier
	if tier == "" {
		tier = h.cfg.DefaultTier
	}
	t, ok := h.cfg.Tiers[tier]
	if !ok {
		return Info{}, fmt.Errorf("spawn chick: %w %q (configured: %s)", ErrUnknownTier, tier, strings.Join(slices.Sorted(mapsKeys(h.cfg.Tiers)), ", "))
	}
	if !h.anyHostServes(tier) {
		return Info{}, fmt.Errorf("spawn chick: no Docker host serves tier %q", tier)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return Info{}, ErrClosed
	}
	id := h.newID()
	c := &chick{
		rec: Record{
			ID: id, Adapter: req.Adapter, ChannelID: req.ChannelID, ChannelDir: req.Files.ChannelDir, Skills: req.Files.SharedSkills,
			Goal: req.Goal, Tier: tier, Model: t.Model, System: req.System, State: StateQueued, CreatedAt: h.clock.Now(),
			StartedBy: req.StartedBy,
		},
		stopCh: make(chan struct{}),
		ended:  make(chan struct{}),
	}
	hs := h.freeHost(c)
	if hs == nil && len(h.queue) >= h.cfg.QueueSize {
		return Info{}, fmt.Errorf("spawn chick: %w (%d waiting)", ErrQueueFull, len(h.queue))
	}
	h.chicks[id] = c
	h.metrics.ChickSpawned(tier)
	if hs == nil {
		h.queue = append(h.queue, c)
		h.persist(c)
		h.logger.Info("chick queued", "chick", id, "channel", chat.QualifiedID(req.Adapter, req.ChannelID), "tier", tier, "queue", len(h.queue))
		return h.info(c), nil
	}
	h.begin(c, hs)
	return h.info(c), nil
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (h *Hatchery) newID() string {
	for {
		id := "c-" + randomHex(4)
		if _, dup := h.chicks[id]; !dup {
			return id
		}
	}
}

func (h *Hatchery) anyHostServes(tier string) bool {
	for _, hs := range h.hosts {
		if len(hs.Tiers) == 0 || slices.Contains(hs.Tiers, tier) {
			return true
		}
	}
	return false
}

// freeHost returns a host with room for c, or nil when a cap is reached.
// Callers hold h.mu.
func (h *Hatchery) freeHost(c *chick) *host {
	total, inChannel := 0, 0
	for _, o := range h.chicks {
		if o.rec.State == StateStarting || o.rec.State == StateRunning || o.rec.State == StateStopping {
			total++
			if o.rec.Adapter == c.rec.Adapter && o.rec.ChannelID == c.rec.ChannelID {
				inChannel++
			}
		}
	}
	if total >= h.cfg.MaxConcurrent || inChannel >= h.cfg.MaxPerChannel {
		return nil
	}
	var best *host
	for _, hs := range h.hosts {
		if len(hs.Tiers) > 0 && !slices.Contains(hs.Tiers, c.rec.Tier) {
			continue
		}
		if hs.running >= hs.Capacity || hs.health.down {
			continue
		}
		// Most free capacity first (decision 10).
		if best == nil || hs.Capacity-hs.running > best.Capacity-best.running {
			best = hs
		}
	}
	return best
}

// begin moves c to starting on hs and starts its container in the
// background. Callers hold h.mu.
func (h *Hatchery) begin(c *chick, hs *host) {
	tok := randomHex(32)
	c.host = hs
	hs.running++
	c.rec.State = StateStarting
	c.rec.Host = hs.Name
	c.rec.TokenHash = hashToken(tok)
	c.rec.StartedAt = h.clock.Now()
	c.lastSeen = c.rec.StartedAt.Add(h.grace)
	h.persist(c)
	h.logger.Info("chick starting", "chick", c.rec.ID, "channel", chat.QualifiedID(c.rec.Adapter, c.rec.ChannelID), "tier", c.rec.Tier, "host", hs.Name)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.startContainer(c, hs, tok)
	}()
}

func (h *Hatchery) dctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(h.ctx), h.dockerTO)
}

// startContainer creates, fills and starts c's container.
func (h *Hatchery) startContainer(c *chick, hs *host, tok string) {
	id := c.rec.ID
	labels := map[string]string{
		LabelChickID:  id,
		LabelChannel:  chat.QualifiedID(c.rec.Adapter, c.rec.ChannelID),
		LabelInstance: h.instance,
		LabelTier:     c.rec.Tier,
	}
	env := []string{EnvAddr + "=" + hs.MotherAddress, EnvToken + "=" + tok, EnvChickID + "=" + id, "HOME=" + Workspace, "TMPDIR=/tmp"}
	if h.caPEM != "" {
		// Public: how the chick recognises Mother (not a secret).
		env = append(env, EnvCA+"="+h.caPEM)
	}
	cc, hc, err := containerSpec(h.cfg, h.cfg.Image, h.command, labels, env)
	if err != nil {
		h.failStart(c, "", err)
		return
	}
	ctx, cancel := h.dctx()
	resp, err := hs.API.ContainerCreate(ctx, cc, hc, nil, nil, "mother-chick-"+id+"-"+h.instance)
	cancel()
	if err != nil {
		if unreachable(err) {
			h.requeue(c, hs, err)
			return
		}
		if client.IsErrNotFound(err) {
			err = fmt.Errorf("the image %s is not on Docker host %s: build it with `make image` there, or set chicks.image (%w)", h.cfg.Image, hs.Name, err)
		}
		h.failStart(c, "", fmt.Errorf("create chick container: %w", err))
		return
	}
	cid := resp.ID
	h.mu.Lock()
	c.rec.ContainerID = cid
	h.persist(c)
	stopped := c.stopped
	h.mu.Unlock()
	if stopped {
		h.failStart(c, cid, errors.New("stopped before it started"))
		return
	}
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(pack(pw, Files{ChannelDir: c.rec.ChannelDir, SharedSkills: c.rec.Skills}, parseOwner(h.cfg.Hardening.User)))
	}()
	ctx, cancel = h.dctx()
	err = hs.API.CopyToContainer(ctx, cid, Workspace, pr, container.CopyToContainerOptions{})
	cancel()
	pr.CloseWithError(errors.New("copy ended"))
	if unreachable(err) {
		h.requeue(c, hs, err)
		return
	}
	if err != nil {
		h.failStart(c, cid, fmt.Errorf("copy the channel's files into the chick: %w", err))
		return
	}
	// Wait before start, so a fast exit is not missed.
	wctx, wcancel := context.WithCancel(context.WithoutCancel(h.ctx))
	waitCh, errCh := hs.API.ContainerWait(wctx, cid, container.WaitConditionNextExit)
	ctx, cancel = h.dctx()
	err = hs.API.ContainerStart(ctx, cid, container.StartOptions{})
	cancel()
	if err != nil {
		wcancel()
		if unreachable(err) {
			h.requeue(c, hs, err)
			return
		}
		h.failStart(c, cid, fmt.Errorf("start chick container: %w", err))
		return
	}
	h.mu.Lock()
	if c.rec.State == StateStarting {
		c.rec.State = StateRunning
	}
	h.persist(c)
	h.armTimeout(c, h.cfg.Timeout.Duration)
	stopped = c.stopped
	h.mu.Unlock()
	h.logger.Info("chick running", "chick", id, "container", short(cid))
	if stopped {
		// A kill arrived while the container was starting.
		h.killContainer(c)
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer wcancel()
		h.waitExit(c, waitCh, errCh)
	}()
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// failStart ends a chick whose container could not be started.
func (h *Hatchery) failStart(c *chick, cid string, err error) {
	if cid != "" {
		h.removeContainer(c.host, cid)
	}
	h.mu.Lock()
	reason, outcome := ReasonNoStart, "could not start: "+err.Error()
	if c.stopped && c.reason != "" {
		reason, outcome = c.reason, c.outcome
	}
	h.logger.Error("chick did not start", "chick", c.rec.ID, "err", err)
	c.rec.Removed = true
	h.endLocked(c, reason, outcome)
}

// armTimeout schedules the wall-clock limit. Callers hold h.mu.
func (h *Hatchery) armTimeout(c *chick, d time.Duration) {
	if d <= 0 {
		return
	}
	id := c.rec.ID
	limit := h.cfg.Timeout.Duration
	c.timers = append(c.timers, h.clock.AfterFunc(d, func() {
		_, _ = h.Stop(id, ReasonTimeout, fmt.Sprintf("timed out after %s", limit), h.cfg.KillGrace.Duration)
	}))
}

// waitExit waits for c's container to exit and ends the chick.
func (h *Hatchery) waitExit(c *chick, waitCh <-chan container.WaitResponse, errCh <-chan error) {
	var code int64 = -1
	select {
	case r := <-waitCh:
		code = r.StatusCode
	case err := <-errCh:
		if h.ctx.Err() != nil {
			return // Mother is closing; the chick lives on
		}
		h.logger.Warn("lost track of chick container; checking", "chick", c.rec.ID, "err", err)
		ctx, cancel := h.dctx()
		insp, ierr := c.host.API.ContainerInspect(ctx, c.rec.ContainerID)
		cancel()
		if unreachable(ierr) {
			// The chick may well live on (it talks to Mother, not to
			// Docker); its host is looked at again when it answers.
			h.mu.Lock()
			h.markDownLocked(c.host, ierr)
			c.detached = true
			h.mu.Unlock()
			return
		}
		if ierr == nil && insp.State != nil && insp.State.Running {
			// Still running: wait again.
			wctx, wcancel := context.WithCancel(context.WithoutCancel(h.ctx))
			defer wcancel()
			w2, e2 := c.host.API.ContainerWait(wctx, c.rec.ContainerID, container.WaitConditionNotRunning)
			h.waitExit(c, w2, e2)
			return
		}
		if ierr == nil && insp.State != nil {
			code = int64(insp.State.ExitCode)
		}
	case <-h.ctx.Done():
		return
	}
	h.exited(c, code)
}

// exited ends a chick whose container has exited.
func (h *Hatchery) exited(c *chick, code int64) {
	h.mu.Lock()
	if c.rec.State.Final() {
		h.mu.Unlock()
		return
	}
	c.exited = true
	c.rec.ExitCode = code
	reason, outcome := c.reason, c.outcome
	if reason == "" {
		if r := c.rec.Result; r != nil {
			reason, outcome = resultReason(r)
		} else {
			reason = ReasonCrashed
			outcome = fmt.Sprintf("crashed: the chick exited with code %d without a result", code)
		}
	}
	h.endLocked(c, reason, outcome)
}

func resultReason(r *Result) (Reason, string) {
	switch r.StopReason {
	case string(agent.StopDone), "":
		return ReasonDone, "done"
	case string(agent.StopBudget):
		return ReasonBudget, "budget exhausted: " + firstLine(r.Error)
	case string(agent.StopAborted):
		return ReasonKilled, "cancelled"
	}
	msg := r.Error
	if msg == "" {
		msg = r.StopReason
	}
	return ReasonError, "failed: " + firstLine(msg)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// endLocked makes c final, persists it, frees its slot, schedules the
// container's removal and tells the observer. Called with h.mu held; it
// unlocks.
func (h *Hatchery) endLocked(c *chick, reason Reason, outcome string) {
	if c.rec.State.Final() {
		h.mu.Unlock()
		return
	}
	wasActive := c.rec.State == StateStarting || c.rec.State == StateRunning || c.rec.State == StateStopping
	var ran time.Duration
	if !c.rec.StartedAt.IsZero() {
		ran = h.clock.Now().Sub(c.rec.StartedAt)
	}
	switch reason {
	case ReasonDone:
		c.rec.State = StateDone
	case ReasonKilled, ReasonBudget, ReasonShutdown:
		c.rec.State = StateKilled
	default:
		c.rec.State = StateFailed
	}
	c.rec.Reason, c.rec.Outcome = reason, outcome
	c.rec.EndedAt = h.clock.Now()
	for _, t := range c.timers {
		t.Stop()
	}
	c.timers = nil
	if !c.stopped {
		c.stopped = true
		close(c.stopCh)
	}
	if c.events != nil {
		c.events.Close()
		c.events = nil
	}
	if i := slices.Index(h.queue, c); i >= 0 {
		h.queue = slices.Delete(h.queue, i, i+1)
	}
	if wasActive && c.host != nil {
		c.host.running--
	}
	cid, hs := c.rec.ContainerID, c.host
	keep := h.cfg.KeepFor.Duration
	// On a host that is down the container stays recorded as not removed:
	// reconcileHost reaps it when the host is back.
	needRemove := cid != "" && hs != nil && !c.rec.Removed && !hs.health.down
	if needRemove {
		if keep > 0 {
			c.rec.KeepUntil = c.rec.EndedAt.Add(keep)
		} else {
			c.rec.Removed = true
		}
	}
	c.rec.Unreported = true
	h.persist(c)
	info := h.info(c)
	h.metrics.ChickEnded(c.rec.Tier, c.rec.State, reason, ran)
	h.dequeueLocked()
	h.pruneLocked()
	h.mu.Unlock()
	// Ended means cleaned up: the container is gone (or kept, stopped).
	defer close(c.ended)

	h.logger.Info("chick ended", "chick", info.ID, "state", info.State, "reason", reason, "tokens", info.Usage.Total())
	if needRemove {
		if keep > 0 {
			id := info.ID
			h.keepTimer(keep, id)
			// Kept for inspection, but never left running.
			ctx, cancel := h.dctx()
			_ = hs.API.ContainerKill(ctx, cid, "KILL")
			cancel()
		} else {
			h.removeContainer(hs, cid)
		}
	}
	h.obs.get().ChickEnded(info)
}

// Reported records that the end of chick id has been told to its channel
// (see Record.Unreported).
func (h *Hatchery) Reported(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.chicks[id]
	if !ok || !c.rec.Unreported {
		return
	}
	c.rec.Unreported = false
	h.persist(c)
	h.pruneLocked()
}

// dequeueLocked starts queued chicks while slots are free. Callers hold
// h.mu.
func (h *Hatchery) dequeueLocked() {
	for i := 0; i < len(h.queue); {
		c := h.queue[i]
		hs := h.freeHost(c)
		if hs == nil {
			i++
			continue
		}
		h.queue = slices.Delete(h.queue, i, i+1)
		h.begin(c, hs)
	}
}

// keepTimer schedules the removal of a container kept for inspection.
func (h *Hatchery) keepTimer(d time.Duration, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.keeps = append(h.keeps, h.clock.AfterFunc(d, func() { h.expire(id) }))
}

// expire removes a container kept for inspection.
func (h *Hatchery) expire(id string) {
	h.mu.Lock()
	c, ok := h.chicks[id]
	if !ok || c.rec.Removed || c.host == nil {
		h.mu.Unlock()
		return
	}
	c.rec.Removed = true
	h.persist(c)
	hs, cid := c.host, c.rec.ContainerID
	h.pruneLocked()
	h.mu.Unlock()
	h.removeContainer(hs, cid)
}

// MaxRemembered is how many ended chicks (their containers gone) the
// hatchery keeps in memory, for momctl chicks ls --all and list_chicks.
// Older ones are forgotten, so a Mother that runs for months does not grow
// with every chick; their records stay in chicks.jsonl until the weekly
// compaction at start.
const MaxRemembered = 200

// pruneLocked forgets the oldest ended chicks beyond MaxRemembered.
// Callers hold h.mu.
func (h *Hatchery) pruneLocked() {
	var ended []*chick
	for _, c := range h.chicks {
		if c.rec.State.Final() && (c.rec.Removed || c.rec.ContainerID == "") && !c.rec.Unreported {
			ended = append(ended, c)
		}
	}
	if len(ended) <= MaxRemembered {
		return
	}
	sort.Slice(ended, func(i, j int) bool {
		if !ended[i].rec.EndedAt.Equal(ended[j].rec.EndedAt) {
			return ended[i].rec.EndedAt.Before(ended[j].rec.EndedAt)
		}
		return ended[i].rec.ID < ended[j].rec.ID
	})
	for _, c := range ended[:len(ended)-MaxRemembered] {
		delete(h.chicks, c.rec.ID)
	}
}

func (h *Hatchery) removeContainer(hs *host, cid string) {
	if hs == nil || cid == "" {
		return
	}
	// The engine may still be tearing down an exited container; a remove
	// then can answer without removing. Check, and try again.
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		ctx, cancel := h.dctx()
		err := hs.API.ContainerRemove(ctx, cid, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err == nil || client.IsErrNotFound(err) {
			_, ierr := hs.API.ContainerInspect(ctx, cid)
			cancel()
			if client.IsErrNotFound(ierr) {
				return
			}
			err = fmt.Errorf("still there after remove (%v)", ierr)
		} else {
			cancel()
		}
		if attempt == 6 || h.ctx.Err() != nil {
			h.logger.Warn("cannot remove chick container", "container", short(cid), "err", err)
			return
		}
		h.logger.Debug("retrying container removal", "container", short(cid), "err", err)
		time.Sleep(wait)
		wait *= 2
	}
}

func (h *Hatchery) killContainer(c *chick) {
	h.mu.Lock()
	hs, cid := c.host, c.rec.ContainerID
	h.mu.Unlock()
	if hs == nil || cid == "" {
		return
	}
	ctx, cancel := h.dctx()
	err := hs.API.ContainerKill(ctx, cid, "KILL")
	cancel()
	if unreachable(err) {
		h.mu.Lock()
		h.markDownLocked(hs, err)
		h.mu.Unlock()
		h.hostGone(c)
		return
	}
	if err != nil && !client.IsErrNotFound(err) && !errdefs.IsConflict(err) {
		h.logger.Warn("cannot kill chick container", "container", short(cid), "err", err)
	}
}

// Stop ends a chick in two steps: it asks the chick to cancel (the nest
// sends the cancellation), then kills the container after grace. A queued
// chick is dropped at once. Stopping a chick that is already stopping or
// has ended is not an error: Stop returns its state.
func (h *Hatchery) Stop(id string, reason Reason, outcome string, grace time.Duration) (State, error) {
	h.mu.Lock()
	c, ok := h.chicks[id]
	if !ok {
		h.mu.Unlock()
		return "", fmt.Errorf("stop chick %s: %w", id, ErrUnknownChick)
	}
	switch {
	case c.rec.State.Final():
		st := c.rec.State
		h.mu.Unlock()
		return st, nil
	case c.rec.State == StateQueued:
		h.endLocked(c, reason, outcome)
		return h.State(id), nil
	case c.stopped:
		// Already stopping: a second stop may shorten the grace.
		st := c.rec.State
		if grace <= 0 {
			h.mu.Unlock()
			h.killContainer(c)
			return st, nil
		}
		h.mu.Unlock()
		return st, nil
	}
	c.stopped = true
	c.reason, c.outcome = reason, outcome
	close(c.stopCh)
	c.rec.State = StateStopping
	h.persist(c)
	h.logger.Info("stopping chick", "chick", id, "reason", reason, "grace", grace)
	if grace > 0 {
		c.timers = append(c.timers, h.clock.AfterFunc(grace, func() { h.killContainer(c) }))
		h.mu.Unlock()
	} else {
		h.mu.Unlock()
		h.killContainer(c)
	}
	return StateStopping, nil
}

// State returns a chick's state ("" if unknown).
func (h *Hatchery) State(id string) State {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.chicks[id]; ok {
		return c.rec.State
	}
	return ""
}

// Get returns one chick.
func (h *Hatchery) Get(id string) (Info, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.chicks[id]
	if !ok {
		return Info{}, fmt.Errorf("chick %s: %w", id, ErrUnknownChick)
	}
	return h.info(c), nil
}

// Ended returns a channel closed when the chick has ended.
func (h *Hatchery) Ended(id string) (<-chan struct{}, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.chicks[id]
	if !ok {
		return nil, fmt.Errorf("chick %s: %w", id, ErrUnknownChick)
	}
	return c.ended, nil
}

// List returns the chicks that are alive (all: also the remembered ended
// ones), oldest first.
func (h *Hatchery) List(all bool) []Info {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Info
	for _, c := range h.chicks {
		if all || !c.rec.State.Final() {
			out = append(out, h.info(c))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Authenticate checks that tok is the token of chick id and that the chick
// has not ended. The comparison is constant-time.
func (h *Hatchery) Authenticate(id, tok string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.chicks[id]
	if !ok || c.rec.TokenHash == "" {
		// Same answer as a bad token: do not reveal which chicks exist.
		return ErrBadToken
	}
	if subtle.ConstantTimeCompare([]byte(hashToken(tok)), []byte(c.rec.TokenHash)) != 1 {
		return ErrBadToken
	}
	if c.rec.State.Final() {
		return ErrChickEnded
	}
	return nil
}

// Assignment is what chick id receives when it joins.
func (h *Hatchery) Assignment(id string) (Assignment, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.chicks[id]
	if !ok {
		return Assignment{}, ErrUnknownChick
	}
	h.heardLocked(c)
	if !c.joined {
		c.joined = true
		if !c.rec.StartedAt.IsZero() {
			h.metrics.ChickJoined(c.rec.Tier, c.rec.Host, h.clock.Now().Sub(c.rec.StartedAt))
		}
	}
	left := time.Duration(0)
	if t := h.cfg.Timeout.Duration; t > 0 {
		left = t - h.clock.Now().Sub(c.rec.StartedAt)
		if left < time.Second {
			left = time.Second
		}
	}
	return Assignment{
		ChickID: id, Channel: chat.QualifiedID(c.rec.Adapter, c.rec.ChannelID), Goal: c.rec.Goal, Tier: c.rec.Tier,
		System: c.rec.System, MaxTurns: h.cfg.MaxTurns, WallTimeout: left, TokenBudget: h.budgets.ChickTokens,
		HeartbeatInterval: h.cfg.HeartbeatInterval.Duration,
	}, nil
}

// heardLocked records that c said something. The first word ends the
// startup (or reconnect) grace: from then on three missed heartbeats mean
// hung, however early in its life the chick stops. Callers hold h.mu.
func (h *Hatchery) heardLocked(c *chick) {
	c.lastSeen = h.clock.Now()
}

// Touch records that chick id is alive (any message counts).
func (h *Hatchery) Touch(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.chicks[id]; ok {
		h.heardLocked(c)
	}
}

// Stopping returns a channel closed when the chick is asked to stop, and
// a function giving the reason.
func (h *Hatchery) Stopping(id string) (<-chan struct{}, func() string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.chicks[id]
	if !ok {
		return nil, nil, ErrUnknownChick
	}
	return c.stopCh, func() string {
		h.mu.Lock()
		defer h.mu.Unlock()
		if c.outcome != "" {
			return c.outcome
		}
		return string(c.reason)
	}, nil
}

// LastSeq is the highest event sequence number stored for chick id.
func (h *Hatchery) LastSeq(id string) (uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.chicks[id]
	if !ok {
		return 0, ErrUnknownChick
	}
	if err := h.openEventsLocked(c); err != nil {
		return 0, err
	}
	return c.lastSeq, nil
}

type storedEvent struct {
	Seq   uint64      `json:"seq"`
	Event agent.Event `json:"event"`
}

// openEventsLocked opens c's event log and finds its last sequence number.
func (h *Hatchery) openEventsLocked(c *chick) error {
	if c.events != nil || c.rec.State.Final() {
		return nil
	}
	dir := filepath.Join(h.dir, c.rec.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("chick events: %w", err)
	}
	path := filepath.Join(dir, "events.jsonl")
	j, _, err := jsonl.Open(path, true)
	if err != nil {
		return fmt.Errorf("chick events: %w", err)
	}
	var last uint64
	_ = jsonl.Scan(path, 0, j.Size(), func(line []byte, _, _ int64) error {
		var se storedEvent
		if json.Unmarshal(line, &se) == nil && se.Seq > last {
			last = se.Seq
		}
		return nil
	})
	c.events, c.lastSeq = j, last
	return nil
}

// RecordEvent stores one event of chick id and returns the highest stored
// sequence number (the ack). A duplicate (seq already stored) is dropped;
// a gap is an error (the chick resends from the ack).
func (h *Hatchery) RecordEvent(id string, seq uint64, ev agent.Event) (uint64, error) {
	h.mu.Lock()
	c, ok := h.chicks[id]
	if !ok {
		h.mu.Unlock()
		return 0, ErrUnknownChick
	}
	if c.rec.State.Final() {
		h.mu.Unlock()
		return 0, ErrChickEnded
	}
	h.heardLocked(c)
	if err := h.openEventsLocked(c); err != nil {
		h.mu.Unlock()
		return 0, err
	}
	if seq <= c.lastSeq {
		last := c.lastSeq
		h.mu.Unlock()
		return last, nil
	}
	if seq != c.lastSeq+1 {
		last := c.lastSeq
		h.mu.Unlock()
		return last, fmt.Errorf("%w: got %d after %d", ErrSeqGap, seq, last)
	}
	if _, _, err := c.events.Append(storedEvent{Seq: seq, Event: ev}); err != nil {
		last := c.lastSeq
		h.mu.Unlock()
		return last, err
	}
	c.lastSeq = seq
	info := h.info(c)
	h.mu.Unlock()
	h.obs.get().ChickEvent(info, ev)
	return seq, nil
}

// Finish records chick id's result. The container is expected to exit by
// itself; it is killed if it has not after the kill grace.
func (h *Hatchery) Finish(id string, r Result) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.chicks[id]
	if !ok {
		return ErrUnknownChick
	}
	if c.rec.Result != nil || c.rec.State.Final() {
		return nil // a resend after a reconnect
	}
	h.heardLocked(c)
	c.rec.Result = &r
	h.persist(c)
	grace := h.cfg.KillGrace.Duration
	if grace <= 0 {
		grace = 10 * time.Second
	}
	c.timers = append(c.timers, h.clock.AfterFunc(grace, func() { h.killContainer(c) }))
	return nil
}

// MaxFileBytes caps one file a chick sends back; MaxChickFileBytes all of
// them.
const (
	MaxFileBytes      = 100 << 20
	MaxChickFileBytes = 1 << 30
)

// StoreFile stores a file chick id sends back under
// <channel dir>/scratch/chicks/<id>/<rel>, and tells the observer (which
// posts attached files to the channel).
func (h *Hatchery) StoreFile(id, rel string, attach bool, title string, r io.Reader) (File, error) {
	h.mu.Lock()
	c, ok := h.chicks[id]
	if !ok {
		h.mu.Unlock()
		return File{}, ErrUnknownChick
	}
	chDir := c.rec.ChannelDir
	used := c.files
	h.heardLocked(c)
	h.mu.Unlock()
	if chDir == "" {
		return File{}, errors.New("store file: the chick has no channel directory")
	}
	clean, err := cleanRel(rel)
	if err != nil {
		return File{}, fmt.Errorf("store file: %w", err)
	}
	relOut := filepath.Join("scratch", "chicks", id, clean)
	dst := filepath.Join(chDir, relOut)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return File{}, fmt.Errorf("store file: %w", err)
	}
	if err := insideNoLinks(chDir, filepath.Dir(dst)); err != nil {
		return File{}, fmt.Errorf("store file: %w", err)
	}
	limit := min(int64(MaxFileBytes), MaxChickFileBytes-used)
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".upload-*")
	if err != nil {
		return File{}, fmt.Errorf("store file: %w", err)
	}
	n, err := io.Copy(tmp, io.LimitReader(r, limit+1))
	if err == nil && n > limit {
		err = fmt.Errorf("file larger than %d bytes", limit)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return File{}, fmt.Errorf("store file %s: %w", clean, err)
	}
	h.mu.Lock()
	c.files += n
	info := h.info(c)
	h.mu.Unlock()
	f := File{Path: dst, RelPath: relOut, Attach: attach, Title: title, Size: n}
	h.obs.get().ChickFile(info, f)
	return f, nil
}

// cleanRel checks a path relative to the chick's workspace.
func cleanRel(rel string) (string, error) {
	rel = strings.TrimPrefix(rel, Workspace+"/")
	if rel == "" || filepath.IsAbs(rel) {
		return "", fmt.Errorf("path %q must be relative to the workspace", rel)
	}
	c := filepath.Clean(rel)
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %q leaves the workspace", rel)
	}
	return c, nil
}

// insideNoLinks checks that dir is under root with no symlink on the way.
func insideNoLinks(root, dir string) error {
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("%s is outside the channel directory", dir)
	}
	p := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		if part == "." {
			continue
		}
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symlink", p)
		}
	}
	return nil
}

// StartWatchdog checks heartbeats every interval: a running chick silent
// for three intervals is declared hung and killed.
func (h *Hatchery) StartWatchdog() {
	iv := h.cfg.HeartbeatInterval.Duration
	if iv <= 0 {
		return
	}
	var tick func()
	tick = func() {
		h.checkHeartbeats(3 * iv)
		h.mu.Lock()
		if !h.closed {
			h.watch = h.clock.AfterFunc(iv, tick)
		}
		h.mu.Unlock()
	}
	h.mu.Lock()
	h.watch = h.clock.AfterFunc(iv, tick)
	h.mu.Unlock()
}

func (h *Hatchery) checkHeartbeats(limit time.Duration) {
	now := h.clock.Now()
	var hung []string
	h.mu.Lock()
	for id, c := range h.chicks {
		// A chick whose result is stored has nothing left to say: it is
		// exiting (Finish armed the kill), not hung.
		if c.rec.State == StateRunning && !c.stopped && c.rec.Result == nil && now.Sub(c.lastSeen) > limit {
			hung = append(hung, id)
		}
	}
	h.mu.Unlock()
	for _, id := range hung {
		h.logger.Warn("chick missed its heartbeats; killing it", "chick", id, "silent_for", limit)
		_, _ = h.Stop(id, ReasonHung, fmt.Sprintf("hung: no heartbeat for %s", limit), 0)
	}
}

// Logs writes the container output of chick id to w (demultiplexed);
// follow streams until the container exits or ctx ends.
func (h *Hatchery) Logs(ctx context.Context, id string, follow bool, w io.Writer) error {
	h.mu.Lock()
	c, ok := h.chicks[id]
	if !ok {
		h.mu.Unlock()
		return fmt.Errorf("chick %s: %w", id, ErrUnknownChick)
	}
	hs, cid, removed := c.host, c.rec.ContainerID, c.rec.Removed
	h.mu.Unlock()
	if cid == "" || hs == nil {
		return fmt.Errorf("chick %s has no container yet", id)
	}
	if removed {
		return fmt.Errorf("chick %s: its container was removed when it ended (set chicks.keepFor to keep ended chicks for inspection)", id)
	}
	rc, err := hs.API.ContainerLogs(ctx, cid, container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: follow, Timestamps: false})
	if err != nil {
		if client.IsErrNotFound(err) {
			return fmt.Errorf("chick %s: its container is gone", id)
		}
		return fmt.Errorf("chick %s logs: %w", id, err)
	}
	defer rc.Close()
	if _, err := stdcopy.StdCopy(w, w, rc); err != nil && ctx.Err() == nil {
		return fmt.Errorf("chick %s logs: %w", id, err)
	}
	return nil
}

// QueueLen is how many chicks wait for a slot.
func (h *Hatchery) QueueLen() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.queue)
}

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
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	for _, c := range h.chicks {
		if c.events != nil {
			errs = append(errs, c.events.Close())
			c.events = nil
		}
	}
	if h.records != nil {
		errs = append(errs, h.records.Close())
	}
	for _, hs := range h.hosts {
		errs = append(errs, hs.API.Close())
	}
	return errors.Join(errs...)
}
