package hatchery

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
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
	// EgressUnlogged is no connection: the summary of the connections
	// past chicks.egress.logMaxBytes since the last such line, counted by
	// outcome (Counts), their bytes in BytesOut and BytesIn.
	EgressUnlogged EgressOutcome = "unlogged"
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
	// Counts are the connections a summary line (EgressUnlogged) stands
	// for, by outcome.
	Counts map[EgressOutcome]int64 `json:"counts,omitempty"`
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

const (
	// egressSummaryEvery is how often, past the cap, a summary line of
	// the connections not logged is written (and at the chick's end).
	egressSummaryEvery = time.Minute
	// egressFinalRoom is kept free below the cap for the last summary
	// line; an eighth of the cap above it for the summaries before.
	egressFinalRoom = 512
)

// egressLog is a chick's open connection log and what it did not log.
// Guarded by the hatchery's mu.
type egressLog struct {
	f      *jsonl.File
	size   int64
	capped bool
	// unlogged counts the connections past the cap since the last
	// summary line, their bytes in out and in.
	unlogged    map[EgressOutcome]int64
	out, in     int64
	lastSummary time.Time
}

// egressLogMax reads chicks.egress.logMaxBytes (its default if it does
// not parse).
func egressLogMax(e config.Egress) int64 {
	n, err := e.LogMaxBytesValue()
	if err != nil || n < config.MinEgressLogBytes {
		n, _ = config.ParseBytes(config.DefaultEgressLogMaxBytes)
	}
	return n
}

// RecordEgress appends one of chick id's gate connections to
// <dir>/<id>/egress.jsonl (a whole line per connection, not fsynced: an
// operating system crash may lose the last few) and tells the subscribers
// that implement EgressObserver. The log is kept open while the chick
// runs. Past chicks.egress.logMaxBytes a connection is counted, not
// logged: a summary line (EgressUnlogged) holds the counts, written when
// the cap is reached, at most once a minute after, and at the chick's end,
// all within the cap. A chick that has ended records nothing
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
	e.Counts = nil
	err := h.appendEgressLocked(c, e)
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

func (h *Hatchery) appendEgressLocked(c *chick, e Egress) error {
	l := c.egress
	if l == nil {
		dir := filepath.Join(h.dir, c.rec.ID)
		if err := fsync.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("chick egress log: %w", err)
		}
		j, _, err := jsonl.Open(filepath.Join(dir, egressFile), false)
		if err != nil {
			return fmt.Errorf("chick egress log: %w", err)
		}
		l = &egressLog{f: j, size: j.Size()}
		c.egress = l
	}
	max := h.egressMax
	if !l.capped {
		line, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("chick egress log: %w", err)
		}
		line = append(line, '\n')
		if l.size+int64(len(line)) <= max-max/8-egressFinalRoom {
			return l.write(line)
		}
		l.capped = true
		h.logger.Warn("chick egress log at its cap: connections are counted, not logged one by one", "chick", c.rec.ID, "max_bytes", max)
	}
	if l.unlogged == nil {
		l.unlogged = map[EgressOutcome]int64{}
	}
	l.unlogged[e.Outcome]++
	l.out += e.BytesOut
	l.in += e.BytesIn
	if l.lastSummary.IsZero() || clock.Since(h.clock, l.lastSummary) >= egressSummaryEvery {
		return l.summary(h.clock.Now(), max-egressFinalRoom)
	}
	return nil
}

// write appends one whole line.
func (l *egressLog) write(line []byte) error {
	if _, _, err := l.f.AppendLines(line); err != nil {
		return fmt.Errorf("chick egress log: %w", err)
	}
	l.size += int64(len(line))
	return nil
}

// summary writes a line of the connections not logged since the last,
// if there are any and it fits under limit.
func (l *egressLog) summary(now time.Time, limit int64) error {
	if len(l.unlogged) == 0 {
		return nil
	}
	line, err := json.Marshal(Egress{Time: now, Outcome: EgressUnlogged, Reason: "past chicks.egress.logMaxBytes: counted, not logged",
		BytesOut: l.out, BytesIn: l.in, Counts: l.unlogged})
	if err != nil {
		return fmt.Errorf("chick egress log: %w", err)
	}
	line = append(line, '\n')
	if l.size+int64(len(line)) > limit {
		return nil // counted in the next summary that fits: the last one
	}
	if err := l.write(line); err != nil {
		return err
	}
	l.unlogged, l.out, l.in, l.lastSummary = nil, 0, 0, now
	return nil
}

// closeEgressLocked writes chick c's last summary line and closes its
// egress log (its end, the hatchery's Close).
func (h *Hatchery) closeEgressLocked(c *chick) error {
	l := c.egress
	if l == nil {
		return nil
	}
	c.egress = nil
	err := l.summary(h.clock.Now(), h.egressMax)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
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
