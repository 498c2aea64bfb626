package mother

import (
	"context"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/events"
)

var _ events.Sink = (*Mother)(nil)

// Submit implements events.Sink: it queues an event's run in its channel
// (at most events.maxQueuedPerChannel waiting). The run logs the event's
// line to the channel's log.jsonl as a message from the "event" sender, so
// the session sync brings it into the context like any message, and runs
// the agent on it; a final answer starting with [SILENT] posts nothing.
// done reports Finished unless a shutdown cut the run short.
func (m *Mother) Submit(_ context.Context, f events.Firing, done func(events.Result)) error {
	job := Job{
		Kind:             KindEvent,
		EventText:        f.Line(),
		EventFile:        f.File,
		EventPeriodic:    f.Type == events.Periodic,
		EventFailures:    f.Failures,
		EventMaySchedule: f.MaySchedule,
		EventBy:          f.By,
		Title:            "event " + f.File,
		Late:             f.Late,
		Cancelled:        f.Cancelled,
	}
	job.Done = func(o Outcome) {
		r, text := eventResult(job, o)
		if text != "" {
			if a, ok := m.Adapter(f.Adapter); ok {
				m.post(m.ctx, a, f.ChannelID, text)
			}
		}
		done(r)
	}
	if f.Late && f.Note != "" {
		job.LateNote = "(Late: " + f.Note + ".)"
	}
	job.EventKey = f.Key()
	if f.Resumed {
		if a, ok := m.Adapter(f.Adapter); ok {
			m.resumeEvent(a, f, &job)
		}
	}
	return m.Enqueue(f.Adapter, f.ChannelID, job)
}

// MetaOccurrence is, on an event's line in log.jsonl, the occurrence it
// is (events.Firing.Key).
const MetaOccurrence = "occurrence"

// resumeEvent finds an occurrence resumed after a restart in the
// channel's log: its line logged before, its run is that line's job
// again (answered, if log.jsonl holds Mother's answer to it, and then
// not run again: the restart brought back an accepted marker the run had
// removed). Not found: it is logged afresh when it is queued.
func (m *Mother) resumeEvent(a chat.Adapter, f events.Firing, job *Job) {
	ch, err := m.store.Channel(f.Adapter, f.ChannelID)
	if err != nil {
		return
	}
	key := f.Key()
	lm, found, err := ch.FindMessage(0, func(msg chat.ChannelMessage) bool {
		return msg.Sender.ID == EventSenderID && msg.Metadata[MetaOccurrence] == key
	})
	if err != nil || !found {
		return
	}
	job.Trigger, job.TriggerEnd, job.recovered = lm.Msg, lm.End, true
	job.answer = m.loggedAnswer(m.logger, a, f.ChannelID, lm.Msg, lm.End)
}
