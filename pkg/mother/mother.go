// Package mother is Mother's core: it receives what adapters hear, logs
// every message to the channel store, queues the ones that call for an
// answer (one run at a time per channel), runs her agent on them, and hands
// the agent's events to the adapter to render.
package mother

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/disk"
	"github.com/mother-chat/mother/pkg/egress"
	"github.com/mother-chat/mother/pkg/memtrim"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/prompt"
	"github.com/mother-chat/mother/pkg/store"
)

// Options build a Mother.
type Options struct {
	Config *config.Config
	Store  *store.Store
	// Provider serves Mother's own model (config.Model).
	Provider model.Provider
	Logger   *slog.Logger
	// Clock tells the time and times the idle trim (default clock.Real).
	Clock clock.Clock
	// Tools are Mother's own safe tools.
	Tools []agent.Tool
	// Canceller cancels a channel's chicks for "stop all" (nil: the
	// chicks of Chicks, if set; else none to cancel).
	Canceller ChickCanceller
	// Chicks, if set, gives Mother the spawn_chick, list_chicks and
	// cancel_chick tools; set the hatchery's observer to ChickObserver.
	Chicks Hatchery
	// Metrics hears countable facts (nil: none).
	Metrics Metrics
	// HostTools lists the host tools (MCP servers) for the prompt of each
	// run; they are called through invoke_tool, one of Tools (nil: none).
	HostTools func() []prompt.HostTool
	// ChickHostTools lists the host tools chicks may ask for (their
	// host_tool tool), for the chick's prompt (nil: none).
	ChickHostTools func() []prompt.HostTool
	// Egress, if set, lets chicks ask the channel's admins for network
	// destinations (RequestAccess; admins answer "allow", "always" or
	// "deny" in the channel) and keeps the approvals.
	Egress *egress.Policy
	// Disk, if set, watches the data directory's disk: messages Mother
	// could not store are reported to it (and the adapters wait on it
	// before delivering them again), and the admins are told when it
	// fills or fails, and when it is fine again.
	Disk *disk.Monitor
	// Reports, if set, charges the report Mother's model reads about an
	// ended chick to that chick (pace.go).
	Reports ReportMeter
	// Recall, if set, gives Mother the recall and recall_read tools over
	// the channels' history (recall.go).
	Recall Recaller
	// Ears, if set, hear voice messages (voice.go); without them each is
	// named to the model as one Mother could not transcribe.
	Ears Ears
}

// Mother is the running core. Create with New, add adapters, Start.
type Mother struct {
	cfg *config.Config
	// roles caches platform role lookups and keeps refusals (roles.go).
	roles    roleBook
	store    *store.Store
	provider model.Provider
	logger   *slog.Logger
	clock    clock.Clock
	agent    *agent.Agent
	metrics  Metrics
	// canceller serves "stop all" (nil: no chicks).
	canceller ChickCanceller
	hostTools func() []prompt.HostTool
	// chickHostToolsFn lists the host tools for chick prompts.
	chickHostToolsFn func() []prompt.HostTool

	// ready is closed when Start has finished: runners wait for it, so
	// restart notices come before any answer.
	ready     chan struct{}
	readyOnce sync.Once

	// ctx ends at shutdown; runs derive from it.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	adapters map[string]chat.Adapter
	order    []string
	channels map[string]*channelState
	closing  bool
	// settled is broadcast (with mu held) when a channel's runner exits or a
	// chick's view ends: the moments Idle's condition can become true.
	settled *sync.Cond

	// work counts queued and running jobs, for Shutdown; trimmer counts
	// the same, to trim memory once idle (see idle.go).
	work    sync.WaitGroup
	trimmer *memtrim.Trimmer

	chicks     Hatchery
	chickViews map[string]*chickView
	// chicksEnded holds the chicks whose end was posted (late events of
	// theirs are dropped).
	chicksEnded map[string]bool
	// endedOrder is chicksEnded's keys, oldest first: only the newest
	// maxEndedViews are kept (a late event comes moments after the end,
	// never after a thousand more chicks).
	endedOrder []string

	idSeq atomic.Uint64

	// egress keeps the approvals of access requests (nil: none taken);
	// access holds the pending ones by chick and destination.
	egress   *egress.Policy
	ears     Ears
	accessMu sync.Mutex
	access   map[string]*accessRequest
	// spend says the broker's spend notices in order (spend.go).
	spend notices
	// posts paces what each chick makes her post (pace.go); reports
	// charges what her model reads of a chick to it (nil: nothing).
	posts   postPaces
	reports ReportMeter
	// crashHook, set only by tests, is asked at the crash points of the
	// message path (see crashed).
	crashHook func(point string) bool

	// disk watches the data directory's disk (nil: none). unstored holds
	// the messages whose logging was cut away after their run had begun;
	// diskTold the channels told, this disk episode, that their messages
	// cannot be stored (both guarded by mu; see disk.go).
	disk     *disk.Monitor
	unstored map[string]bool
	diskTold map[string]bool

	// recall searches the channels' history (nil: no recall tools).
	recall Recaller
}

