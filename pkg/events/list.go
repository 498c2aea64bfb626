package events

import (
	"sort"
	"time"
)

// Info describes one event file, for list_events and momctl.
type Info struct {
	File     string `json:"file"`
	Type     Type   `json:"type,omitempty"`
	Channel  string `json:"channel,omitempty"`
	Text     string `json:"text,omitempty"`
	Schedule string `json:"schedule,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	// Next is the next planned run (zero when none is planned).
	Next time.Time `json:"next,omitzero"`
	// State is "scheduled", "waiting" (its channel's event queue is full),
	// "queued" (handed to Mother: queued or running), "paused" (a
	// periodic event Mother paused: PausedUntil, Reason), "invalid" (does
	// not parse; being retried) or "idle".
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	// PausedUntil is when a paused event runs again by itself (zero:
	// when resumed); Reason why it was paused.
	PausedUntil time.Time `json:"pausedUntil,omitzero"`
	Reason      string    `json:"reason,omitempty"`
	// MaySchedule: its runs may schedule events (an admin allowed it).
	MaySchedule bool `json:"maySchedule,omitempty"`
}

// List returns every known event, soonest first. channel, if not empty,
// keeps only that qualified channel's events.
func (w *Watcher) List(channel string) []Info {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Info
	for _, e := range w.entries {
		in := Info{File: e.name, Next: e.next, State: "idle"}
		if e.spec == nil {
			if channel != "" {
				continue
			}
			in.State = "invalid"
			if e.err != nil {
				in.Error = e.err.Error()
			}
			out = append(out, in)
			continue
		}
		s := e.spec
		if channel != "" && s.Qualified() != channel {
			continue
		}
		in.Type, in.Channel, in.Text, in.Schedule, in.Timezone, in.MaySchedule = s.Type, s.Qualified(), s.Text, s.ScheduleLabel(), s.Timezone, s.MaySchedule
		switch {
		case e.health != nil && e.health.Paused && (e.health.Until.IsZero() || w.o.Clock.Now().Before(e.health.Until)):
			in.State, in.PausedUntil, in.Reason = "paused", e.health.Until, e.health.Reason
		case e.out != nil && e.out.submitted:
			in.State = "queued"
		case e.out != nil:
			in.State = "waiting"
		case !e.next.IsZero():
			in.State = "scheduled"
		}
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Next.IsZero() != b.Next.IsZero() {
			return b.Next.IsZero()
		}
		if !a.Next.Equal(b.Next) {
			return a.Next.Before(b.Next)
		}
		return a.File < b.File
	})
	return out
}
