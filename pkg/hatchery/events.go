package hatchery

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
	if err := fsync.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("chick events: %w", err)
	}
	path := filepath.Join(dir, "events.jsonl")
	j, _, err := jsonl.OpenWith(path, jsonl.Options{Sync: true, Kind: fsync.KindChickEvents})
	if err != nil {
		return fmt.Errorf("chick events: %w", err)
	}
	mark := j.Mark()
	last := lastStoredSeq(path, mark.End)
	c.events, c.lastSeq, c.written, c.evPos = j, last, last, mark
	return nil
}

// lastStoredSeq is the highest sequence number in the events file at
// path, up to size.
func lastStoredSeq(path string, size int64) uint64 {
	var last uint64
	_ = jsonl.Scan(path, 0, size, func(line []byte, _, _ int64) error {
		var se storedEvent
		if json.Unmarshal(line, &se) == nil && se.Seq > last {
			last = se.Seq
		}
		return nil
	})
	return last
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
	w, gap, err := h.WriteEvents(id, evs)
	if errors.Is(err, ErrFlooding) {
		// The events before the one refused are kept.
		if ack, cerr := h.CommitEvents(id, w); cerr == nil {
			return ack, err
		}
		return w.Acked, err
	}
	if err != nil {
		return w.Acked, err
	}
	ack, err := h.CommitEvents(id, w)
	if err != nil {
		return ack, err
	}
	return ack, gap
}

// Written is what WriteEvents wrote: the events file up to End holds every
// event up to Seq; Acked is what was already durable.
type Written struct {
	End   int64
	Seq   uint64
	Acked uint64
	// pos is End as the events file gave it, for its Commit.
	pos jsonl.Pos
}

// WriteEvents is RecordEvents' first half: the new events of the batch
// written with one write(2) and shown to the observers, not yet fsynced.
// CommitEvents with what it returns makes them durable and gives the ack.
// A session may write its next batch while the fsync of the one before
// runs: an event is shown without waiting for the fsync of the events
// before it. Duplicates of events already written (not only those already
// durable) are dropped; a gap is returned as gap, after the events before
// it are written. An event that would take the chick's stored events past
// chicks.events.maxBytes is not written, nor any after it: the chick is
// stopped for flooding and err matches ErrFlooding, with w covering the
// events written before it (commit them).
func (h *Hatchery) WriteEvents(id string, evs []SeqEvent) (w Written, gap, err error) {
	h.mu.Lock()
	c, ok := h.chicks[id]
	if !ok {
		h.mu.Unlock()
		return Written{}, nil, ErrUnknownChick
	}
	if c.rec.State.Final() {
		h.mu.Unlock()
		return Written{}, nil, ErrChickEnded
	}
	h.heardLocked(c)
	if err := h.openEventsLocked(c); err != nil {
		h.mu.Unlock()
		return Written{}, nil, err
	}
	j := c.events
	info := h.info(c)
	h.mu.Unlock()

	c.evMu.Lock()
	defer c.evMu.Unlock()
	for attempt := 0; ; attempt++ {
		w, gap, err = h.writeEventsLocked(c, j, info, evs)
		if !errors.Is(err, jsonl.ErrCut) || attempt == 2 {
			return w, gap, err
		}
	}
}

// writeEventsLocked is WriteEvents with c.evMu held. It fails with
// jsonl.ErrCut when the events file was cut back after a failure just
// before its write: it is then called again.
func (h *Hatchery) writeEventsLocked(c *chick, j *jsonl.File, info Info, evs []SeqEvent) (w Written, gap, err error) {
	if j.CutSince(c.evPos) {
		// A failure cut the events file back to what was durable
		// (jsonl.File): what it holds now is the chick's stored events,
		// written and durable, whatever the commits in flight then had
		// counted. The chick resends from its ack; what the file holds
		// is dropped as a duplicate, the rest taken again.
		if err := j.Recover(); err != nil {
			return Written{Acked: c.lastSeq}, nil, h.endedOr(c, err)
		}
		mark := j.Mark()
		c.written = lastStoredSeq(j.Path(), mark.End)
		c.lastSeq = max(c.lastSeq, c.written)
		c.evPos = mark
	}
	last := c.written
	if c.evEnc == nil {
		c.evEnc = json.NewEncoder(&c.evBuf) // the same bytes as json.Marshal, and a newline
	}
	c.evBuf.Reset()
	fresh := make([]SeqEvent, 0, len(evs))
	// The events stored for a chick never pass chicks.events.maxBytes:
	// the one that would is not written (nor any after it), and the
	// chick is stopped for flooding.
	room := h.evLimits.MaxBytes - j.Size()
	var flooded string
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
		if int64(c.evBuf.Len()) > room {
			c.evBuf.Truncate(mark)
			gap = nil
			flooded = fmt.Sprintf("its events passed the %s stored for a chick (chicks.events.maxBytes)", formatBytes(h.evLimits.MaxBytes))
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
		// Written, then shown, then (CommitEvents) fsynced and
		// acknowledged: the observers render the events while the fsync
		// runs (rendering is no acknowledgement; if the fsync fails the
		// chick resends them).
		_, pos, err := j.WriteAfter(c.evPos, buf)
		if err != nil {
			return Written{Acked: c.lastSeq}, nil, h.endedOr(c, err)
		}
		c.evPos = pos
		for _, e := range fresh {
			h.obs.ChickEvent(info, e.Event)
		}
		c.written = last
	}
	// The last write's end covers every event written so far, this
	// session's or an earlier one's whose fsync has not returned yet (and
	// its commit fails if a failure has cut them away since).
	w = Written{End: c.evPos.End, Seq: c.written, Acked: c.lastSeq, pos: c.evPos}
	if flooded != "" {
		// What was written is still for the caller to commit. The chick
		// is stopped without evMu held: Stop may call its engine.
		c.evMu.Unlock()
		err = h.flood(c, flooded)
		c.evMu.Lock()
		return w, nil, err
	}
	return w, gap, nil
}

// CommitEvents is RecordEvents' second half: it waits for an fsync that
// covers w (shared with whatever else was written meanwhile) and returns
// the ack, the highest durable sequence number. If the fsync fails, the
// events file is cut back to what was durable (jsonl.File) and the next
// WriteEvents takes up what it holds, so that the chick's resend from its
// last ack is taken again; none of the events not durable is acknowledged.
func (h *Hatchery) CommitEvents(id string, w Written) (uint64, error) {
	h.mu.Lock()
	c, ok := h.chicks[id]
	var j *jsonl.File
	if ok {
		j = c.events
	}
	h.mu.Unlock()
	if !ok {
		return 0, ErrUnknownChick
	}
	if j == nil {
		return w.Acked, h.endedOr(c, errors.New("chick events: not open"))
	}
	err := j.Commit(w.pos)
	c.evMu.Lock()
	if err != nil {
		acked := c.lastSeq
		c.evMu.Unlock()
		return acked, h.endedOr(c, err)
	}
	advanced := w.Seq > c.lastSeq
	if advanced {
		c.lastSeq = w.Seq
	}
	acked := c.lastSeq
	c.evMu.Unlock()
	if advanced {
		h.mu.Lock()
		wakeFollowersLocked(c)
		h.mu.Unlock()
	}
	return acked, nil
}

// endedOr is ErrChickEnded if chick c has ended meanwhile, else err.
func (h *Hatchery) endedOr(c *chick, err error) error {
	h.mu.Lock()
	final := c.rec.State.Final()
	h.mu.Unlock()
	if final {
		return ErrChickEnded
	}
	return err
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
