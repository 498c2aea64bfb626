package hatchery

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
)

type found struct {
	host *host
	c    Container
}

// Reconcile matches the records with the containers this Mother instance
// has on its hosts (by label), after a restart: a running chick with a
// known token is resumed (it reconnects with its token), an ended or
// unknown container is reaped, a chick whose container is gone is ended
// and its channel told, queued chicks are queued again, and so is a chick
// whose container was created but never started. A chick that ended before
// the restart without Mother reporting it is announced to the observer
// again. It also starts the heartbeat watchdog.
func (h *Hatchery) Reconcile(ctx context.Context) error {
	byChick := map[string]found{}
	failed := map[string]bool{}
	var strays []found
	for _, hs := range h.hosts {
		cctx, cancel := context.WithTimeout(ctx, h.dockerTO)
		list, err := hs.Runtime.List(cctx, LabelInstance, h.instance)
		cancel()
		if err != nil {
			h.logger.Error("cannot list chick containers; leaving that host's chicks as they are", "host", hs.Name, "err", err)
			failed[hs.Name] = true
			h.mu.Lock()
			h.markDownLocked(hs, err)
			h.mu.Unlock()
			continue
		}
		h.mu.Lock()
		h.markUpLocked(hs, "")
		h.mu.Unlock()
		for _, c := range list {
			id := c.Labels[LabelChickID]
			if _, dup := byChick[id]; id == "" || dup {
				strays = append(strays, found{hs, c})
				continue
			}
			byChick[id] = found{hs, c}
		}
	}

	type endAction struct {
		c       *chick
		reason  Reason
		outcome string
		code    int64
		result  bool
	}
	var ends []endAction
	var resumed []*chick
	var remove []found
	type keep struct {
		id string
		d  time.Duration
	}
	var keeps []keep

	h.mu.Lock()
	now := h.clock.Now()
	hostByName := map[string]*host{}
	for _, hs := range h.hosts {
		hostByName[hs.Name] = hs
	}
	for id, f := range byChick {
		c, ok := h.chicks[id]
		switch {
		case !ok:
			remove = append(remove, f)
		case !c.restored:
			// Spawned by this process while we were listing.
		case c.rec.State.Final():
			c.host = f.host
			if c.rec.Removed || c.rec.KeepUntil.IsZero() || !now.Before(c.rec.KeepUntil) {
				c.rec.Removed = true
				h.persist(c)
				remove = append(remove, f)
			} else {
				keeps = append(keeps, keep{id, c.rec.KeepUntil.Sub(now)})
			}
		case f.c.State == ContainerRunning && c.rec.TokenHash != "" && c.rec.State != StateStopping:
			c.host = f.host
			c.rec.ContainerID = f.c.ID
			f.host.running++
			c.rec.State = StateRunning
			c.lastSeen = now.Add(h.grace)
			h.persist(c)
			resumed = append(resumed, c)
		case f.c.State == ContainerCreated && c.rec.State == StateStarting && c.rec.Result == nil:
			// Mother stopped between creating the container and starting
			// it: it never ran, so nothing was done. Start it afresh (a
			// new container and token) rather than losing the goal.
			c.rec.State = StateQueued
			c.rec.TokenHash = ""
			c.rec.ContainerID = ""
			h.persist(c)
			h.queue = append(h.queue, c)
			remove = append(remove, f)
			h.logger.Info("chick created but never started before the restart; starting it again", "chick", id, "container", short(f.c.ID))
		default:
			c.host = f.host
			c.rec.ContainerID = f.c.ID
			f.host.running++
			if c.rec.State == StateQueued {
				c.rec.State = StateStarting
			}
			if c.rec.Result != nil && f.c.State != ContainerRunning {
				ends = append(ends, endAction{c: c, result: true})
			} else {
				ends = append(ends, endAction{c: c, reason: ReasonLost, outcome: "lost: Mother restarted and could not resume it (its container had stopped or was stopping)"})
			}
		}
	}
	for id, c := range h.chicks {
		if c.rec.State.Final() || !c.restored {
			continue
		}
		if _, ok := byChick[id]; ok {
			continue
		}
		if failed[c.rec.Host] {
			hs := hostByName[c.rec.Host]
			if hs != nil {
				c.host = hs
				hs.running++
				c.lastSeen = now.Add(h.grace)
				c.detached = true // decided when the host answers again
			}
			continue
		}
		switch c.rec.State {
		case StateQueued, StateStarting:
			if c.rec.ContainerID == "" {
				c.rec.State = StateQueued
				c.rec.TokenHash = ""
				h.persist(c)
				h.queue = append(h.queue, c)
				continue
			}
		}
		ends = append(ends, endAction{c: c, reason: ReasonLost, outcome: "lost: its container disappeared while Mother was down"})
	}
	// Chicks that ended before the restart but whose end Mother never
	// reported: announce them again.
	var unreported []Info
	for _, c := range h.chicks {
		if c.restored && c.rec.State.Final() && c.rec.Unreported {
			unreported = append(unreported, h.info(c))
		}
		c.restored = false
	}
	h.mu.Unlock()
	sort.Slice(unreported, func(i, j int) bool { return unreported[i].EndedAt.Before(unreported[j].EndedAt) })

	for _, k := range keeps {
		h.keepTimer(k.d, k.id)
	}
	for _, f := range append(remove, strays...) {
		h.logger.Warn("reaping stray chick container", "container", short(f.c.ID), "chick", f.c.Labels[LabelChickID], "host", f.host.Name)
		h.removeContainer(f.host, f.c.ID)
	}
	for _, e := range ends {
		if e.result {
			h.exited(e.c, e.code)
			continue
		}
		h.mu.Lock()
		h.endLocked(e.c, e.reason, e.outcome)
	}
	for _, c := range resumed {
		h.resume(c)
	}
	for _, in := range unreported {
		h.logger.Info("chick ended before the restart without its end being reported; reporting it now", "chick", in.ID, "state", in.State)
		h.obs.get().ChickEnded(in)
	}
	h.mu.Lock()
	h.dequeueLocked()
	h.mu.Unlock()
	h.StartWatchdog()
	h.startProbes()
	if len(failed) > 0 {
		return fmt.Errorf("reconcile: %d Docker host(s) did not answer", len(failed))
	}
	return nil
}

// resume watches a chick found running after a restart.
func (h *Hatchery) resume(c *chick) {
	h.mu.Lock()
	left := h.cfg.Timeout.Duration - clock.Since(h.clock, c.rec.StartedAt)
	if h.cfg.Timeout.Duration > 0 {
		if left <= 0 {
			left = 1
		}
		h.armTimeout(c, left)
	}
	info := h.info(c)
	hs, cid := c.host, c.rec.ContainerID
	h.mu.Unlock()
	h.logger.Info("chick resumed after restart", "chick", info.ID, "container", short(cid))
	wctx, wcancel := context.WithCancel(context.WithoutCancel(h.ctx))
	exitCh := hs.Runtime.Wait(wctx, cid, false)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer wcancel()
		h.waitExit(c, exitCh)
	}()
	h.obs.get().ChickResumed(info)
}
