package hatchery

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
)

// observedHost is what one host's List said at reconcile.
type observedHost struct {
	Name string
	// Failed: the host did not answer; its chicks are left as they are
	// until it does.
	Failed bool
	// Containers are its chick containers; Gates its gate containers.
	Containers []Container
	Gates      []Container
	// SelfIsolated: its runtime confines chicks without a gate
	// (SelfIsolator).
	SelfIsolated bool
}

// knownChick is a chick the hatchery holds when it reconciles.
type knownChick struct {
	Record
	// Restored: loaded from disk at start, so Reconcile decides about
	// it; a chick spawned by this process is not its business.
	Restored bool
}

// actionKind is one thing Reconcile does.
type actionKind int

const (
	// actRequeue: the chick never ran; it waits in the queue again (its
	// token, and its container id when ClearContainer, forgotten).
	actRequeue actionKind = iota
	// actDetach: its host did not answer; reconcileHost decides later.
	actDetach
	// actKeep: an ended chick's container is kept for inspection until
	// its KeepUntil (After from now).
	actKeep
	// actReap: a container to remove; MarkRemoved records that on the
	// chick (an ended one whose keep ran out).
	actReap
	// actEnd: the chick ends: with its stored result (WithResult), or
	// with Reason and Outcome. A Host means its container was found
	// there (the chick holds a slot until it ends).
	actEnd
	// actResume: a running container with a known token; the chick
	// reconnects and is watched again.
	actResume
	// actAnnounce: the chick ended before the restart without its end
	// being reported; it is reported now.
	actAnnounce
)

// action is one step of a reconcile plan.
type action struct {
	Kind      actionKind
	Chick     string
	Host      string
	Container string
	// Stray: a container of no chick known, or a duplicate (actReap).
	Stray          bool
	MarkRemoved    bool
	ClearContainer bool
	After          time.Duration
	WithResult     bool
	Reason         Reason
	Outcome        string
}

// Outcomes of chicks Reconcile ends.
const (
	outcomeLostStopped = "lost: Mother restarted and could not resume it (its container had stopped or was stopping)"
	outcomeLostGone    = "lost: its container disappeared while Mother was down"
)

