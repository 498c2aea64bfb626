package hatchery

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
)

// Docker hosts go down and come back. A host is down when a call to it
// fails for want of a connection (or a probe gets no answer); placement
// then skips it, chicks that were being started there are queued again
// for the other hosts, and the probe asks it again every ProbeInterval.
// When it answers again, its containers are reconciled (strays reaped,
// chicks that lived on re-watched, the ones gone ended) and queued chicks
// may go there.

// hostHealth is a host's state. Guarded by Hatchery.mu.
type hostHealth struct {
	down    bool
	err     string
	since   time.Time
	version string
	// checked: the host answered or failed at least once.
	checked bool
}

// unreachable reports whether err means the Docker host did not answer
// (as opposed to an answer that says no).
func unreachable(err error) bool {
	return err != nil && (errors.Is(err, ErrUnreachable) || errors.Is(err, context.DeadlineExceeded))
}

// markDown records that hs does not answer. Callers hold h.mu.
func (h *Hatchery) markDownLocked(hs *host, err error) {
	msg := "no answer"
	if err != nil {
		msg = firstLine(err.Error())
	}
	hs.health.err = msg
	hs.health.checked = true
	if hs.health.down {
		return
	}
	hs.health.down = true
	hs.health.since = h.clock.Now()
	h.logger.Warn("Docker host is down; its chicks wait or go to other hosts until it answers again", "host", hs.Name, "err", msg)
}

// markUp records that hs answered; when it was down, its containers are
// reconciled and queued chicks may go there. Callers hold h.mu; it may
// start a goroutine.
func (h *Hatchery) markUpLocked(hs *host, version string) {
	if version != "" {
		hs.health.version = version
	}
	was := hs.health
	hs.health.checked = true
	hs.health.err = ""
	if !was.down {
		if !was.checked {
			hs.health.since = h.clock.Now()
		}
		return
	}
	hs.health.down = false
	hs.health.since = h.clock.Now()
	h.logger.Info("Docker host answers again; reconciling its chicks", "host", hs.Name, "was_down_for", clock.Since(h.clock, was.since).Round(time.Second))
	if h.closed {
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.reconcileHost(hs)
		h.mu.Lock()
		h.dequeueLocked()
		h.mu.Unlock()
	}()
}

// checkHost asks hs for its version (a cheap call that needs the engine)
// and records the answer.
func (h *Hatchery) checkHost(ctx context.Context, hs *host) {
	cctx, cancel := context.WithTimeout(ctx, h.probeTO)
	v, err := hs.Runtime.Version(cctx)
	cancel()
	if h.ctx.Err() != nil || (err != nil && ctx.Err() != nil) {
		return // closing, or the caller gave up: no verdict
	}
	h.mu.Lock()
	if err != nil {
		h.markDownLocked(hs, err)
		h.mu.Unlock()
		return
	}
	h.markUpLocked(hs, v)
	unusable := hs.image.unusable()
	// A gate kept for chicks that ended unseen (or whose replacement
	// failed) is replaced once the host is idle.
	h.renewGateWhenIdleLocked(hs)
	h.mu.Unlock()
	// The image is asked about at each probe: one replaced by an image of
	// another release is seen here, and one built or replaced since it
	// was missing or incompatible clears that.
	if !h.checkImage(ctx, hs) && unusable {
		// Built or replaced since: the chicks queued for it may go.
		h.mu.Lock()
		h.dequeueLocked()
		h.mu.Unlock()
	}
}

// checkHosts checks every host at once.
func (h *Hatchery) checkHosts(ctx context.Context) {
	var wg sync.WaitGroup
	for _, hs := range h.hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.checkHost(ctx, hs)
		}()
	}
	wg.Wait()
}

