package hatchery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/jsonl"
)

// StoredEvent is one event of a chick as the hatchery stored it.
type StoredEvent struct {
	// Seq is the chick's sequence number, from 1, gapless.
	Seq   uint64
	Event agent.Event
}

// FollowEvents calls f with each event stored for chick id, in order,
// from <dir>/<id>/events.jsonl. With follow it then waits and calls f with
// each new event as it is stored, until the chick ends (every event it
// stored has then been passed on), ctx ends (ctx's error) or f returns an
// error (that error). Without follow, or for a chick that already ended,
// it returns once the stored events are passed on. An unknown chick is
// ErrUnknownChick.
func (h *Hatchery) FollowEvents(ctx context.Context, id string, follow bool, f func(StoredEvent) error) error {
	path := filepath.Join(h.dir, id, "events.jsonl")
	var off int64
	var last uint64
	for {
		h.mu.Lock()
		c, ok := h.chicks[id]
		if !ok {
			h.mu.Unlock()
			return fmt.Errorf("chick %s: %w", id, ErrUnknownChick)
		}
		final := c.rec.State.Final()
		// Taken before reading: an event stored after this point closes
		// it, so none is missed between the read and the wait.
		if c.newEvent == nil {
			c.newEvent = make(chan struct{})
		}
		wake, ended := c.newEvent, c.ended
		h.mu.Unlock()

		err := jsonl.Scan(path, off, -1, func(line []byte, _, end int64) error {
			off = end
			var se storedEvent
			if json.Unmarshal(line, &se) != nil || se.Seq <= last {
				return nil // a torn or repeated line: RecordEvent never stores one
			}
			last = se.Seq
			return f(StoredEvent(se))
		})
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if !follow || final {
			return nil
		}
		select {
		case <-wake:
		case <-ended:
			// One more read picks up what was stored before the end.
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// wakeFollowersLocked tells FollowEvents callers of c that an event was
// stored.
func wakeFollowersLocked(c *chick) {
	if c.newEvent != nil {
		close(c.newEvent)
		c.newEvent = nil
	}
}
