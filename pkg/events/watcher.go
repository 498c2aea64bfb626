package events

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/fsync"
)

// Options configure a Watcher.
type Options struct {
	// Dir is workspace/events.
	Dir string
	// StateDir holds the accepted markers and removed files (Mother uses
	// <data>/state/events, outside the workspace).
	StateDir string
	// Resolve maps channelId to an adapter and channel (required).
	Resolve Resolver
	Clock   clock.Clock
	Logger  *slog.Logger
	// Grace: a one-shot whose time passed less than this ago still runs
	// (late); older ones are moved to <state>/expired/. Default 10m.
	Grace time.Duration
	// Debounce is the quiet time after a file change before it is read.
	// Default 100ms.
	Debounce time.Duration
	// Retries are the waits before re-reading a file that did not parse.
	// Default 100ms, 200ms, 400ms.
	Retries []time.Duration
	// Metrics hears fired events (nil: nothing is counted).
	Metrics Metrics
	// MaxWait caps one timer wait, so a wall-clock jump (NTP setting the
	// clock after boot) is noticed within it. Default 1m.
	MaxWait time.Duration
}

// Metrics hears what the watcher can count; pkg/metrics implements it.
type Metrics interface {
	// EventFired: an occurrence of an event was accepted to run.
	EventFired(t Type, late bool)
}

type nopMetrics struct{}

func (nopMetrics) EventFired(Type, bool) {}

// Watcher watches the events directory and fires events. Create with New,
// then Start.
type Watcher struct {
	o      Options
	logger *slog.Logger

	mu       sync.Mutex
	sink     Sink
	ctx      context.Context
	started  time.Time
	stopped  bool
	watch    fileWatch // the open watch (nil close until Start)
	loopDone chan struct{}
	entries  map[string]*entry
	debounce map[string]clock.Timer
	pending  map[string][]*firing // per qualified channel, oldest first
	seq      int

	// openWatch starts watching a directory (fsnotify); a test replaces
	// it to feed the loop events and errors of its own.
	openWatch func(dir string) (fileWatch, error)
}

// fileWatch is what the watcher reads from a directory watch: its events,
// its errors (such as fsnotify's queue overflow) and how to end it.
type fileWatch struct {
	events <-chan fsnotify.Event
	errors <-chan error
	close  func() error
}

// watchDir watches dir with fsnotify.
func watchDir(dir string) (fileWatch, error) {
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return fileWatch{}, err
	}
	if err := fsw.Add(dir); err != nil {
		fsw.Close()
		return fileWatch{}, err
	}
	return fileWatch{events: fsw.Events, errors: fsw.Errors, close: fsw.Close}, nil
}

type entry struct {
	name     string
	raw      []byte
	spec     *Spec // nil while the file does not parse
	version  int
	next     time.Time
	timer    clock.Timer
	retry    clock.Timer
	attempts int
	err      error
	out      *firing // the occurrence pending, queued or running
	// health is a periodic event's failures in a row and pause (pause.go).
	health *health
}

type firing struct {
	Firing
	version   int
	detached  bool
	submitted bool
	waitNoted bool
}

// Marker and removal directories under StateDir.
const (
	acceptedDir = "accepted"
	rejectedDir = "rejected"
	expiredDir  = "expired"
)

// New checks opts and creates the state directories.
func New(opts Options) (*Watcher, error) {
	if opts.Dir == "" || opts.StateDir == "" || opts.Resolve == nil {
		return nil, errors.New("events: Dir, StateDir and Resolve are required")
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Grace <= 0 {
		opts.Grace = 10 * time.Minute
	}
	if opts.Debounce <= 0 {
		opts.Debounce = 100 * time.Millisecond
	}
	if opts.Retries == nil {
		opts.Retries = []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = time.Minute
	}
	if opts.Metrics == nil {
		opts.Metrics = nopMetrics{}
	}
	for _, d := range []string{opts.Dir, filepath.Join(opts.StateDir, acceptedDir), filepath.Join(opts.StateDir, rejectedDir), filepath.Join(opts.StateDir, expiredDir), filepath.Join(opts.StateDir, healthDir)} {
		if err := fsync.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("events: create %s: %w", d, err)
		}
	}
	return &Watcher{
		o:         opts,
		logger:    opts.Logger.With("component", "events"),
		entries:   map[string]*entry{},
		debounce:  map[string]clock.Timer{},
		pending:   map[string][]*firing{},
		openWatch: watchDir,
	}, nil
}

