package hatchery

import (
	"fmt"
	"time"

	"github.com/mother-chat/mother/pkg/config"
)

// EventLimits bound what one chick may stream to Mother (chicks.events).
// A chick past any of them is stopped for flooding (ReasonFlooding): it is
// asked to cancel, then killed after the kill grace, with an outcome its
// channel sees ("flooding: an event of 16 MiB (limit 1 MiB)"). What it
// stored before stays stored and readable.
type EventLimits struct {
	// MaxEventBytes caps one event as it arrives (its size on the wire).
	MaxEventBytes int64
	// PerSecond and Burst are the token bucket of the chick's events:
	// Burst at once, PerSecond sustained.
	PerSecond float64
	Burst     int
	// MaxBytes caps the chick's events.jsonl.
	MaxBytes int64
}

// eventLimits reads chicks.events; a field left out (or, in a config that
// was not validated, one that does not parse) takes its default.
func eventLimits(e config.ChickEvents) EventLimits {
	l := EventLimits{PerSecond: float64(e.PerSecond), Burst: e.Burst}
	var err error
	if l.MaxEventBytes, err = e.MaxEventBytesValue(); err != nil || l.MaxEventBytes <= 0 {
		l.MaxEventBytes, _ = config.ParseBytes(config.DefaultEventMaxBytes)
	}
	if l.MaxBytes, err = e.MaxBytesValue(); err != nil || l.MaxBytes <= 0 {
		l.MaxBytes, _ = config.ParseBytes(config.DefaultEventsMaxBytes)
	}
	if l.PerSecond <= 0 {
		l.PerSecond = config.DefaultEventsPerSecond
	}
	if l.Burst <= 0 {
		l.Burst = config.DefaultEventBurst
	}
	return l
}

// EventLimits are the bounds in force on every chick's events.
func (h *Hatchery) EventLimits() EventLimits { return h.evLimits }

// bucket is a token bucket: it holds up to Burst events and refills at
// PerSecond.
type bucket struct {
	tokens float64
	at     time.Time // when tokens was last brought up to date; zero: full
}

// take takes one event from b at now; false when the bucket is empty.
func (b *bucket) take(now time.Time, l EventLimits) bool {
	if b.at.IsZero() {
		b.tokens = float64(l.Burst)
	} else if d := now.Sub(b.at); d > 0 {
		b.tokens = min(float64(l.Burst), b.tokens+d.Seconds()*l.PerSecond)
	}
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// AdmitEvent is asked by the nest for every event of chick id as it
// arrives, with its size on the wire, before the event is queued or
// decoded further. It answers nil, or an error matching ErrFlooding whose
// text is the outcome once the event is over chicks.events.maxEventBytes
// or comes faster than chicks.events.perSecond allows after its burst: the
// chick is then being stopped (see EventLimits), and every later event of
// it is refused the same way. The bucket is the chick's, not its
// session's: reconnecting does not refill it.
func (h *Hatchery) AdmitEvent(id string, size int64) error {
	h.mu.Lock()
	c, ok := h.chicks[id]
	if !ok {
		h.mu.Unlock()
		return ErrUnknownChick
	}
	if c.flooded != "" {
		why := c.flooded
		h.mu.Unlock()
		return floodError(why)
	}
	l := h.evLimits
	var why string
	switch {
	case size > l.MaxEventBytes:
		why = fmt.Sprintf("an event of %s (limit %s)", formatBytes(size), formatBytes(l.MaxEventBytes))
	case !c.evBucket.take(h.clock.Now(), l):
		why = fmt.Sprintf("more than %s events a second (burst %d)", formatRate(l.PerSecond), l.Burst)
	default:
		h.mu.Unlock()
		return nil
	}
	h.mu.Unlock()
	return h.flood(c, why)
}

// Flooded is the error AdmitEvent gave chick id once it was stopped for
// flooding, nil if it was not: the nest refuses such a chick a new
// session before it reads anything of it.
func (h *Hatchery) Flooded(id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.chicks[id]
	if !ok {
		return ErrUnknownChick
	}
	if c.flooded == "" {
		return nil
	}
	return floodError(c.flooded)
}

// flood stops chick c for flooding, why saying which bound it passed, and
// returns the error its callers hand on. Only the first bound passed is
// the outcome.
func (h *Hatchery) flood(c *chick, why string) error {
	h.mu.Lock()
	if c.flooded != "" {
		why = c.flooded
		h.mu.Unlock()
		return floodError(why)
	}
	why = "flooding: " + why
	c.flooded = why
	id := c.rec.ID
	h.mu.Unlock()
	h.logger.Warn("chick stopped for flooding Mother with events", "chick", id, "why", why)
	_, _ = h.Stop(id, ReasonFlooding, why, h.cfg.KillGrace.Duration)
	return floodError(why)
}

// floodError is an error matching ErrFlooding whose text is outcome
// ("flooding: ...").
func floodError(outcome string) error {
	return fmt.Errorf("%w%s", ErrFlooding, outcome[len("flooding"):])
}

// formatBytes writes n in the largest binary unit it reaches: "16 MiB",
// "1.5 KiB", "900 B".
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 3 {
		v /= unit
		i++
	}
	s := fmt.Sprintf("%.1f", v)
	if s[len(s)-2:] == ".0" {
		s = s[:len(s)-2]
	}
	return s + " " + []string{"KiB", "MiB", "GiB", "TiB"}[i]
}

func formatRate(r float64) string {
	if r == float64(int64(r)) {
		return fmt.Sprint(int64(r))
	}
	return fmt.Sprintf("%.2f", r)
}
