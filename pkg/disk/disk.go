// Package disk watches whether Mother can write her data directory. A write
// or fsync that fails there because the filesystem is full (ENOSPC,
// EDQUOT) or because the disk fails (EIO, EROFS, ...) starts a condition,
// full or failing; while it lasts Mother refuses what she could not keep
// (messages are not acknowledged to their platform, chicks are not
// spawned) and /healthz says degraded. A probe, a small write and fsync of
// a file of its own in the data directory, runs every ProbeEvery while the
// condition lasts and ends it when it succeeds; then messages are taken
// again.
//
// Watchers (Watch) hear episodes, not failures: one Started when a
// condition starts (whatever number of writes fail meanwhile), one Cleared
// once the disk has been fine for Settle after the probe first succeeded,
// so a disk that fails again moments after a probe succeeded is one
// episode for the people told, not many.
package disk

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/fsync"
)

// Condition is the state of the data directory's disk.
type Condition string

// The conditions.
const (
	OK      Condition = "ok"
	Full    Condition = "full"
	Failing Condition = "failing"
)

// Defaults.
const (
	// ProbeEvery is how often the probe runs while a condition lasts.
	ProbeEvery = 5 * time.Second
	// Settle is how long the disk must stay fine after the probe first
	// succeeds before watchers hear it cleared.
	Settle = 10 * time.Second
	// ProbeSize is what the probe writes: more than a message needs, so
	// a probe that succeeds leaves room for what was refused.
	ProbeSize = 64 << 10
	// probeName is the probe's file in the data directory.
	probeName = ".disk-probe"
)

// Status is the disk's state now.
type Status struct {
	Condition Condition `json:"condition"`
	// Reason is the failure that started the condition (Path's), and
	// Probe the last probe's failure ("" before the first).
	Reason string    `json:"reason,omitempty"`
	Path   string    `json:"path,omitempty"`
	Probe  string    `json:"probe,omitempty"`
	Since  time.Time `json:"since,omitzero"`
}

// Err is "disk full: …" or "disk error: …" while a condition lasts, nil
// when the disk is fine.
func (s Status) Err() error {
	switch s.Condition {
	case Full:
		return fmt.Errorf("disk full: %s", s.Reason)
	case Failing:
		return fmt.Errorf("disk error: %s", s.Reason)
	}
	return nil
}

// EventKind says what an Event is.
type EventKind string

// The events watchers hear.
const (
	Started EventKind = "started" // a condition started
	Changed EventKind = "changed" // full became failing, or the reverse
	Cleared EventKind = "cleared" // the disk has been fine for Settle
)

// Event is an episode's start, change or end.
type Event struct {
	Kind EventKind
	// Status is the condition (for Cleared: the one that ended).
	Status Status
	// Lasted is how long the episode lasted, from its first failure to
	// the probe that ended it (Cleared only).
	Lasted time.Duration
}

// Message is the one line a person is told for e: "disk full: …",
// "disk error: …", "disk ok again: …".
func (e Event) Message(dataDir string) string {
	switch e.Kind {
	case Cleared:
		return fmt.Sprintf("disk ok again: I can write %s again (the trouble lasted %s). Messages I could not store are being taken now, and chicks start again.", dataDir, e.Lasted.Round(time.Second))
	}
	what := "disk full"
	if e.Status.Condition == Failing {
		what = "disk error"
	}
	return fmt.Sprintf("%s: I cannot write %s (%s). Until I can, I take no messages (they stay unacknowledged on their platform and come back to me once I can) and start no chicks. I try again every %s.", what, dataDir, e.Status.Reason, ProbeEvery)
}

// Options tune a Monitor.
type Options struct {
	Logger *slog.Logger
	// Clock runs the probes (default clock.Real).
	Clock clock.Clock
	// ProbeEvery and Settle override the defaults (tests).
	ProbeEvery, Settle time.Duration
}

