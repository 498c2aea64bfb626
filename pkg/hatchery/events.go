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
	return c.ackedSeq, nil
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
	c.events, c.lastSeq, c.ackedSeq = j, last, last
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
// acknowledgement. It is WriteEvents and the Wait of what that returns.
func (h *Hatchery) RecordEvents(id string, evs []SeqEvent) (uint64, error) {
	cm, gap, err := h.WriteEvents(id, evs)
	if err != nil {
		return cm.acked, err
	}
	ack, err := cm.Wait()
	if err != nil {
		return ack, err
	}
	return ack, gap
}

// EventsCommit is a batch of events written and not yet known to be on
// disk: Wait returns the cumulative ack once they are.
type EventsCommit struct {
	h     *Hatchery
	c     *chick
	j     *jsonl.File
	end   int64
	last  uint64
	acked uint64 // the ack as it was when the batch was written
}

// Wait returns once every event written up to this batch is on disk (the
// fsync joined or run covers any written before it too), with the
// cumulative ack: the highest sequence number fsynced. After a failed
// fsync it returns the ack as it was and the error.
func (cm EventsCommit) Wait() (uint64, error) {
	if cm.j == nil {
		return cm.acked, nil
	}
	if err := cm.j.Commit(cm.end); err != nil {
		cm.h.mu.Lock()
		final := cm.c.rec.State.Final()
		cm.h.mu.Unlock()
		if final {
			return cm.acked, ErrChickEnded
		}
		return cm.acked, err
	}
	cm.c.evMu.Lock()
	defer cm.c.evMu.Unlock()
	cm.c.ackedSeq = max(cm.c.ackedSeq, cm.last)
	return cm.c.ackedSeq, nil
}

// WriteEvents is the first half of RecordEvents: it writes the batch's
// new events with one write and shows them to the observers, and returns
// at once with the commit to Wait for, so that a caller can take and show
// the next batch while this one's fsync runs (the nest does, so a chick's
// event is not held up behind the fsync of the one before). A gap is
// returned beside the commit of the events before it.
func (h *Hatchery) WriteEvents(id string, evs []SeqEvent) (cm EventsCommit, gap, err error) {
	h.mu.Lock()
	c, ok := h.chicks[id]
	if !ok {
		h.mu.Unlock()
		return cm, nil, ErrUnknownChick
	}
	if c.rec.State.Final() {
		h.mu.Unlock()
		return cm, nil, ErrChickEnded
	}
	h.heardLocked(c)
	if err := h.openEventsLocked(c); err != nil {
		h.mu.Unlock()
		return cm, nil, err
	}
	j := c.events
	info := h.info(c)
	h.mu.Unlock()

	c.evMu.Lock()
	last := c.lastSeq
	cm = EventsCommit{h: h, c: c, j: j, acked: c.ackedSeq}
	if c.evEnc == nil {
		c.evEnc = json.NewEncoder(&c.evBuf) // the same bytes as json.Marshal, and a newline
	}
	c.evBuf.Reset()
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
	// Written, then shown, then fsynced and acknowledged (Wait): the
	// observers render the events while the fsync runs (rendering is no
	// acknowledgement; if the fsync fails the chick resends them).
	cm.end = j.Size() // a batch of duplicates waits for what was written before
	if len(buf) > 0 {
		_, end, werr := j.Write(buf)
		if werr != nil {
			c.evMu.Unlock()
			h.mu.Lock()
			final := c.rec.State.Final()
			h.mu.Unlock()
			if final {
				return cm, nil, ErrChickEnded
			}
			return cm, nil, werr
		}
		cm.end = end
		for _, e := range fresh {
			h.obs.ChickEvent(info, e.Event)
		}
		c.lastSeq = last
	}
	cm.last = c.lastSeq
	c.evMu.Unlock()
	if len(fresh) > 0 {
		h.mu.Lock()
		wakeFollowersLocked(c)
		h.mu.Unlock()
	}
	return cm, gap, nil
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
