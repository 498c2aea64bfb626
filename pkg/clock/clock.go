// Package clock is the time source Mother's schedulers use (events, queues,
// retries), so tests advance simulated time instead of sleeping.
//
// Real is the wall clock. Fake is a manual clock for tests: timers fire
// only when the test advances it.
package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Clock tells the time and runs functions later.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine (Real) or from Advance (Fake)
	// once d has elapsed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop prevents the call if it has not happened yet and reports
	// whether it did so.
	Stop() bool
}

// Sleep waits until d has elapsed on c or ctx is done, whichever comes
// first, and returns ctx.Err() in the second case. A non-positive d returns
// at once (nil unless ctx is already done).
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	done := make(chan struct{})
	t := c.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}

// After returns a channel that receives the time once d has elapsed on c,
// like time.After; the timer is not released early, so prefer Sleep or
// AfterFunc where a Stop is needed.
func After(c Clock, d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.AfterFunc(d, func() { ch <- c.Now() })
	return ch
}

// Ticker sends c's time on C every d, like time.Ticker: a tick that finds
// C still full is dropped, so a slow reader gets the latest pace, not a
// backlog. Each tick is scheduled when the previous one fires.
type Ticker struct {
	C <-chan time.Time

	c       chan time.Time
	clock   Clock
	d       time.Duration
	mu      sync.Mutex
	t       Timer
	stopped bool
}

// NewTicker starts a Ticker on c with period d (d must be positive).
func NewTicker(c Clock, d time.Duration) *Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	ch := make(chan time.Time, 1)
	tk := &Ticker{C: ch, c: ch, clock: c, d: d}
	tk.arm()
	return tk
}

func (tk *Ticker) arm() {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	if !tk.stopped {
		tk.t = tk.clock.AfterFunc(tk.d, tk.fire)
	}
}

func (tk *Ticker) fire() {
	select {
	case tk.c <- tk.clock.Now():
	default:
	}
	tk.arm()
}

// Stop ends the ticks; C is not closed.
func (tk *Ticker) Stop() {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	tk.stopped = true
	if tk.t != nil {
		tk.t.Stop()
	}
}

// Since is c.Now().Sub(t).
func Since(c Clock, t time.Time) time.Duration { return c.Now().Sub(t) }

// OrReal is c, or the wall clock when c is nil (an unset option).
func OrReal(c Clock) Clock {
	if c == nil {
		return Real{}
	}
	return c
}

// Real is the wall clock.
type Real struct{}

var _ Clock = Real{}

// Now implements Clock.
func (Real) Now() time.Time { return time.Now() }

// AfterFunc implements Clock.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Fake is a clock that moves only when told to. It is safe for concurrent
// use. Timer functions run synchronously inside Advance, in due order, with
// Now reporting their due time; they must not call Advance themselves.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	seq    int
	timers []*fakeTimer
}

var _ Clock = (*Fake)(nil)

// NewFake returns a fake clock set to t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

type fakeTimer struct {
	c   *Fake
	at  time.Time
	seq int
	f   func()
}

// Now implements Clock.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc implements Clock. A non-positive d fires at the next Advance
// (even Advance(0)).
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, at: c.now.Add(max(d, 0)), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return t
}

// Stop implements Timer.
func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, o := range t.c.timers {
		if o == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			return true
		}
	}
	return false
}

// Advance moves the clock forward by d, firing every timer that falls due,
// in order (timers created by a firing timer fire too if they fall due
// within the same advance).
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	c.AdvanceTo(end)
}

// AdvanceTo moves the clock to t (if t is later) and fires due timers.
func (c *Fake) AdvanceTo(t time.Time) {
	for {
		c.mu.Lock()
		sort.SliceStable(c.timers, func(i, j int) bool {
			if !c.timers[i].at.Equal(c.timers[j].at) {
				return c.timers[i].at.Before(c.timers[j].at)
			}
			return c.timers[i].seq < c.timers[j].seq
		})
		if len(c.timers) == 0 || c.timers[0].at.After(t) {
			if t.After(c.now) {
				c.now = t
			}
			c.mu.Unlock()
			return
		}
		next := c.timers[0]
		c.timers = c.timers[1:]
		if next.at.After(c.now) {
			c.now = next.at
		}
		c.mu.Unlock()
		next.f()
	}
}

// Stall moves the clock forward by d without firing the timers that fall
// due meanwhile: they fire at the next Advance, late, with Now the stalled
// time, as the timers of a process that was not running (a loaded
// machine, a long GC pause, a suspended process) fire once it runs again.
func (c *Fake) Stall(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(max(d, 0))
}

// Pending is the number of timers not yet fired or stopped.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// NextAt is when the earliest pending timer fires (zero if none).
func (c *Fake) NextAt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var at time.Time
	for _, t := range c.timers {
		if at.IsZero() || t.at.Before(at) {
			at = t.at
		}
	}
	return at
}