// Monitor watches one data directory.
type Monitor struct {
	dir        string
	logger     *slog.Logger
	clock      clock.Clock
	probeEvery time.Duration
	settle     time.Duration

	mu sync.Mutex
	st Status
	// ok is closed while the disk is fine; a fresh one is made when a
	// condition starts.
	ok chan struct{}
	// episode: watchers were told of a start and not yet of its end.
	episode      bool
	episodeSince time.Time
	told         Condition
	// settling is the pending Cleared, once the probe has succeeded.
	settling clock.Timer
	probe    clock.Timer
	closed   bool
	watchers []func(Event)
	// pending are the events not yet given to the watchers, in order,
	// off the callers' goroutines; they wait for the first watcher (a
	// condition found before Mother is built is told once she is).
	// wake is signalled when one is added, or a watcher.
	pending []Event
	wake    *sync.Cond
}

// New returns a Monitor of dir, the data directory. Call Close when done.
func New(dir string, opts Options) *Monitor {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ProbeEvery <= 0 {
		opts.ProbeEvery = ProbeEvery
	}
	if opts.Settle <= 0 {
		opts.Settle = Settle
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	m := &Monitor{
		dir: abs, logger: opts.Logger.With("component", "disk"), clock: clock.OrReal(opts.Clock),
		probeEvery: opts.ProbeEvery, settle: opts.Settle,
		st: Status{Condition: OK}, ok: make(chan struct{}),
	}
	m.wake = sync.NewCond(&m.mu)
	close(m.ok)
	go m.deliver()
	return m
}

// Dir is the data directory watched.
func (m *Monitor) Dir() string { return m.dir }

// Classify tells a write's failure of the disk from others: Full for a
// filesystem or quota that is full, Failing for an I/O error or a
// filesystem gone read-only, OK for anything else (a missing file, a
// permission: not the disk's doing).
func Classify(err error) Condition {
	switch {
	case err == nil:
		return OK
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return Full
	case errors.Is(err, syscall.EIO), errors.Is(err, syscall.EROFS), errors.Is(err, syscall.EUCLEAN),
		errors.Is(err, syscall.ENXIO), errors.Is(err, syscall.ENODEV), errors.Is(err, syscall.EBADMSG):
		return Failing
	}
	return OK
}

// Report tells the monitor that writing or syncing path failed with err
// (the fsync package's failure hook: fsync.OnFailure(m.Report)). Failures outside the data
// directory and failures that are not the disk's (Classify) are ignored.
func (m *Monitor) Report(path string, err error) {
	c := Classify(err)
	if c == OK || (path != "" && !within(path, m.dir)) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	now := m.clock.Now()
	if m.st.Condition == OK {
		m.st = Status{Condition: c, Reason: err.Error(), Path: path, Since: now}
		m.ok = make(chan struct{})
		m.logger.Warn("writes to the data directory fail; refusing what cannot be stored until a probe succeeds", "condition", c, "path", path, "err", err)
		m.armProbeLocked()
	} else if c == Failing && m.st.Condition == Full {
		// An I/O error is the worse news.
		m.st.Condition, m.st.Reason, m.st.Path = c, err.Error(), path
	}
	if m.settling != nil {
		// Failing again before the end was told: the same episode.
		m.settling.Stop()
		m.settling = nil
		m.logger.Warn("the disk failed again soon after a probe succeeded; the trouble goes on", "err", err)
	}
	switch {
	case !m.episode:
		m.episode, m.episodeSince, m.told = true, now, m.st.Condition
		ev := Event{Kind: Started, Status: m.st}
		m.logger.Error(ev.Status.Err().Error(), "path", m.st.Path, "data", m.dir)
		m.emitLocked(ev)
	case m.told != m.st.Condition:
		m.told = m.st.Condition
		ev := Event{Kind: Changed, Status: m.st}
		m.logger.Error(ev.Status.Err().Error(), "path", m.st.Path, "data", m.dir)
		m.emitLocked(ev)
	}
}

// Status is the disk's state now.
func (m *Monitor) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st
}

// Err is Status().Err(): nil while the disk is fine.
func (m *Monitor) Err() error { return m.Status().Err() }

