package events

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mother-chat/mother/pkg/atomicfile"
)

// MaxFailures is how many failed runs in a row pause a periodic event
// (Mother decides it, from Firing.Failures).
const MaxFailures = 3

// Pause is Mother's decision, given with a run's Result, that a periodic
// event stops running for a while: until its money cap resets, or until
// someone resumes it.
type Pause struct {
	// Until is when it runs again by itself; zero: not by itself (the
	// resume_event tool, Watcher.Resume, or a change to its file resumes
	// it).
	Until time.Time
	// Reason says why, for list_events and momctl.
	Reason string
}

// health is what the watcher keeps of a periodic event between its runs
// (<state>/health/<file>): its failed runs in a row and its pause. Sum is
// the file's content hash: a changed file starts afresh.
type health struct {
	Sum      string    `json:"sum"`
	Failures int       `json:"failures,omitempty"`
	Paused   bool      `json:"paused,omitempty"`
	Until    time.Time `json:"until,omitzero"`
	Since    time.Time `json:"since,omitzero"`
	Reason   string    `json:"reason,omitempty"`
}

const healthDir = "health"

func contentSum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:8])
}

func (w *Watcher) healthPath(name string) string {
	return filepath.Join(w.o.StateDir, healthDir, name)
}

// readHealth is the kept state of event name for its content data: none
// when there is none or the file has changed since (the stale state is
// removed). Caller holds w.mu.
func (w *Watcher) readHealth(name string, data []byte) *health {
	b, err := os.ReadFile(w.healthPath(name))
	if err != nil {
		return nil
	}
	var h health
	if json.Unmarshal(b, &h) != nil || h.Sum != contentSum(data) {
		w.removeHealth(name)
		return nil
	}
	return &h
}

// writeHealth keeps e's state (none left: the file goes). Caller holds
// w.mu.
func (w *Watcher) writeHealth(e *entry) {
	h := e.health
	if h == nil || (!h.Paused && h.Failures == 0) {
		e.health = nil
		w.removeHealth(e.name)
		return
	}
	h.Sum = contentSum(e.raw)
	b, _ := json.Marshal(h)
	if err := atomicfile.WriteFile(w.healthPath(e.name), b, 0o600); err != nil {
		w.logger.Error("cannot keep an event's pause and failures; a restart forgets them", "file", e.name, "err", err)
	}
}

func (w *Watcher) removeHealth(name string) {
	if err := os.Remove(w.healthPath(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		w.logger.Error("cannot remove an event's kept state", "file", name, "err", err)
	}
}

// noteResult records how a periodic event's run ended: paused, failed
// (one more in a row) or fine (the count starts over). Caller holds w.mu.
func (w *Watcher) noteResult(e *entry, r Result) {
	if e.spec == nil || e.spec.Type != Periodic {
		return
	}
	if e.health == nil {
		e.health = &health{}
	}
	h := e.health
	switch {
	case r.Pause != nil:
		h.Paused, h.Until, h.Reason, h.Since = true, r.Pause.Until, r.Pause.Reason, w.o.Clock.Now()
		h.Failures = 0
		until := "until resumed"
		if !h.Until.IsZero() {
			until = "until " + fmtTime(h.Until)
		}
		w.logger.Warn("periodic event paused", "file", e.name, "until", until, "why", h.Reason)
	case r.Failed:
		h.Failures++
	default:
		h.Failures = 0
	}
	w.writeHealth(e)
}

// pausedNow reports whether e is paused at now; a pause whose time has
// come is lifted (and said in the log). Caller holds w.mu.
func (w *Watcher) pausedNow(e *entry, now time.Time) bool {
	h := e.health
	if h == nil || !h.Paused {
		return false
	}
	if h.Until.IsZero() || now.Before(h.Until) {
		return true
	}
	w.logger.Info("periodic event's pause is over; it runs again", "file", e.name, "paused_since", fmtTime(h.Since))
	e.health = nil
	w.removeHealth(e.name)
	return false
}

// Resume lifts event name's pause and forgets its failed runs. It
// reports an error when there is no such event; file, when not empty,
// must be the qualified channel the event belongs to.
func (w *Watcher) Resume(name, channel string) (wasPaused bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.entries[name]
	if e == nil || e.spec == nil {
		return false, fmt.Errorf("no event named %s (list_events shows this channel's events)", name)
	}
	if channel != "" && e.spec.Qualified() != channel {
		return false, fmt.Errorf("%s belongs to another channel", name)
	}
	wasPaused = e.health != nil && e.health.Paused
	e.health = nil
	w.removeHealth(name)
	if wasPaused {
		w.logger.Info("periodic event resumed", "file", name)
	}
	return wasPaused, nil
}