// Dir is the watched directory.
func (w *Watcher) Dir() string { return w.o.Dir }

// Resolve resolves a channelId with the watcher's resolver.
func (w *Watcher) Resolve(channelID string) (string, string, error) { return w.o.Resolve(channelID) }

// Now is the watcher's clock.
func (w *Watcher) Now() time.Time { return w.o.Clock.Now() }

// Start records the start time, begins watching, and reads the files
// present (applying the startup rules: stale immediate events, missed
// one-shots, accepted-but-unfinished runs). Fired events go to sink.
func (w *Watcher) Start(ctx context.Context, sink Sink) error {
	if sink == nil {
		return errors.New("events: no sink")
	}
	fw, err := w.openWatch(w.o.Dir)
	if err != nil {
		return fmt.Errorf("events: watch %s: %w", w.o.Dir, err)
	}
	w.mu.Lock()
	if w.sink != nil {
		w.mu.Unlock()
		fw.close()
		return errors.New("events: already started")
	}
	w.sink, w.ctx, w.watch = sink, context.WithoutCancel(ctx), fw
	w.started = w.o.Clock.Now()
	w.loopDone = make(chan struct{})
	w.mu.Unlock()
	go w.loop(fw.events, fw.errors)

	names, err := w.listFiles()
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.logger.Info("events watcher started", "dir", w.o.Dir, "files", len(names))
	for _, n := range names {
		w.load(n, true)
	}
	// Markers whose file is gone: the run finished and the file was deleted,
	// but the crash came before the marker went.
	marks, _ := os.ReadDir(filepath.Join(w.o.StateDir, acceptedDir))
	for _, m := range marks {
		if _, ok := w.entries[m.Name()]; !ok {
			w.logger.Info("removing accepted marker of an event file that is gone", "file", m.Name())
			w.removeMarker(m.Name())
		}
	}
	return nil
}

// Stop stops watching and cancels every timer. Runs already handed to the
// sink are not affected; their completion is still recorded.
func (w *Watcher) Stop() {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	w.stopped = true
	for _, e := range w.entries {
		stopTimer(&e.timer)
		stopTimer(&e.retry)
	}
	for n, t := range w.debounce {
		t.Stop()
		delete(w.debounce, n)
	}
	closeWatch, done := w.watch.close, w.loopDone
	w.mu.Unlock()
	if closeWatch != nil {
		closeWatch()
		<-done
	}
}

func stopTimer(t *clock.Timer) {
	if *t != nil {
		(*t).Stop()
		*t = nil
	}
}

func (w *Watcher) listFiles() ([]string, error) {
	des, err := os.ReadDir(w.o.Dir)
	if err != nil {
		return nil, fmt.Errorf("events: list %s: %w", w.o.Dir, err)
	}
	var names []string
	for _, d := range des {
		if !d.IsDir() && isEventFile(d.Name()) {
			names = append(names, d.Name())
		}
	}
	return names, nil
}

// isEventFile: "*.json", not hidden (editors' and WriteFileAtomic's temp
// files start with a dot).
func isEventFile(name string) bool {
	return strings.HasSuffix(name, ".json") && !strings.HasPrefix(name, ".") && len(name) > len(".json")
}

// loop reads the watch until it is closed. An error (fsnotify's queue
// overflowed, or the watch failed) means changes may have been lost:
// every file is looked at again.
func (w *Watcher) loop(events <-chan fsnotify.Event, errs <-chan error) {
	defer close(w.loopDone)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return
			}
			if name := filepath.Base(ev.Name); isEventFile(name) {
				w.touch(name)
			}
		case err, ok := <-errs:
			if !ok {
				return
			}
			w.logger.Warn("file watch error; rescanning the events directory", "err", err)
			w.rescan()
		}
	}
}