// plan decides, without side effects, what becomes of each chick and each
// container after a restart, from the chicks held (records) and what the
// hosts' engines hold (observed), at now: a running chick with a known
// token is resumed, an ended or unknown container is reaped, a chick whose
// container is gone is ended, queued chicks are queued again, and so is a
// chick whose container was created but never started. The actions come
// in the order they are to be applied: record changes (requeue, detach),
// keeps, reaps, ends, resumes, announcements (oldest end first); within a
// kind, by chick id, strays last among the reaps.
func plan(records []knownChick, observed []observedHost, now time.Time) []action {
	type found struct {
		host string
		c    Container
	}
	byChick := map[string]found{}
	failed := map[string]bool{}
	var strays []action
	for _, o := range observed {
		if o.Failed {
			failed[o.Name] = true
			continue
		}
		for _, c := range o.Containers {
			id := c.Labels[LabelChickID]
			if _, dup := byChick[id]; id == "" || dup {
				strays = append(strays, action{Kind: actReap, Host: o.Name, Container: c.ID, Chick: id, Stray: true})
				continue
			}
			byChick[id] = found{o.Name, c}
		}
	}
	known := map[string]knownChick{}
	for _, r := range records {
		known[r.ID] = r
	}
	var records1, keeps, reaps, ends, resumes []action
	for _, id := range slices.Sorted(maps.Keys(byChick)) {
		f := byChick[id]
		r, ok := known[id]
		switch {
		case !ok:
			reaps = append(reaps, action{Kind: actReap, Host: f.host, Container: f.c.ID, Chick: id})
		case !r.Restored:
			// Spawned by this process while the hosts were listed.
		case r.State.Final():
			if r.Removed || r.KeepUntil.IsZero() || !now.Before(r.KeepUntil) {
				reaps = append(reaps, action{Kind: actReap, Host: f.host, Container: f.c.ID, Chick: id, MarkRemoved: true})
			} else {
				keeps = append(keeps, action{Kind: actKeep, Chick: id, Host: f.host, After: r.KeepUntil.Sub(now)})
			}
		case f.c.State == ContainerRunning && r.TokenHash != "" && r.State != StateStopping:
			resumes = append(resumes, action{Kind: actResume, Chick: id, Host: f.host, Container: f.c.ID})
		case f.c.State == ContainerCreated && r.State == StateStarting && r.Result == nil:
			// Mother stopped between creating the container and starting
			// it: it never ran, so nothing was done. Start it afresh (a
			// new container and token) rather than losing the goal.
			records1 = append(records1, action{Kind: actRequeue, Chick: id, Host: f.host, Container: f.c.ID, ClearContainer: true})
			reaps = append(reaps, action{Kind: actReap, Host: f.host, Container: f.c.ID, Chick: id})
		case r.Result != nil && f.c.State != ContainerRunning:
			ends = append(ends, action{Kind: actEnd, Chick: id, Host: f.host, Container: f.c.ID, WithResult: true})
		default:
			ends = append(ends, action{Kind: actEnd, Chick: id, Host: f.host, Container: f.c.ID, Reason: ReasonLost, Outcome: outcomeLostStopped})
		}
	}
	var announce []knownChick
	for _, id := range slices.Sorted(maps.Keys(known)) {
		r := known[id]
		if !r.Restored {
			continue
		}
		if r.State.Final() {
			if r.Unreported {
				announce = append(announce, r)
			}
			continue
		}
		if _, ok := byChick[id]; ok {
			continue
		}
		if failed[r.Host] {
			records1 = append(records1, action{Kind: actDetach, Chick: id, Host: r.Host})
			continue
		}
		if (r.State == StateQueued || r.State == StateStarting) && r.ContainerID == "" {
			records1 = append(records1, action{Kind: actRequeue, Chick: id})
			continue
		}
		ends = append(ends, action{Kind: actEnd, Chick: id, Reason: ReasonLost, Outcome: outcomeLostGone})
	}
	sort.SliceStable(announce, func(i, j int) bool { return announce[i].EndedAt.Before(announce[j].EndedAt) })
	out := slices.Concat(records1, keeps, reaps, strays, ends, resumes)
	for _, r := range announce {
		out = append(out, action{Kind: actAnnounce, Chick: r.ID})
	}
	return out
}

// Reconcile matches the records with the containers this Mother instance
// has on its hosts (by label), after a restart, as plan decides, and
// applies the plan. It also starts the heartbeat watchdog and the host
// probes. The gates are reconciled first (planGates). A host that does
// not answer is left as it is (its chicks and gate are decided when it
// answers again) and makes the error.
func (h *Hatchery) Reconcile(ctx context.Context) error {
	observed := h.observe(ctx)
	for i, o := range observed {
		if !o.Failed {
			h.checkImage(ctx, h.hosts[i])
		}
	}
	h.reconcileGates(ctx, observed)
	h.mu.Lock()
	var records []knownChick
	for _, c := range h.chicks {
		records = append(records, knownChick{Record: c.rec, Restored: c.restored})
	}
	actions := plan(records, observed, h.clock.Now())
	h.apply(actions)
	h.mu.Lock()
	h.reconciling = false
	h.dequeueLocked()
	h.mu.Unlock()
	h.failQueuedWithoutImage()
	h.StartWatchdog()
	h.startProbes()
	failed := 0
	for _, o := range observed {
		if o.Failed {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("reconcile: %d Docker host(s) %w", failed, ErrHostsUnreachable)
	}
	return nil
}

// StartReconcile runs Reconcile in the background, so a Mother is ready
// for chat without waiting for any Docker host (a slow or unreachable
// engine delays only the chicks). Chicks spawned meanwhile wait in the
// queue and start once it is done. The channel gets Reconcile's result.
func (h *Hatchery) StartReconcile(ctx context.Context) <-chan error {
	h.mu.Lock()
	h.reconciling = true
	h.wg.Add(1)
	h.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		defer h.wg.Done()
		done <- h.Reconcile(ctx)
	}()
	return done
}