// Ready is closed while the disk is fine, and once it is again: what an
// adapter waits on before delivering a message Mother could not store.
func (m *Monitor) Ready() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ok
}

// Watch makes fn hear every Event, in order, on a goroutine of the
// monitor's (fn may block for a while: the events wait). Events from
// before the first watcher wait for it.
func (m *Monitor) Watch(fn func(Event)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.watchers = append(m.watchers, fn)
	m.wake.Broadcast()
}

// maxPending bounds the events waiting for watchers: beyond it the oldest
// goes (watchers that are stuck, or none ever set).
const maxPending = 16

func (m *Monitor) emitLocked(ev Event) {
	if len(m.pending) == maxPending {
		m.logger.Warn("disk event dropped: its watchers are stuck", "event", m.pending[0].Kind)
		m.pending = m.pending[1:]
	}
	m.pending = append(m.pending, ev)
	m.wake.Broadcast()
}

func (m *Monitor) deliver() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		for !m.closed && (len(m.pending) == 0 || len(m.watchers) == 0) {
			m.wake.Wait()
		}
		if m.closed {
			return
		}
		ev := m.pending[0]
		m.pending = m.pending[1:]
		ws := append([]func(Event){}, m.watchers...)
		m.mu.Unlock()
		for _, fn := range ws {
			fn(ev)
		}
		m.mu.Lock()
	}
}

// armProbeLocked schedules the next probe. Caller holds mu.
func (m *Monitor) armProbeLocked() {
	if m.probe != nil || m.closed {
		return
	}
	m.probe = m.clock.AfterFunc(m.probeEvery, m.runProbe)
}

func (m *Monitor) runProbe() {
	m.mu.Lock()
	m.probe = nil
	m.mu.Unlock()
	err := m.Probe()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	if err != nil {
		m.st.Probe = err.Error()
		if m.st.Condition == OK {
			// A failure while the disk seemed fine: the probe's own
			// failure starts a condition (a Report, without the lock).
			m.mu.Unlock()
			m.Report(filepath.Join(m.dir, probeName), err)
			m.mu.Lock()
		}
		m.armProbeLocked()
		return
	}
	if m.st.Condition != OK {
		lasted := clock.Since(m.clock, m.st.Since).Round(time.Millisecond)
		m.logger.Info("the data directory can be written again; taking messages again", "was", m.st.Condition, "for", lasted)
		ended := m.st
		m.st = Status{Condition: OK}
		close(m.ok)
		if m.episode && m.settling == nil {
			lasted := m.clock.Now().Sub(m.episodeSince)
			m.settling = m.clock.AfterFunc(m.settle, func() { m.settled(ended, lasted) })
		}
	}
}

// settled tells watchers the episode is over, the disk having been fine
// for Settle.
func (m *Monitor) settled(ended Status, lasted time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.settling = nil
	if m.closed || !m.episode || m.st.Condition != OK {
		return
	}
	m.episode = false
	ev := Event{Kind: Cleared, Status: ended, Lasted: lasted}
	m.logger.Warn(ev.Message(m.dir), "was", ended.Condition)
	m.emitLocked(ev)
}

// Probe writes ProbeSize bytes to a file of its own in the data
// directory, fsyncs it and removes it: nil if the disk takes a write now.
func (m *Monitor) Probe() error {
	path := filepath.Join(m.dir, probeName)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	_, werr := f.Write(make([]byte, ProbeSize))
	if werr == nil {
		werr = fsync.File(f, fsync.KindOther)
	}
	cerr := f.Close()
	rerr := os.Remove(path)
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	if rerr != nil {
		return fmt.Errorf("probe: %w", rerr)
	}
	return nil
}

// Close stops the probes and the watchers' goroutine.
func (m *Monitor) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.closed = true
	if m.probe != nil {
		m.probe.Stop()
	}
	if m.settling != nil {
		m.settling.Stop()
	}
	m.wake.Broadcast()
}

func within(path, dir string) bool {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}