// touch (re)starts a file's debounce timer.
func (w *Watcher) touch(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	if t := w.debounce[name]; t != nil {
		t.Stop()
	}
	w.debounce[name] = w.o.Clock.AfterFunc(w.o.Debounce, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.debounce, name)
		if w.stopped {
			return
		}
		w.reload(name)
	})
}

func (w *Watcher) rescan() {
	names, err := w.listFiles()
	if err != nil {
		w.logger.Error("rescan failed", "err", err)
		return
	}
	w.mu.Lock()
	for n := range w.entries {
		names = append(names, n)
	}
	w.mu.Unlock()
	for _, n := range names {
		w.touch(n)
	}
}

// Reload reads one file now, without waiting for the debounce (Mother's
// tools call it right after writing or removing a file). It returns the
// parse error, if any.
func (w *Watcher) Reload(name string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t := w.debounce[name]; t != nil {
		t.Stop()
		delete(w.debounce, name)
	}
	w.reload(name)
	if e := w.entries[name]; e != nil && e.spec == nil {
		return e.err
	}
	return nil
}

// reload is a fresh read after a change: the retry count starts over,
// unless the file still holds exactly what the pending retry already failed
// to parse (a late notification of a write the retries have seen).
func (w *Watcher) reload(name string) {
	if e := w.entries[name]; e != nil {
		if e.spec == nil && e.retry != nil {
			if data, err := os.ReadFile(filepath.Join(w.o.Dir, name)); err == nil && bytes.Equal(data, e.raw) {
				return
			}
		}
		e.attempts = 0
		stopTimer(&e.retry)
	}
	w.load(name, false)
}

// load reads, parses and (re)arms one file. Caller holds w.mu.
func (w *Watcher) load(name string, startup bool) {
	lg := w.logger.With("file", name)
	path := filepath.Join(w.o.Dir, name)
	data, err := os.ReadFile(path)
	var mtime time.Time
	if err == nil {
		if fi, serr := os.Stat(path); serr == nil {
			mtime = fi.ModTime()
		}
	}
	if errors.Is(err, os.ErrNotExist) {
		w.remove(name, "file deleted")
		return
	}
	e := w.entries[name]
	if err == nil && e != nil && e.spec != nil && bytes.Equal(e.raw, data) {
		return // unchanged (a touch, or our own write seen again)
	}
	var spec *Spec
	if err == nil {
		spec, err = Parse(data, w.o.Resolve)
	}
	if err != nil {
		if e == nil {
			e = &entry{name: name}
			w.entries[name] = e
		}
		e.err = err
		e.raw = data // what failed to parse (nil if unreadable)
		stopTimer(&e.retry)
		if e.attempts < len(w.o.Retries) {
			d := w.o.Retries[e.attempts]
			e.attempts++
			lg.Debug("event file does not parse yet; retrying", "attempt", e.attempts, "in", d, "err", err)
			e.retry = w.o.Clock.AfterFunc(d, func() {
				w.mu.Lock()
				defer w.mu.Unlock()
				if cur := w.entries[name]; cur == e && !w.stopped {
					e.retry = nil
					w.load(name, startup)
				}
			})
			return
		}
		w.dropEntry(e)
		dst, merr := w.moveAside(name, rejectedDir)
		if merr != nil {
			lg.Error("event file does not parse and cannot be moved aside", "err", err, "move_err", merr)
			return
		}
		lg.Error("event file does not parse after retries; moved aside", "err", err, "moved_to", dst)
		return
	}
	if e != nil {
		w.dropEntry(e)
	}
	w.seq++
	e = &entry{name: name, raw: data, spec: spec, version: w.seq}
	if spec.Type == Periodic {
		// Its failures and pause, unless the file changed since.
		e.health = w.readHealth(name, data)
	} else {
		w.removeHealth(name)
	}
	w.entries[name] = e
	lg.Info("event loaded", "type", spec.Type, "channel", spec.Qualified())
	w.arm(e, startup, mtime)
}

