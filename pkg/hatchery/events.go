package hatchery

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/jsonl"
)

// LastSeq is the highest event sequence number stored for chick id.
func (h *Hatchery) LastSeq(id string) (uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.chicks[id]
	if !ok {
		return 0, ErrUnknownChick
	}
	if err := h.openEventsLocked(c); err != nil {
		return 0, err
	}
	return c.lastSeq, nil
}

type storedEvent struct {
	Seq   uint64      `json:"seq"`
	Event agent.Event `json:"event"`
}

// openEventsLocked opens c's event log and finds its last sequence number.
func (h *Hatchery) openEventsLocked(c *chick) error {
	if c.events != nil || c.rec.State.Final() {
		return nil
	}
	dir := filepath.Join(h.dir, c.rec.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("chick events: %w", err)
	}
	path := filepath.Join(dir, "events.jsonl")
	j, _, err := jsonl.Open(path, true)
	if err != nil {
		return fmt.Errorf("chick events: %w", err)
	}
	var last uint64
	_ = jsonl.Scan(path, 0, j.Size(), func(line []byte, _, _ int64) error {
		var se storedEvent
		if json.Unmarshal(line, &se) == nil && se.Seq > last {
			last = se.Seq
		}
		return nil
	})
	c.events, c.lastSeq = j, last
	return nil
}

// RecordEvent stores one event of chick id and returns the highest stored
// sequence number (the ack). A duplicate (seq already stored) is dropped;
// a gap is an error (the chick resends from the ack).
func (h *Hatchery) RecordEvent(id string, seq uint64, ev agent.Event) (uint64, error) {
	h.mu.Lock()
	c, ok := h.chicks[id]
	if !ok {
		h.mu.Unlock()
		return 0, ErrUnknownChick
	}
	if c.rec.State.Final() {
		h.mu.Unlock()
		return 0, ErrChickEnded
	}
	h.heardLocked(c)
	if err := h.openEventsLocked(c); err != nil {
		h.mu.Unlock()
		return 0, err
	}
	if seq <= c.lastSeq {
		last := c.lastSeq
		h.mu.Unlock()
		return last, nil
	}
	if seq != c.lastSeq+1 {
		last := c.lastSeq
		h.mu.Unlock()
		return last, fmt.Errorf("%w: got %d after %d", ErrSeqGap, seq, last)
	}
	if _, _, err := c.events.Append(storedEvent{Seq: seq, Event: ev}); err != nil {
		last := c.lastSeq
		h.mu.Unlock()
		return last, err
	}
	c.lastSeq = seq
	wakeFollowersLocked(c)
	info := h.info(c)
	h.mu.Unlock()
	h.obs.ChickEvent(info, ev)
	return seq, nil
}

// Finish records chick id's result. The container is expected to exit by
// itself; it is killed if it has not after the kill grace.
func (h *Hatchery) Finish(id string, r Result) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.chicks[id]
	if !ok {
		return ErrUnknownChick
	}
	if c.rec.Result != nil || c.rec.State.Final() {
		return nil // a resend after a reconnect
	}
	h.heardLocked(c)
	c.rec.Result = &r
	h.persist(c)
	grace := h.cfg.KillGrace.Duration
	if grace <= 0 {
		grace = 10 * time.Second
	}
	c.timers = append(c.timers, h.clock.AfterFunc(grace, func() { h.killContainer(c) }))
	return nil
}