// observe lists this instance's containers on every host, marking each
// host up or down by its answer.
func (h *Hatchery) observe(ctx context.Context) []observedHost {
	var out []observedHost
	for _, hs := range h.hosts {
		cctx, cancel := context.WithTimeout(ctx, h.dockerTO)
		list, err := hs.Runtime.List(cctx, LabelInstance, h.instance)
		cancel()
		if err != nil && ctx.Err() != nil {
			// Stopping before the host answered: no verdict on it.
			out = append(out, observedHost{Name: hs.Name, Failed: true})
			continue
		}
		h.mu.Lock()
		if err != nil {
			h.markDownLocked(hs, err)
		} else {
			h.markUpLocked(hs, "")
		}
		h.mu.Unlock()
		if err != nil {
			if !unreachable(err) { // markDownLocked said that one
				h.logger.Warn("cannot list chick containers; leaving that host's chicks as they are", "host", hs.Name, "err", err)
			}
			out = append(out, observedHost{Name: hs.Name, Failed: true})
			continue
		}
		chicks, gates := splitGates(list)
		out = append(out, observedHost{Name: hs.Name, Containers: chicks, Gates: gates, SelfIsolated: selfIsolating(hs.Runtime)})
	}
	return out
}

// apply carries out a plan. It is called with h.mu held and unlocks: the
// record changes are made under the lock, then containers are reaped,
// chicks ended, resumed and announced outside it.
func (h *Hatchery) apply(actions []action) {
	now := h.clock.Now()
	hostByName := map[string]*host{}
	for _, hs := range h.hosts {
		hostByName[hs.Name] = hs
	}
	var unreported, requeued []Info
	// The chicks, taken under the lock (the map changes after it).
	cs := make([]*chick, len(actions))
	for i, a := range actions {
		c := h.chicks[a.Chick]
		cs[i] = c
		hs := hostByName[a.Host]
		switch a.Kind {
		case actRequeue:
			c.rec.State = StateQueued
			c.rec.TokenHash = ""
			if a.ClearContainer {
				c.rec.ContainerID = ""
				h.logger.Info("chick created but never started before the restart; starting it again", "chick", a.Chick, "container", short(a.Container))
			}
			h.persist(c)
			h.queue = append(h.queue, c)
			requeued = append(requeued, h.info(c))
		case actDetach:
			if hs != nil {
				c.host = hs
				hs.running++
				c.lastSeen = now.Add(h.grace)
				c.detached = true // decided when the host answers again
			}
		case actKeep:
			c.host = hs
		case actReap:
			if a.MarkRemoved {
				c.host = hs
				c.rec.Removed = true
				h.persist(c)
			}
		case actEnd:
			if hs != nil {
				c.host = hs
				c.rec.ContainerID = a.Container
				hs.running++
				if c.rec.State == StateQueued {
					c.rec.State = StateStarting
				}
			}
		case actResume:
			c.host = hs
			c.rec.ContainerID = a.Container
			hs.running++
			c.rec.State = StateRunning
			c.lastSeen = now.Add(h.grace)
			h.persist(c)
		case actAnnounce:
			unreported = append(unreported, h.info(c))
		}
	}
	for _, c := range h.chicks {
		c.restored = false
	}
	h.mu.Unlock()

	for _, a := range actions {
		switch a.Kind {
		case actKeep:
			h.keepTimer(a.After, a.Chick)
		case actReap:
			h.logger.Warn("reaping stray chick container", "container", short(a.Container), "chick", a.Chick, "host", a.Host)
			h.removeContainer(hostByName[a.Host], a.Container)
		}
	}
	for i, a := range actions {
		if a.Kind != actEnd {
			continue
		}
		c := cs[i]
		if a.WithResult {
			h.exited(c, 0)
			continue
		}
		h.mu.Lock()
		h.endLocked(c, a.Reason, a.Outcome)
	}
	for i, a := range actions {
		if a.Kind == actResume {
			h.resume(cs[i])
		}
	}
	// A requeued chick is the restarted Mother's as much as a resumed one:
	// her channel view of it starts now, not at its first event, so
	// nothing (the terminal's end of input, for one) takes her for idle
	// while it waits for its slot.
	for _, in := range requeued {
		h.obs.ChickResumed(in)
	}
	for _, in := range unreported {
		h.logger.Info("chick ended before the restart without its end being reported; reporting it now", "chick", in.ID, "state", in.State)
		h.obs.ChickEnded(in)
	}
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
	h.obs.ChickResumed(info)
}