// New builds Mother's core.
func New(opts Options) (*Mother, error) {
	if opts.Config == nil || opts.Store == nil || opts.Provider == nil {
		return nil, errors.New("mother: config, store and provider are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Metrics == nil {
		opts.Metrics = nopMetrics{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Mother{
		cfg:              opts.Config,
		store:            opts.Store,
		provider:         opts.Provider,
		logger:           opts.Logger.With("component", "mother"),
		clock:            opts.Clock,
		metrics:          opts.Metrics,
		ctx:              ctx,
		cancel:           cancel,
		adapters:         map[string]chat.Adapter{},
		channels:         map[string]*channelState{},
		chicks:           opts.Chicks,
		chickViews:       map[string]*chickView{},
		chicksEnded:      map[string]bool{},
		canceller:        opts.Canceller,
		hostTools:        opts.HostTools,
		chickHostToolsFn: opts.ChickHostTools,
		ready:            make(chan struct{}),
		egress:           opts.Egress,
		ears:             opts.Ears,
		access:           map[string]*accessRequest{},
		disk:             opts.Disk,
		reports:          opts.Reports,
		unstored:         map[string]bool{},
		diskTold:         map[string]bool{},
		recall:           opts.Recall,
	}
	m.settled = sync.NewCond(&m.mu)
	m.trimmer = memtrim.New(opts.Clock, trimDelay, m.logger)
	m.trimmer.ReleaseCodeAfter(codeReleaseDelay)
	if m.store != nil {
		m.trimmer.BeforeTrim(m.store.DropContextCaches)
	}
	if m.canceller == nil && opts.Chicks != nil {
		m.canceller = chickCanceller{m}
	}
	tools := append([]agent.Tool(nil), opts.Tools...)
	// Her own write and edit, confined to her files (files.go).
	tools = append(tools, m.fileTools()...)
	if opts.Chicks != nil {
		tools = append(tools, m.chickTools()...)
	}
	if opts.Recall != nil {
		tools = append(tools, m.recallTools()...)
	}
	tools = m.gateTools(tools)
	ag, err := agent.New(agent.Config{
		Provider:         opts.Provider,
		Model:            opts.Config.Model.ID,
		Think:            model.Think(opts.Config.Model.Think),
		Tools:            tools,
		Clock:            opts.Clock,
		ContextWindow:    opts.Config.Context.WindowTokens,
		ReserveTokens:    opts.Config.Context.ReserveTokens,
		KeepRecentTokens: opts.Config.Context.KeepRecentTokens,
	})
	if err != nil {
		cancel()
		return nil, err
	}
	m.agent = ag
	if m.disk != nil {
		m.disk.Watch(m.diskEvent)
	}
	return m, nil
}

// AddAdapter registers an adapter before Start.
func (m *Mother) AddAdapter(a chat.Adapter) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.adapters[a.Name()]; dup {
		return fmt.Errorf("adapter %q added twice", a.Name())
	}
	if err := store.ValidName(a.Name()); err != nil {
		return fmt.Errorf("adapter name: %w", err)
	}
	m.adapters[a.Name()] = a
	m.order = append(m.order, a.Name())
	return nil
}

// Adapter returns a registered adapter by name.
func (m *Mother) Adapter(name string) (chat.Adapter, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.adapters[name]
	return a, ok
}

// Start recovers the work a previous process left in flight (queueing
// what can be resumed), connects every adapter (which may deliver late
// messages), tells each channel that had work in flight that Mother
// restarted, and then lets the queues run. An adapter that fails to start
// is logged and the others go on; Start fails only if none starts.
func (m *Mother) Start(ctx context.Context) error {
	m.mu.Lock()
	names := append([]string(nil), m.order...)
	m.mu.Unlock()
	if len(names) == 0 {
		return errors.New("no adapters")
	}
	notices := m.recoverInflight()
	if m.crashed("recovered") {
		return nil
	}
	var errs []error
	started := map[string]bool{}
	for _, n := range names {
		a, _ := m.Adapter(n)
		if err := a.Start(ctx, m); err != nil {
			m.logger.Error("adapter failed to start", "adapter", n, "err", err)
			errs = append(errs, fmt.Errorf("adapter %s: %w", n, err))
			continue
		}
		started[n] = true
		m.logger.Info("adapter started", "adapter", n)
	}
	if len(errs) == len(names) {
		return errors.Join(errs...)
	}
	for _, n := range notices {
		if started[n.adapter.Name()] {
			m.post(ctx, n.adapter, n.channel, n.text)
		}
	}
	m.readyOnce.Do(func() { close(m.ready) })
	m.trimmer.Schedule() // start-up garbage and start-up code
	return nil
}

// Idle blocks until no job is queued or running and no chick is in flight
// (or ctx ends). The terminal mode calls it after stdin ends, to finish the
// work in flight.
func (m *Mother) Idle(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		// A chick's end may queue a job (Mother's answer to its result)
		// and a job may spawn a chick: wait until both are quiet at once.
		// The state is read under m.mu, not from the work WaitGroup: a
		// chick's end adds a job from its own goroutine, and a WaitGroup
		// must not go up from zero while someone waits on it.
		m.mu.Lock()
		for len(m.chickViews) > 0 || m.anyJobLocked() {
			// Woken when a runner exits or a chick view ends. A view
			// ends only after its job (if any) is queued, so there is
			// no gap between the two.
			m.settled.Wait()
		}
		m.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Healthy checks that the core is not stuck: its lock can be taken and the
// store answers, within ctx. The systemd watchdog pings only while it holds.
func (m *Mother) Healthy(ctx context.Context) error {
	got := make(chan struct{})
	go func() {
		m.mu.Lock()
		//lint:ignore SA2001 taking the lock is the check
		m.mu.Unlock()
		close(got)
	}()
	select {
	case <-got:
	case <-ctx.Done():
		return errors.New("core lock not available: a goroutine is stuck holding it")
	}
	if _, err := m.store.ListChannels(); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// Shutdown stops taking work, aborts runs in flight, waits for them (until
// ctx ends) and stops the adapters.
func (m *Mother) Shutdown(ctx context.Context) error {
	m.mu.Lock()
	m.closing = true
	names := append([]string(nil), m.order...)
	m.mu.Unlock()
	m.cancel()
	m.stopAccess()
	werr := m.idleJobs(ctx)
	m.closeNotices(ctx)
	var errs []error
	for _, n := range names {
		a, _ := m.Adapter(n)
		if err := a.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop adapter %s: %w", n, err))
		}
	}
	if werr != nil {
		errs = append(errs, fmt.Errorf("runs still in flight: %w", werr))
	}
	return errors.Join(errs...)
}

// newID returns a message id unique within this process and across
// restarts: the clock in nanoseconds plus a sequence number.
func (m *Mother) newID() string {
	return strconv.FormatInt(m.now().UnixNano(), 10) + "." + strconv.FormatUint(m.idSeq.Add(1), 10)
}

// crashed reports whether a test abandons this Mother at point, as if the
// process died there: the caller returns at once and does nothing more.
// Without a test's hook it is always false.
func (m *Mother) crashed(point string) bool {
	return m.crashHook != nil && m.crashHook(point)
}

// NewMessageID returns a fresh id for a message Mother creates.
func (m *Mother) NewMessageID() string { return m.newID() }

// now is the time on Mother's clock.
func (m *Mother) now() time.Time { return m.clock.Now() }

func (m *Mother) anyJobLocked() bool {
	for _, cs := range m.channels {
		if cs.running || len(cs.pending) > 0 {
			return true
		}
	}
	return false
}

// idleJobs waits for the queued and running jobs only: Shutdown leaves
// chicks running (they reconnect to the next Mother).
func (m *Mother) idleJobs(ctx context.Context) error {
	done := make(chan struct{})
	go func() { m.work.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