// arm applies the rules for a freshly loaded event. Caller holds w.mu.
func (w *Watcher) arm(e *entry, startup bool, mtime time.Time) {
	now := w.o.Clock.Now()
	s := e.spec
	lg := w.logger.With("file", e.name)
	if startup {
		if due, ok := w.readMarker(e.name); ok {
			lg.Info("event was accepted before a restart but its run did not finish; running it again")
			if due.IsZero() {
				due = now
			}
			w.fire(e, due, true, fmt.Sprintf("Mother restarted before this event's run finished; it was due at %s and runs again now", fmtTime(due)), true)
			if s.Type == Periodic {
				w.schedule(e, s.Next(now))
			}
			return
		}
	}
	switch s.Type {
	case Immediate:
		if startup && !mtime.IsZero() && mtime.Before(w.started) {
			w.expire(e, "stale immediate event: the file was written while Mother was not running")
			return
		}
		w.fire(e, now, false, "", false)
	case OneShot:
		switch late := now.Sub(s.at); {
		case late < 0:
			w.schedule(e, s.at)
		case late <= w.o.Grace:
			note := ""
			if late >= time.Second {
				note = fmt.Sprintf("this event was due at %s and runs %s late", fmtTime(s.at), roundLate(late))
				if startup {
					note = fmt.Sprintf("this event was due at %s while Mother was not running; it runs %s late", fmtTime(s.at), roundLate(late))
				}
			}
			w.fire(e, s.at, note != "", note, false)
		default:
			w.expire(e, fmt.Sprintf("one-shot event missed: it was due at %s, more than %s ago", fmtTime(s.at), w.o.Grace))
		}
	case Periodic:
		// No catch-up: the next occurrence after now.
		w.schedule(e, s.Next(now))
	}
}

