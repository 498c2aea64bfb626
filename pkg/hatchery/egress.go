package hatchery

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/jsonl"
)

// EgressOutcome is how one connection of an isolated chick through its
// gate went (docs/isolation.md).
type EgressOutcome string

// Egress outcomes.
const (
	// EgressAllowed: allowed and closed normally.
	EgressAllowed EgressOutcome = "allowed"
	// EgressRefused: not on the chick's allowlist.
	EgressRefused EgressOutcome = "refused"
	// EgressBlockedAddress: the destination resolves to a private,
	// loopback or link-local address the operator did not list, or does
	// not resolve.
	EgressBlockedAddress EgressOutcome = "blocked_address"
	// EgressCapped: cut at the chick's byte cap.
	EgressCapped EgressOutcome = "capped"
	// EgressFailed: allowed, but the destination could not be reached.
	EgressFailed EgressOutcome = "failed"
)

// Egress is one connection a chick opened through its gate, as the gate
// reported it.
type Egress struct {
	Time    time.Time     `json:"time"`
	Host    string        `json:"host"`
	Port    int           `json:"port"`
	Outcome EgressOutcome `json:"outcome"`
	// Reason says why it was refused or failed.
	Reason string `json:"reason,omitempty"`
	// Address is the address connected to, if any.
	Address  string        `json:"address,omitempty"`
	BytesOut int64         `json:"bytesOut"`
	BytesIn  int64         `json:"bytesIn"`
	Duration time.Duration `json:"duration,omitempty"`
}

// EgressObserver hears every connection a chick's gate reports
// (RecordEgress). A subscriber implements it besides Observer. Unlike the
// lifecycle's one-method observers it is called without the hatchery's
// lock, on the reporting goroutine, like ChickEvent: it must not block
// for long.
type EgressObserver interface {
	ChickEgress(c Info, e Egress)
}

// egressFile is a chick's connection log, beside its events.
const egressFile = "egress.jsonl"

// RecordEgress appends one of chick id's gate connections to
// <dir>/<id>/egress.jsonl (a whole line per connection, not fsynced: an
// operating system crash may lose the last few) and tells the subscribers
// that implement EgressObserver. A chick that has ended records nothing
// (ErrChickEnded).
func (h *Hatchery) RecordEgress(id string, e Egress) (Info, error) {
	h.mu.Lock()
	c, ok := h.chicks[id]
	if !ok {
		h.mu.Unlock()
		return Info{}, fmt.Errorf("chick %s: %w", id, ErrUnknownChick)
	}
	if c.rec.State.Final() {
		h.mu.Unlock()
		return Info{}, ErrChickEnded
	}
	if e.Time.IsZero() {
		e.Time = h.clock.Now()
	}
	err := h.appendEgressLocked(id, e)
	info := h.info(c)
	h.mu.Unlock()
	if err != nil {
		return info, err
	}
	h.obs.each(func(o Observer) {
		if eo, ok := o.(EgressObserver); ok {
			eo.ChickEgress(info, e)
		}
	})
	return info, nil
}

func (h *Hatchery) appendEgressLocked(id string, e Egress) error {
	dir := filepath.Join(h.dir, id)
	if err := fsync.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("chick egress log: %w", err)
	}
	j, _, err := jsonl.Open(filepath.Join(dir, egressFile), false)
	if err != nil {
		return fmt.Errorf("chick egress log: %w", err)
	}
	_, _, err = j.Append(e)
	if cerr := j.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("chick egress log: %w", err)
	}
	return nil
}

// EgressSent is what chick id has sent out through its gate so far, by
// its egress log (the byte cap's ledger after a Mother restart).
func (h *Hatchery) EgressSent(id string) (int64, error) {
	if id == "" || filepath.Base(id) != id || id == ".." {
		return 0, fmt.Errorf("chick %q: %w", id, ErrUnknownChick)
	}
	var sum int64
	err := jsonl.Scan(filepath.Join(h.dir, id, egressFile), 0, -1, func(line []byte, _, _ int64) error {
		var e Egress
		if json.Unmarshal(line, &e) == nil && e.BytesOut > 0 {
			sum += e.BytesOut
		}
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return sum, fmt.Errorf("chick egress log: %w", err)
	}
	return sum, nil
}