// startProbes checks every host every ProbeInterval, so a host that went
// down is noticed before a chick is placed there, and one that came back
// is used again.
func (h *Hatchery) startProbes() {
	iv := h.probeEvery
	if iv <= 0 {
		return
	}
	var tick func()
	tick = func() {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return
		}
		h.wg.Add(1)
		h.mu.Unlock()
		h.checkHosts(h.ctx)
		h.wg.Done()
		h.mu.Lock()
		if !h.closed {
			h.probe = h.clock.AfterFunc(iv, tick)
		}
		h.mu.Unlock()
	}
	h.mu.Lock()
	if !h.closed && h.probe == nil {
		h.probe = h.clock.AfterFunc(iv, tick)
	}
	h.mu.Unlock()
}

// requeue puts a chick whose container could not be started because its
// host did not answer back at the head of the queue (on another host, or
// on this one once it is back), and marks the host down.
func (h *Hatchery) requeue(c *chick, hs *host, err error) {
	h.mu.Lock()
	h.markDownLocked(hs, err)
	if c.rec.State != StateStarting || c.stopped {
		// Stopped meanwhile: end it as a failed start would (a half-made
		// container is reaped when the host is back).
		h.mu.Unlock()
		h.failStart(c, "", err)
		return
	}
	defer h.mu.Unlock()
	hs.running--
	c.host = nil
	c.rec.State = StateQueued
	c.rec.Host = ""
	c.rec.TokenHash = ""
	c.rec.ContainerID = "" // a half-made container there is reaped when the host is back
	c.rec.StartedAt = time.Time{}
	h.persist(c)
	h.queue = slices.Insert(h.queue, 0, c)
	h.logger.Warn("chick not started: its Docker host did not answer; queued again", "chick", c.rec.ID, "host", hs.Name)
	h.dequeueLocked()
}

// hostGone ends a chick that had to be killed (it was stopped, hung, or
// is done and did not exit) while its host does not answer: there is
// nothing more to wait for. Its container is reaped when the host is
// back.
func (h *Hatchery) hostGone(c *chick) {
	h.mu.Lock()
	if c.rec.State.Final() {
		h.mu.Unlock()
		return
	}
	reason, outcome := c.reason, c.outcome
	if r := c.rec.Result; r != nil && reason == "" {
		reason, outcome = resultReason(r)
	}
	if reason == "" {
		reason, outcome = ReasonLost, "lost: its Docker host stopped answering"
	}
	h.logger.Warn("chick ended while its Docker host is down; its container is removed when the host is back", "chick", c.rec.ID, "host", c.rec.Host, "reason", reason)
	h.endLocked(c, reason, outcome)
}

