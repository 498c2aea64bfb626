package events

import (
	"context"
	"errors"
	"time"
)

// ErrChannelFull is what a Sink returns (wrapped) when the event's channel
// already has its maximum of queued events. The watcher keeps the event
// and offers it again when one of the channel's event runs finishes.
var ErrChannelFull = errors.New("channel event queue full")

// Sink runs fired events; Mother's dispatcher implements it.
type Sink interface {
	// Submit queues f's run in its channel and calls done exactly once,
	// from another goroutine, when the run has ended or was skipped
	// (f.Cancelled). An error wrapping ErrChannelFull means "try again
	// later"; done is then never called, nor for any other error.
	Submit(ctx context.Context, f Firing, done func(Result)) error
}

// Result is how a submitted event run ended.
type Result struct {
	// Finished is true when the event is done with: it ran (successfully
	// or not), was stopped by a user, or was skipped. It is false when a
	// shutdown cut the run short: the event then runs again at the next
	// start.
	Finished bool
	// Failed marks a run that ended in an error (not stopped by a user):
	// a periodic event counts them in a row (Firing.Failures).
	Failed bool
	// Pause, when set, pauses a periodic event (Mother's decision: a cap
	// reached, too many failures in a row).
	Pause *Pause
}

// Firing is one occurrence of an event, handed to the Sink.
type Firing struct {
	// File is the event's file name ("dentist.json").
	File     string
	Type     Type
	Schedule string
	Adapter  string
	// ChannelID is the adapter's channel id (unqualified).
	ChannelID string
	Text      string
	// Due is when the occurrence fell due.
	Due time.Time
	// Late marks an occurrence that runs later than planned (Mother was
	// down, or restarted during its run); Note says why.
	Late bool
	Note string
	// Failures is how many of a periodic event's runs before this one
	// failed in a row.
	Failures int
	// MaySchedule: an admin allowed this event's runs to schedule events
	// (Event.MaySchedule).
	MaySchedule bool
	// By is who scheduled it (Event.By).
	By string
	// Resumed marks an occurrence accepted before a restart whose run was
	// not known to have finished: its accepted marker was still there.
	// The run may have finished all the same (a power cut can bring back
	// a marker removed after it), so the Sink checks what it has stored
	// of the occurrence before it runs it again (Key names it).
	Resumed bool

	cancelled func() bool
}

// Line is the message the agent receives: "[EVENT:<file>:<type>:<schedule>]
// <text>", followed by the lateness note on its own paragraph.
func (f Firing) Line() string {
	l := Line(f.File, f.Type, f.Schedule, f.Text)
	if f.Note != "" {
		l += "\n\n(" + f.Note + ")"
	}
	return l
}

// Key names the occurrence: its file and when it fell due. An occurrence
// resumed after a restart (Resumed) has the key it had before.
func (f Firing) Key() string { return f.File + "@" + f.Due.UTC().Format(time.RFC3339Nano) }

// Cancelled reports whether the event was deleted or changed after this
// occurrence was queued; the Sink skips such a run.
func (f Firing) Cancelled() bool { return f.cancelled != nil && f.cancelled() }