func roundLate(d time.Duration) time.Duration {
	if d > time.Minute {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

func fmtTime(t time.Time) string { return t.Format(time.RFC3339) }

// schedule sets the entry's timer for at.
func (w *Watcher) schedule(e *entry, at time.Time) {
	stopTimer(&e.timer)
	e.next = at
	if at.IsZero() {
		w.logger.Warn("periodic event never fires again", "file", e.name)
		return
	}
	w.armTimer(e)
}

func (w *Watcher) armTimer(e *entry) {
	if w.stopped {
		return
	}
	d := min(e.next.Sub(w.o.Clock.Now()), w.o.MaxWait)
	version := e.version
	e.timer = w.o.Clock.AfterFunc(d, func() { w.wake(e.name, version) })
}

// wake runs when an entry's timer expires.
func (w *Watcher) wake(name string, version int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.entries[name]
	if w.stopped || e == nil || e.version != version || e.spec == nil || e.next.IsZero() {
		return
	}
	e.timer = nil
	now := w.o.Clock.Now()
	if now.Before(e.next) {
		w.armTimer(e) // a capped wait, or the wall clock moved back
		return
	}
	due := e.next
	e.next = time.Time{}
	if w.pausedNow(e, now) {
		w.logger.Info("periodic event is paused; this occurrence does not run", "file", e.name, "due", due, "why", e.health.Reason)
		w.schedule(e, e.spec.Next(now))
		return
	}
	note := ""
	if late := now.Sub(due); late > time.Minute {
		note = fmt.Sprintf("this event was due at %s and runs %s late", fmtTime(due), roundLate(late))
	}
	w.fire(e, due, note != "", note, false)
	if e.spec.Type == Periodic {
		w.schedule(e, e.spec.Next(now))
	}
}

// fire accepts one occurrence: marker first, then the channel's pending
// list. resumed: its marker was left by a run before a restart
// (Firing.Resumed). Caller holds w.mu.
func (w *Watcher) fire(e *entry, due time.Time, late bool, note string, resumed bool) {
	s := e.spec
	lg := w.logger.With("file", e.name, "channel", s.Qualified())
	if e.out != nil {
		lg.Info("previous occurrence of this event has not finished; skipping this one", "due", due)
		return
	}
	f := &firing{Firing: Firing{
		File: e.name, Type: s.Type, Schedule: s.ScheduleLabel(),
		Adapter: s.Adapter, ChannelID: s.Channel, Text: s.Text,
		Due: due, Late: late, Note: note, MaySchedule: s.MaySchedule, By: s.By, Resumed: resumed,
	}, version: e.version}
	if e.health != nil {
		f.Failures = e.health.Failures
	}
	f.cancelled = func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return f.detached
	}
	if err := w.writeMarker(e.name, due); err != nil {
		lg.Error("cannot record the accepted event; a crash before its run ends would lose it", "err", err)
	}
	e.out = f
	q := s.Qualified()
	w.pending[q] = append(w.pending[q], f)
	lg.Info("event fired", "type", s.Type, "due", due, "late", late)
	w.o.Metrics.EventFired(s.Type, late)
	w.pump(q)
}

// pump hands pending occurrences of a channel to the sink until it is
// full. Caller holds w.mu.
func (w *Watcher) pump(q string) {
	if w.sink == nil || w.stopped {
		return
	}
	for len(w.pending[q]) > 0 {
		f := w.pending[q][0]
		if f.detached {
			w.pending[q] = w.pending[q][1:]
			continue
		}
		err := w.sink.Submit(w.ctx, f.Firing, func(r Result) { w.finished(f, r) })
		if errors.Is(err, ErrChannelFull) {
			if !f.waitNoted {
				f.waitNoted = true
				w.logger.Info("channel's event queue is full; event kept until a slot frees", "file", f.File, "channel", q, "waiting", len(w.pending[q]))
			}
			return
		}
		w.pending[q] = w.pending[q][1:]
		if err != nil {
			// Mother is closing (or the channel is gone): the marker stays,
			// so the event runs again at the next start.
			w.logger.Warn("cannot queue event; it runs again at the next start", "file", f.File, "channel", q, "err", err)
			f.detached = true
			if e := w.entries[f.File]; e != nil && e.out == f {
				e.out = nil
			}
			continue
		}
		f.submitted = true
	}
	if len(w.pending[q]) == 0 {
		delete(w.pending, q)
	}
}

// finished records the end of a submitted run.
func (w *Watcher) finished(f *firing, r Result) {
	w.mu.Lock()
	defer w.mu.Unlock()
	lg := w.logger.With("file", f.File, "channel", f.Adapter+"/"+f.ChannelID)
	e := w.entries[f.File]
	if e != nil && e.out == f {
		e.out = nil
	}
	q := f.Adapter + "/" + f.ChannelID
	switch {
	case f.detached:
		lg.Debug("run of a changed or deleted event ended")
	case !r.Finished:
		lg.Info("event run interrupted by shutdown; it runs again at the next start")
		return
	default:
		if f.Type == Periodic && e != nil && e.version == f.version {
			w.noteResult(e, r)
		}
		if f.Type != Periodic && e != nil && e.version == f.version {
			w.dropEntry(e)
			delete(w.entries, f.File)
			if err := os.Remove(filepath.Join(w.o.Dir, f.File)); err != nil && !errors.Is(err, os.ErrNotExist) {
				lg.Error("cannot delete finished event file", "err", err)
			}
		}
		w.removeMarker(f.File)
		lg.Info("event run finished")
	}
	w.pump(q)
}

// remove forgets a file's entry (the file was deleted). Caller holds w.mu.
func (w *Watcher) remove(name, why string) {
	e := w.entries[name]
	if e == nil {
		return
	}
	w.dropEntry(e)
	delete(w.entries, name)
	w.removeHealth(name)
	w.logger.Info("event cancelled", "file", name, "why", why)
}

// dropEntry stops an entry's timers and detaches its outstanding
// occurrence (a queued run is skipped, a pending one dropped, its marker
// removed). Caller holds w.mu.
func (w *Watcher) dropEntry(e *entry) {
	stopTimer(&e.timer)
	stopTimer(&e.retry)
	e.next = time.Time{}
	if f := e.out; f != nil {
		f.detached = true
		e.out = nil
		w.removeMarker(e.name)
	}
}

// expire moves an event that will not run aside. Caller holds w.mu.
func (w *Watcher) expire(e *entry, why string) {
	w.dropEntry(e)
	delete(w.entries, e.name)
	dst, err := w.moveAside(e.name, expiredDir)
	if err != nil {
		w.logger.Error("event will not run and cannot be moved aside", "file", e.name, "why", why, "err", err)
		return
	}
	w.logger.Warn("event will not run; moved aside", "file", e.name, "why", why, "moved_to", dst)
}
