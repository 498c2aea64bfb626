package hatchery

import (
	"fmt"
	"time"
)

// The watchdog declares a running chick hung when it has missed three
// heartbeats in a row, counted on Mother's side, on the hatchery's clock
// (a fake one in tests, so a test says when time passes):
//
//   - Every chicks.heartbeatInterval the watchdog ticks. A tick that finds
//     the chick silent for longer than the interval it is expected to
//     speak in counts one missed heartbeat; anything heard from the chick
//     clears the count.
//   - A tick that comes late (more than two intervals after the one
//     before) counts nothing: Mother herself was not running (a loaded
//     machine, a long GC pause, a suspended process), and what the chick
//     sent meanwhile may be waiting, unread, in her sockets. Measured from
//     her last sighting, one such stall of hers used to take every chick
//     for hung at once.
//   - The interval a chick is expected to speak in is the heartbeat
//     interval or, for a chick whose messages have been arriving further
//     apart than that (a loaded machine, a big event in the way of its
//     heartbeats), the longest of its last gapWindow gaps, up to
//     maxStretch intervals: the threshold follows the heartbeat delay
//     measured for that chick (a quarter interval late is jitter, not
//     delay). A chick that stops is still caught: its silence grows
//     without end.
//   - Until the chick has been heard for gapWindow intervals (since its
//     first word to this process: after a Mother restart too), nothing is
//     measured yet, and a silence that began then is expected to last up
//     to maxStretch intervals: a chick starting up on a loaded machine
//     (its Pod's first seconds on a busy CI node: a false hang of a
//     healthy chick in TestKubernetesMomctl) is not taken for hung before
//     its delay could be measured. A chick that hangs that early is
//     caught after missedBeats such intervals instead of missedBeats
//     heartbeat intervals.
//
// A chick is hung once it has missed missedBeats heartbeats and been
// silent for missedBeats expected intervals.
const (
	missedBeats = 3
	gapWindow   = 8
	maxStretch  = 4
)

// beats is what the watchdog keeps about one chick's heartbeats.
type beats struct {
	// missed counts the watchdog's ticks in a row that found the chick
	// silent.
	missed int
	// gaps are the last gapWindow gaps between two things heard from the
	// chick; next is where the next one goes.
	gaps [gapWindow]time.Duration
	next int
	// first is when the chick was first heard (zero: not yet).
	first time.Time
}

// heard records that the chick spoke at now, its previous word at last
// (in the future while a grace runs: no gap then).
func (b *beats) heard(now, last time.Time) {
	b.missed = 0
	if b.first.IsZero() {
		b.first = now
	}
	if last.IsZero() || !now.After(last) {
		return
	}
	b.gaps[b.next%gapWindow] = now.Sub(last)
	b.next++
}

// expected is the interval the chick, last heard at last, is expected to
// speak in: iv, or its longest recent gap when that is later than a
// quarter interval's jitter, rounded up to a quarter interval (so the
// outcome reads "no heartbeat for 2.25s", not "2.2371s"), at most
// maxStretch intervals; maxStretch intervals when last came before the
// chick had been heard for gapWindow intervals (nothing measured yet).
func (b *beats) expected(iv time.Duration, last time.Time) time.Duration {
	if b.first.IsZero() || last.Sub(b.first) < gapWindow*iv {
		return maxStretch * iv
	}
	q := max(iv/4, 1)
	e := iv
	for _, g := range b.gaps {
		e = max(e, g)
	}
	if e <= iv+q {
		return iv
	}
	e = (e + q - 1) / q * q
	return min(e, maxStretch*iv)
}

// tick is one check of the watchdog at now, for a chick last heard at
// last; late: the tick came late (Mother was not running). It returns
// whether the chick is hung, and then the silence that made it so
// (missedBeats expected intervals).
func (b *beats) tick(now, last time.Time, iv time.Duration, late bool) (bool, time.Duration) {
	silent := now.Sub(last)
	exp := b.expected(iv, last)
	if late || silent <= exp {
		return false, 0
	}
	b.missed++
	if b.missed >= missedBeats && silent > missedBeats*exp {
		return true, missedBeats * exp
	}
	return false, 0
}

// StartWatchdog checks heartbeats every chicks.heartbeatInterval (see
// beats).
func (h *Hatchery) StartWatchdog() {
	iv := h.cfg.HeartbeatInterval.Duration
	if iv <= 0 {
		return
	}
	var tick func()
	tick = func() {
		h.checkHeartbeats(iv)
		h.mu.Lock()
		if !h.closed {
			h.watch = h.clock.AfterFunc(iv, tick)
		}
		h.mu.Unlock()
	}
	h.mu.Lock()
	h.lastTick = h.clock.Now()
	h.watch = h.clock.AfterFunc(iv, tick)
	h.mu.Unlock()
}

func (h *Hatchery) checkHeartbeats(iv time.Duration) {
	type verdict struct {
		id         string
		limit, exp time.Duration
	}
	now := h.clock.Now()
	var hung []verdict
	h.mu.Lock()
	since := now.Sub(h.lastTick)
	late := since > 2*iv
	h.lastTick = now
	for id, c := range h.chicks {
		// A chick whose result is stored has nothing left to say: it is
		// exiting (Finish armed the kill), not hung.
		// One whose host's gate is down cannot say anything: its way to
		// Mother is gone, not the chick (the gate's restart gives it a
		// reconnect grace; chicks.timeout still bounds it).
		gateDown := c.host != nil && c.host.gated && !c.host.gate.ok
		if c.rec.State != StateRunning || c.stopped || c.rec.Result != nil || gateDown {
			c.beats.missed = 0
			continue
		}
		if is, limit := c.beats.tick(now, c.lastSeen, iv, late); is {
			hung = append(hung, verdict{id, limit, c.beats.expected(iv, c.lastSeen)})
		}
	}
	h.mu.Unlock()
	if late {
		h.logger.Info("heartbeat check came late: Mother was not running; no heartbeat counted as missed", "late_by", since-iv)
	}
	for _, v := range hung {
		h.logger.Warn("chick missed its heartbeats; killing it", "chick", v.id, "silent_for", v.limit, "expected_every", v.exp)
		_, _ = h.Stop(v.id, ReasonHung, fmt.Sprintf("hung: no heartbeat for %s", v.limit), 0)
	}
}
