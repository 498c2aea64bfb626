package hatchery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
)

// startContainer creates and starts c's container.
func (h *Hatchery) startContainer(c *chick, hs *host, tok string) {
	id := c.rec.ID
	labels := map[string]string{
		LabelChickID:  id,
		LabelChannel:  chat.QualifiedID(c.rec.Adapter, c.rec.ChannelID),
		LabelInstance: h.instance,
		LabelTier:     c.rec.Tier,
	}
	env := []string{EnvToken + "=" + tok, EnvChickID + "=" + id, "HOME=" + Workspace, "TMPDIR=/tmp"}
	if h.caPEM != "" {
		// Public: how the chick recognises Mother (not a secret).
		env = append(env, EnvCA+"="+h.caPEM)
	}
	spec := ContainerSpec{
		Name: "mother-chick-" + id + "-" + h.instance, Image: h.cfg.Image, Command: h.command, Labels: labels,
		Env: append([]string{EnvAddr + "=" + hs.MotherAddress}, env...), Network: h.cfg.Network, Resources: h.cfg.Resources, Hardening: h.cfg.Hardening,
		Deadline: h.cfg.Timeout.Duration, KillGrace: h.cfg.KillGrace.Duration,
	}
	if hs.gated {
		// No network but its loopback; the gate's sockets its way out.
		ctx, cancel := h.dctx()
		vol, err := h.ensureGate(ctx, hs)
		cancel()
		if unreachable(err) {
			h.requeue(c, hs, err)
			return
		}
		if err != nil {
			if errors.Is(err, ErrImageMissing) {
				defer h.lacksImage(hs) // after this chick's own end
			}
			h.failStart(c, "", err)
			return
		}
		spec.Network = config.NetworkNone
		spec.GateVolume = vol
		spec.Env = append(env, h.isolatedEnv(hs, id)...) // MOTHER_ADDR: the gate's nest socket
	}
	ctx, cancel := h.dctx()
	cid, err := hs.Runtime.Create(ctx, spec)
	cancel()
	if err != nil {
		if unreachable(err) {
			h.requeue(c, hs, err)
			return
		}
		if errors.Is(err, ErrContainerNotFound) {
			defer h.lacksImage(hs) // after this chick's own end
			err = fmt.Errorf("the image %s is not on Docker host %s: build it with `make image` there, or set chicks.image (%w: %w)", h.cfg.Image, hs.Name, ErrImageMissing, err)
		}
		h.failStart(c, "", fmt.Errorf("create chick container: %w", err))
		return
	}
	h.mu.Lock()
	c.rec.ContainerID = cid
	h.persist(c)
	stopped := c.stopped
	h.mu.Unlock()
	if stopped {
		h.failStart(c, cid, errors.New("stopped before it started"))
		return
	}
	// The chick fetches its files from the nest once it joined
	// (FetchFiles): nothing to copy in here.
	// Wait before start, so a fast exit is not missed.
	wctx, wcancel := context.WithCancel(context.WithoutCancel(h.ctx))
	exitCh := hs.Runtime.Wait(wctx, cid, true)
	ctx, cancel = h.dctx()
	err = hs.Runtime.Start(ctx, cid)
	cancel()
	if err != nil {
		wcancel()
		if unreachable(err) {
			h.requeue(c, hs, err)
			return
		}
		h.failStart(c, cid, fmt.Errorf("start chick container: %w", err))
		return
	}
	h.mu.Lock()
	if c.rec.State == StateStarting {
		c.rec.State = StateRunning
	}
	h.persist(c)
	h.armTimeout(c, h.cfg.Timeout.Duration)
	stopped = c.stopped
	h.mu.Unlock()
	h.logger.Info("chick running", "chick", id, "container", short(cid))
	if stopped {
		// A kill arrived while the container was starting.
		h.killContainer(c)
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer wcancel()
		h.waitExit(c, exitCh)
	}()
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// failStart ends a chick whose container could not be started.
func (h *Hatchery) failStart(c *chick, cid string, err error) {
	if cid != "" {
		h.removeContainer(c.host, cid)
	}
	h.mu.Lock()
	reason, outcome := ReasonNoStart, "could not start: "+err.Error()
	if c.stopped && c.reason != "" {
		reason, outcome = c.reason, c.outcome
	}
	if errors.Is(err, ErrImageMissing) {
		// A step still to do, said by setImageLocked; not Mother's fault.
		h.logger.Warn("chick did not start", "chick", c.rec.ID, "err", err)
	} else {
		h.logger.Error("chick did not start", "chick", c.rec.ID, "err", err)
	}
	c.rec.Removed = true
	h.endLocked(c, reason, outcome)
}

// armTimeout schedules the wall-clock limit. Callers hold h.mu.
func (h *Hatchery) armTimeout(c *chick, d time.Duration) {
	if d <= 0 {
		return
	}
	id := c.rec.ID
	limit := h.cfg.Timeout.Duration
	c.timers = append(c.timers, h.clock.AfterFunc(d, func() {
		_, _ = h.Stop(id, ReasonTimeout, fmt.Sprintf("timed out after %s", limit), h.cfg.KillGrace.Duration)
	}))
}

// waitExit waits for c's container to exit and ends the chick.
func (h *Hatchery) waitExit(c *chick, exitCh <-chan Exit) {
	var code int64 = -1
	var ended string
	select {
	case ex := <-exitCh:
		if ex.Err == nil {
			code, ended = ex.Code, ex.Ended
			break
		}
		err := ex.Err
		if h.ctx.Err() != nil {
			return // Mother is closing; the chick lives on
		}
		h.logger.Warn("lost track of chick container; checking", "chick", c.rec.ID, "err", err)
		ctx, cancel := h.dctx()
		insp, ierr := c.host.Runtime.Inspect(ctx, c.rec.ContainerID)
		cancel()
		if unreachable(ierr) {
			// The chick may well live on (it talks to Mother, not to
			// Docker); its host is looked at again when it answers.
			h.mu.Lock()
			h.markDownLocked(c.host, ierr)
			c.detached = true
			h.mu.Unlock()
			return
		}
		if ierr == nil && insp.Running {
			// Still running: wait again.
			wctx, wcancel := context.WithCancel(context.WithoutCancel(h.ctx))
			defer wcancel()
			h.waitExit(c, c.host.Runtime.Wait(wctx, c.rec.ContainerID, false))
			return
		}
		if ierr == nil {
			code, ended = insp.ExitCode, insp.Ended
		}
	case <-h.ctx.Done():
		return
	}
	h.exitedWhy(c, code, ended)
}

// exited ends a chick whose container has exited.
func (h *Hatchery) exited(c *chick, code int64) { h.exitedWhy(c, code, "") }

// exitedWhy ends a chick whose container has exited, or was ended by its
// engine for the reason ended (an evicted Pod, a lost node): a chick
// without a result then ends lost, saying why.
func (h *Hatchery) exitedWhy(c *chick, code int64, ended string) {
	h.mu.Lock()
	if c.rec.State.Final() {
		h.mu.Unlock()
		return
	}
	c.exited = true
	c.rec.ExitCode = code
	reason, outcome := c.reason, c.outcome
	if ended != "" {
		h.logger.Warn("chick's container was ended by its engine", "chick", c.rec.ID, "host", c.rec.Host, "why", ended)
	}
	if reason == "" {
		if r := c.rec.Result; r != nil {
			reason, outcome = resultReason(r)
		} else if ended != "" {
			reason, outcome = ReasonLost, "lost: "+ended
		} else {
			reason = ReasonCrashed
			outcome = fmt.Sprintf("crashed: the chick exited with code %d without a result", code)
		}
	}
	h.endLocked(c, reason, outcome)
}

func resultReason(r *Result) (Reason, string) {
	switch r.StopReason {
	case string(agent.StopDone), "":
		return ReasonDone, "done"
	case string(agent.StopBudget):
		return ReasonBudget, "budget exhausted: " + firstLine(r.Error)
	case string(agent.StopAborted):
		return ReasonKilled, "cancelled"
	}
	msg := r.Error
	if msg == "" {
		msg = r.StopReason
	}
	return ReasonError, "failed: " + firstLine(msg)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// endLocked makes c final, persists it, frees its slot, schedules the
// container's removal and tells the observer. Called with h.mu held; it
// unlocks.
func (h *Hatchery) endLocked(c *chick, reason Reason, outcome string) {
	if c.rec.State.Final() {
		h.mu.Unlock()
		return
	}
	wasActive := c.rec.State == StateStarting || c.rec.State == StateRunning || c.rec.State == StateStopping
	var ran time.Duration
	if !c.rec.StartedAt.IsZero() {
		ran = clock.Since(h.clock, c.rec.StartedAt)
	}
	switch reason {
	case ReasonDone:
		c.rec.State = StateDone
	case ReasonKilled, ReasonBudget, ReasonShutdown, ReasonFlooding:
		c.rec.State = StateKilled
	default:
		c.rec.State = StateFailed
	}
	c.rec.Reason, c.rec.Outcome = reason, outcome
	c.rec.EndedAt = h.clock.Now()
	for _, t := range c.timers {
		t.Stop()
	}
	c.timers = nil
	if !c.stopped {
		c.stopped = true
		close(c.stopCh)
	}
	if c.events != nil {
		c.events.Close()
		c.events = nil
	}
	if err := h.closeEgressLocked(c); err != nil {
		h.logger.Warn("chick egress log not closed cleanly", "chick", c.rec.ID, "err", err)
	}
	if i := slices.Index(h.queue, c); i >= 0 {
		h.queue = slices.Delete(h.queue, i, i+1)
	}
	if wasActive && c.host != nil {
		c.host.running--
	}
	cid, hs := c.rec.ContainerID, c.host
	keep := h.cfg.KeepFor.Duration
	// On a host that is down the container stays recorded as not removed:
	// reconcileHost reaps it when the host is back.
	needRemove := cid != "" && hs != nil && !c.rec.Removed && !hs.health.down
	if needRemove {
		if keep > 0 {
			c.rec.KeepUntil = c.rec.EndedAt.Add(keep)
		} else {
			c.rec.Removed = true
		}
	}
	c.rec.Unreported = true
	h.persist(c)
	info := h.info(c)
	h.obs.finished(c.rec, ran)
	h.dequeueLocked()
	h.pruneLocked()
	h.mu.Unlock()
	// Ended means cleaned up: the container is gone (or kept, stopped).
	defer close(c.ended)

	h.logger.Info("chick ended", "chick", info.ID, "state", info.State, "reason", reason, "tokens", info.Usage.Total())
	if needRemove {
		if keep > 0 {
			id := info.ID
			h.keepTimer(keep, id)
			// Kept for inspection, but never left running.
			ctx, cancel := h.dctx()
			_ = hs.Runtime.Kill(ctx, cid, "KILL")
			cancel()
		} else {
			h.removeContainer(hs, cid)
		}
	}
	if wasActive && hs != nil && hs.gated {
		// Its container gone: the gate kept for it (and its like) may
		// be replaced now.
		h.mu.Lock()
		h.renewGateWhenIdleLocked(hs)
		h.mu.Unlock()
	}
	h.obs.ChickEnded(info)
}

// keepTimer schedules the removal of a container kept for inspection.
func (h *Hatchery) keepTimer(d time.Duration, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.keeps = append(h.keeps, h.clock.AfterFunc(d, func() { h.expire(id) }))
}

// expire removes a container kept for inspection.
func (h *Hatchery) expire(id string) {
	h.mu.Lock()
	c, ok := h.chicks[id]
	if !ok || c.rec.Removed || c.host == nil {
		h.mu.Unlock()
		return
	}
	c.rec.Removed = true
	h.persist(c)
	hs, cid := c.host, c.rec.ContainerID
	h.pruneLocked()
	h.mu.Unlock()
	h.removeContainer(hs, cid)
}

func (h *Hatchery) removeContainer(hs *host, cid string) {
	if hs == nil || cid == "" {
		return
	}
	// The engine may still be tearing down an exited container; a remove
	// then can answer without removing. Check, and try again.
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		ctx, cancel := h.dctx()
		err := hs.Runtime.Remove(ctx, cid)
		if err == nil || errors.Is(err, ErrContainerNotFound) {
			_, ierr := hs.Runtime.Inspect(ctx, cid)
			cancel()
			if errors.Is(ierr, ErrContainerNotFound) {
				return
			}
			err = fmt.Errorf("still there after remove (%v)", ierr)
		} else {
			cancel()
		}
		if attempt == 6 || h.ctx.Err() != nil {
			h.logger.Warn("cannot remove chick container", "container", short(cid), "err", err)
			return
		}
		h.logger.Debug("retrying container removal", "container", short(cid), "err", err)
		// Closing cuts the wait short; the next failure then gives up.
		_ = clock.Sleep(h.ctx, h.clock, wait)
		wait *= 2
	}
}

func (h *Hatchery) killContainer(c *chick) {
	h.mu.Lock()
	hs, cid := c.host, c.rec.ContainerID
	h.mu.Unlock()
	if hs == nil || cid == "" {
		return
	}
	ctx, cancel := h.dctx()
	err := hs.Runtime.Kill(ctx, cid, "KILL")
	cancel()
	if unreachable(err) {
		h.mu.Lock()
		h.markDownLocked(hs, err)
		h.mu.Unlock()
		h.hostGone(c)
		return
	}
	if err != nil && !errors.Is(err, ErrContainerNotFound) && !errors.Is(err, ErrConflict) {
		h.logger.Warn("cannot kill chick container", "container", short(cid), "err", err)
	}
}

// Stop ends a chick in two steps: it asks the chick to cancel (the nest
// sends the cancellation), then kills the container after grace. A queued
// chick is dropped at once. Stopping a chick that is already stopping or
// has ended is not an error: Stop returns its state.
func (h *Hatchery) Stop(id string, reason Reason, outcome string, grace time.Duration) (State, error) {
	h.mu.Lock()
	c, ok := h.chicks[id]
	if !ok {
		h.mu.Unlock()
		return "", fmt.Errorf("stop chick %s: %w", id, ErrUnknownChick)
	}
	switch {
	case c.rec.State.Final():
		st := c.rec.State
		h.mu.Unlock()
		return st, nil
	case c.rec.State == StateQueued:
		h.endLocked(c, reason, outcome)
		return h.State(id), nil
	case c.stopped:
		// Already stopping: a second stop may shorten the grace.
		st := c.rec.State
		if grace <= 0 {
			h.mu.Unlock()
			h.killContainer(c)
			return st, nil
		}
		h.mu.Unlock()
		return st, nil
	}
	c.stopped = true
	c.reason, c.outcome = reason, outcome
	close(c.stopCh)
	c.rec.State = StateStopping
	h.persist(c)
	h.logger.Info("stopping chick", "chick", id, "reason", reason, "grace", grace)
	if grace > 0 {
		c.timers = append(c.timers, h.clock.AfterFunc(grace, func() { h.killContainer(c) }))
		h.mu.Unlock()
	} else {
		h.mu.Unlock()
		h.killContainer(c)
	}
	return StateStopping, nil
}

// Logs writes the container output of chick id to w (demultiplexed);
// follow streams until the container exits or ctx ends.
func (h *Hatchery) Logs(ctx context.Context, id string, follow bool, w io.Writer) error {
	h.mu.Lock()
	c, ok := h.chicks[id]
	if !ok {
		h.mu.Unlock()
		return fmt.Errorf("chick %s: %w", id, ErrUnknownChick)
	}
	hs, cid, removed := c.host, c.rec.ContainerID, c.rec.Removed
	h.mu.Unlock()
	if cid == "" || hs == nil {
		return fmt.Errorf("chick %s has no container yet", id)
	}
	if removed {
		return fmt.Errorf("chick %s: its container was removed when it ended (set chicks.keepFor to keep ended chicks for inspection)", id)
	}
	if err := hs.Runtime.Logs(ctx, cid, follow, w); err != nil {
		if errors.Is(err, ErrContainerNotFound) {
			return fmt.Errorf("chick %s: its container is gone", id)
		}
		return fmt.Errorf("chick %s logs: %w", id, err)
	}
	return nil
}
