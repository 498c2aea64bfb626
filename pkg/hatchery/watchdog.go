package hatchery

import (
	"fmt"
	"time"
)

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
		// One whose host's gate is down cannot say anything: its way to
		// Mother is gone, not the chick (the gate's restart gives it a
		// reconnect grace; chicks.timeout still bounds it).
		gateDown := c.host != nil && c.host.gated && !c.host.gate.ok
		if c.rec.State == StateRunning && !c.stopped && c.rec.Result == nil && !gateDown && now.Sub(c.lastSeen) > limit {
			hung = append(hung, id)
		}
	}
	h.mu.Unlock()
	for _, id := range hung {
		h.logger.Warn("chick missed its heartbeats; killing it", "chick", id, "silent_for", limit)
		_, _ = h.Stop(id, ReasonHung, fmt.Sprintf("hung: no heartbeat for %s", limit), 0)
	}
}
