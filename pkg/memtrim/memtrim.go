// Package memtrim hands memory back to the operating system once a process
// has been idle for a while: freed heap (debug.FreeOSMemory) and, on Linux,
// the mapped code pages of its own binary (see releaseCode).
package memtrim

import (
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
)

// Trimmer counts work in flight and trims once none has been in flight for
// its delay. Its methods are safe for concurrent use.
type Trimmer struct {
	clock  clock.Clock
	delay  time.Duration
	logger *slog.Logger
	active atomic.Int64

	mu     sync.Mutex
	timer  clock.Timer
	before []func()
	// codeDelay, when set, releases the binary's code pages after that
	// much quiet, ahead of the full trim (ReleaseCodeAfter); codeTimer is
	// its armed timer.
	codeDelay time.Duration
	codeTimer clock.Timer
	// touched is when Touch was last called (UnixNano; 0: never).
	touched atomic.Int64
}

// Touch records work that is not counted by Begin and End (a chick's
// event relayed): the code release waits for its delay of quiet after
// the last touch too. It costs one clock read and one atomic store.
func (t *Trimmer) Touch() { t.touched.Store(t.clock.Now().UnixNano()) }

// release is releaseCode (tests count its calls).
var release = releaseCode

// ReleaseCodeAfter has the binary's code pages (see releaseCode) released
// once d of quiet has passed, sooner than the rest of the trim: what a
// burst of work mapped of the binary (most of the RSS after one, with the
// kernel's 64 KB fault-around) goes back to the page cache before the
// heap is collected and handed back. The next work maps again what it
// runs, as after every trim. Call it before the first Begin or Schedule;
// d at or past the trim's own delay does nothing.
func (t *Trimmer) ReleaseCodeAfter(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d > 0 && d < t.delay {
		t.codeDelay = d
	}
}

// BeforeTrim adds fn to what runs at each trim, before the freed memory is
// handed back: dropping caches that are worth keeping only while busy.
// Call it before the first Begin or Schedule.
func (t *Trimmer) BeforeTrim(fn func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.before = append(t.before, fn)
}

// New returns a trimmer that trims after delay of quiet on c.
func New(c clock.Clock, delay time.Duration, logger *slog.Logger) *Trimmer {
	return &Trimmer{clock: c, delay: delay, logger: logger}
}

// Begin counts one piece of work in flight.
func (t *Trimmer) Begin() { t.active.Add(1) }

// End marks one piece of work finished; when none is left in flight, a trim
// is scheduled.
func (t *Trimmer) End() {
	if t.active.Add(-1) == 0 {
		t.Schedule()
	}
}

// Schedule arms (or re-arms) the trim for delay from now.
func (t *Trimmer) Schedule() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer != nil {
		t.timer.Stop()
	}
	t.timer = t.clock.AfterFunc(t.delay, t.trimIfIdle)
	if t.codeDelay > 0 {
		if t.codeTimer != nil {
			t.codeTimer.Stop()
		}
		t.codeTimer = t.clock.AfterFunc(t.codeDelay, t.releaseCodeIfIdle)
	}
}

// releaseCodeIfIdle unmaps the binary's code pages when nothing is in
// flight.
func (t *Trimmer) releaseCodeIfIdle() {
	if t.active.Load() != 0 {
		return
	}
	if last := t.touched.Load(); last != 0 {
		if wait := t.codeDelay - t.clock.Now().Sub(time.Unix(0, last)); wait > 0 {
			t.mu.Lock()
			t.codeTimer = t.clock.AfterFunc(wait, t.releaseCodeIfIdle)
			t.mu.Unlock()
			return
		}
	}
	if err := release(); err != nil {
		t.logger.Debug("code pages not released", "err", err)
	}
}

// trimIfIdle returns freed heap to the OS and unmaps the code pages of the
// binary (see releaseCode) when nothing is in flight.
func (t *Trimmer) trimIfIdle() {
	if t.active.Load() == 0 {
		t.mu.Lock()
		before := t.before
		t.mu.Unlock()
		for _, fn := range before {
			fn()
		}
		// Two collections: a sync.Pool keeps what was put in it through
		// one (its victim cache), so the first leaves the pools' buffers
		// (encoding/json's, as large as the last model request) to the
		// second, FreeOSMemory's, which frees them before the heap is
		// handed back.
		runtime.GC()
		debug.FreeOSMemory()
		if err := release(); err != nil {
			t.logger.Debug("code pages not released", "err", err)
		}
	}
}