// reconcileHost runs when hs answers again after being down: containers
// of chicks that ended or were placed elsewhere meanwhile are reaped,
// chicks whose container lived on are watched again, and the ones whose
// container is gone are ended.
func (h *Hatchery) reconcileHost(hs *host) {
	ctx, cancel := h.dctx()
	list, err := hs.Runtime.List(ctx, LabelInstance, h.instance)
	cancel()
	if err != nil {
		h.mu.Lock()
		if unreachable(err) {
			h.markDownLocked(hs, err)
		}
		h.mu.Unlock()
		h.logger.Warn("cannot list the chick containers of a host that came back", "host", hs.Name, "err", err)
		return
	}
	list, _ = splitGates(list)
	if hs.gated {
		// The gate may have gone with the engine: ask again.
		h.mu.Lock()
		hs.gate.ok = false
		h.mu.Unlock()
		h.ensureGateOrSay(h.ctx, hs, "gate not ready on a host that came back")
	}
	type exit struct {
		c    *chick
		code int64
		gone bool
	}
	var remove []Container
	var watch []*chick
	var exits []exit
	seen := map[string]bool{}
	h.mu.Lock()
	now := h.clock.Now()
	for _, f := range list {
		c := h.chicks[f.Labels[LabelChickID]]
		switch {
		case c == nil:
			remove = append(remove, f)
		case c.rec.State.Final():
			if c.rec.Removed || c.rec.KeepUntil.IsZero() || !now.Before(c.rec.KeepUntil) {
				c.rec.Removed = true
				h.persist(c)
				remove = append(remove, f)
			}
		case c.host != hs || c.rec.ContainerID != f.ID:
			remove = append(remove, f) // a start cut short; the chick went elsewhere
		case c.detached:
			seen[c.rec.ID] = true
			c.detached = false
			if f.State == ContainerRunning {
				watch = append(watch, c)
			} else {
				exits = append(exits, exit{c: c, code: -1})
			}
		default:
			seen[c.rec.ID] = true
		}
	}
	for _, c := range h.chicks {
		if c.host == hs && c.detached && !c.rec.State.Final() && !seen[c.rec.ID] {
			c.detached = false
			exits = append(exits, exit{c: c, gone: true})
		}
	}
	h.mu.Unlock()
	for _, f := range remove {
		h.logger.Info("reaping chick container left on a host that was down", "host", hs.Name, "container", short(f.ID), "chick", f.Labels[LabelChickID])
		h.removeContainer(hs, f.ID)
	}
	for _, c := range watch {
		h.logger.Info("chick lived on while its host was down; watching it again", "chick", c.rec.ID, "host", hs.Name)
		h.watchAgain(c)
	}
	for _, e := range exits {
		if e.gone {
			h.mu.Lock()
			h.endLocked(e.c, ReasonLost, "lost: its container disappeared while its Docker host was down")
			continue
		}
		ictx, icancel := h.dctx()
		insp, ierr := hs.Runtime.Inspect(ictx, e.c.rec.ContainerID)
		icancel()
		var ended string
		if ierr == nil {
			e.code, ended = insp.ExitCode, insp.Ended
		}
		h.exitedWhy(e.c, e.code, ended)
	}
}

// watchAgain waits for the exit of a chick's running container (after its
// host was unreachable).
func (h *Hatchery) watchAgain(c *chick) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	hs, cid := c.host, c.rec.ContainerID
	h.wg.Add(1)
	h.mu.Unlock()
	wctx, wcancel := context.WithCancel(context.WithoutCancel(h.ctx))
	exitCh := hs.Runtime.Wait(wctx, cid, false)
	go func() {
		defer h.wg.Done()
		defer wcancel()
		h.waitExit(c, exitCh)
	}()
}

// HostStatus is one engine's health and load.
type HostStatus struct {
	Name     string
	Up       bool
	Running  int
	Capacity int
	// Tiers it serves; empty: all.
	Tiers []string
	// EngineVersion is the Docker engine's version, from its last answer.
	EngineVersion string
	// Since is when it last went up or down (zero: not checked yet).
	Since time.Time
	// Err is why it is down.
	Err string
	// GateRestarts counts the times its gate (isolated chicks) exited
	// and was started again.
	GateRestarts int
	// Incompatible, when set, says that its chick image is of a release
	// this Mother does not work with, in one sentence that names both and
	// the fix: no chick starts there until the image changes.
	Incompatible string
}

// Hosts checks every engine now and reports its health and load.
func (h *Hatchery) Hosts(ctx context.Context) []HostStatus {
	h.checkHosts(ctx)
	return h.HostStates()
}

// HostStates reports what is known of each engine without asking it (for
// metrics). A host not checked yet counts as up.
func (h *Hatchery) HostStates() []HostStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]HostStatus, 0, len(h.hosts))
	for _, hs := range h.hosts {
		out = append(out, HostStatus{
			Name: hs.Name, Up: !hs.health.down, Running: hs.running, Capacity: hs.Capacity,
			Tiers: slices.Clone(hs.Tiers), EngineVersion: hs.health.version, Since: hs.health.since, Err: hs.health.err,
			GateRestarts: hs.gate.restarts, Incompatible: hs.image.incompatible,
		})
	}
	return out
}
