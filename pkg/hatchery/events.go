package hatchery

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/jsonl"
)

// maxEventBuf is the largest batch buffer a chick keeps between batches.
const maxEventBuf = 256 << 10

// LastSeq is the highest event sequence number stored (and fsynced) for
// chick id.
func (h *Hatchery) LastSeq(id string) (uint64, error) {
	h.mu.Lock()
	c, ok := h.chicks[id]
	if !ok {
		h.mu.Unlock()
		return 0, ErrUnknownChick
	}
	if err := h.openEventsLocked(c); err != nil {
		h.mu.Unlock()
		return 0, err
	}
	h.mu.Unlock()
	c.evMu.Lock()
	defer c.evMu.Unlock()
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
	j, _, err := jsonl.OpenWith(path, jsonl.Options{Sync: true, Kind: fsync.KindChickEvents})
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
// sequence number (the ack); see RecordEvents.
func (h *Hatchery) RecordEvent(id string, seq uint64, ev agent.Event) (uint64, error) {
	return h.RecordEvents(id, []SeqEvent{{Seq: seq, Event: ev}})
}

// SeqEvent is a chick's event with its sequence number.
type SeqEvent struct {
	Seq   uint64
	Event agent.Event
}

// RecordEvents stores a batch of chick id's events, in sequence order,
// with one write and one fsync (group commit), and returns the highest
// stored sequence number: the cumulative ack, given only once the fsync
// that covers those events has returned. Duplicates (seq already stored)
// are dropped; a gap is an error after the events before it are stored
// (the chick resends from the ack). The observers hear each new event
// once it is written, while its fsync runs: seeing an event is not its
// acknowledgement.
func (h *Hatchery) RecordEvents(id string, evs []SeqEvent) (uint64, error) {
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
	j := c.events
	info := h.info(c)
	h.mu.Unlock()

	c.evMu.Lock()
	last := c.lastSeq
	if c.evEnc == nil {
		c.evEnc = json.NewEncoder(&c.evBuf) // the same bytes as json.Marshal, and a newline
	}
	c.evBuf.Reset()
	var gap error
	fresh := make([]SeqEvent, 0, len(evs))
	for _, e := range evs {
		if e.Seq <= last {
			continue
		}
		if e.Seq != last+1 {
			gap = fmt.Errorf("%w: got %d after %d", ErrSeqGap, e.Seq, last)
			break
		}
		mark := c.evBuf.Len()
		if err := c.evEnc.Encode(storedEvent(e)); err != nil {
			c.evBuf.Truncate(mark)
			gap = fmt.Errorf("encode chick event %d: %w", e.Seq, err)
			break
		}
		fresh = append(fresh, e)
		last = e.Seq
	}
	buf := c.evBuf.Bytes()
	if c.evBuf.Cap() > maxEventBuf {
		// An exceptional batch: do not keep its buffer for the chick's life.
		c.evBuf = bytes.Buffer{}
	}
	if len(buf) > 0 {
		// Written, then shown, then fsynced and acknowledged: the
		// observers render the events while the fsync runs (rendering is
		// no acknowledgement; if the fsync fails the chick resends them).
		_, end, err := j.Write(buf)
		if err == nil {
			for _, e := range fresh {
				h.obs.ChickEvent(info, e.Event)
			}
			err = j.Commit(end)
		}
		if err != nil {
			acked := c.lastSeq
			c.evMu.Unlock()
			h.mu.Lock()
			final := c.rec.State.Final()
			h.mu.Unlock()
			if final {
				return acked, ErrChickEnded
			}
			return acked, err
		}
		c.lastSeq = last
	}
	acked := c.lastSeq
	c.evMu.Unlock()
	if len(fresh) > 0 {
		h.mu.Lock()
		wakeFollowersLocked(c)
		h.mu.Unlock()
	}
	return acked, gap
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
