package mother

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/events"
	"github.com/mother-chat/mother/pkg/model"
)

// SpendNotice is a warning about a daily cap the broker gives once a day
// (at 80% of the cap, and when it stops a call): Mother says it in
// Channel, or, when the cap is not that channel's, to the admins by direct
// message (in Channel when no admin can be reached that way).
type SpendNotice struct {
	// Channel is the qualified channel to say it in (empty: nowhere but
	// the log).
	Channel string
	// Admins: the cap is not one channel's (Mother's own daily cap, a
	// tier's).
	Admins bool
	// Level is 80 or 100; Scope the cap's kind ("channel", "event"...).
	Level int
	Scope string
	Text  string
}

// noticeQueueSize bounds the notices waiting to be said.
const noticeQueueSize = 64

// notices says the spend notices in order, one at a time, off the
// goroutine of the model call that brought them.
type notices struct {
	mu     sync.Mutex
	closed bool
	queue  chan SpendNotice
	done   chan struct{}
}

// Notify says n where it belongs (it implements the broker's notifier,
// through pkg/daemon). It does not wait: the notice is said in order
// after the ones before it; one that would overflow the queue is only
// logged.
func (m *Mother) Notify(n SpendNotice) {
	if n.Level >= 100 && n.Scope == "event" {
		// The event's run says it, and pauses a periodic event.
		return
	}
	q := &m.spend
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		m.logger.Warn("spend notice after shutdown, not said", "channel", n.Channel, "text", n.Text)
		return
	}
	if q.queue == nil {
		q.queue, q.done = make(chan SpendNotice, noticeQueueSize), make(chan struct{})
		go m.sayNotices(q.queue, q.done)
	}
	select {
	case q.queue <- n:
	default:
		m.logger.Warn("too many spend notices at once; this one is only logged", "channel", n.Channel, "text", n.Text)
	}
}

func (m *Mother) sayNotices(queue <-chan SpendNotice, done chan<- struct{}) {
	defer close(done)
	for n := range queue {
		adapterName, channelID, ok := strings.Cut(n.Channel, "/")
		a, found := m.Adapter(adapterName)
		if !ok || !found {
			m.logger.Warn("spend notice for no known channel; logged only", "channel", n.Channel, "text", n.Text)
			continue
		}
		text := n.Text
		if n.Admins {
			// Not this channel's cap: the admins are told directly,
			// where the platforms let Mother (the channel of the call
			// otherwise).
			text = "For the admins: " + text
			if m.tellAdmins(m.ctx, text, "spend cap "+n.Scope) > 0 {
				continue
			}
		}
		m.post(m.ctx, a, channelID, text)
	}
}

// closeNotices says the notices still queued (until ctx ends) and takes
// no more.
func (m *Mother) closeNotices(ctx context.Context) {
	q := &m.spend
	q.mu.Lock()
	q.closed = true
	queue, done := q.queue, q.done
	q.mu.Unlock()
	if queue == nil {
		return
	}
	close(queue)
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// budgetPause is the pause of a periodic event whose run a daily cap
// refused (until the cap resets), and the words that tell the channel;
// nil for any other run.
func budgetPause(job Job, out agent.Output) (*events.Pause, string) {
	if job.kind() != KindEvent || !job.EventPeriodic || out.StopReason != agent.StopBudget {
		return nil, ""
	}
	var be *model.BudgetError
	if !errors.As(out.Err, &be) || be.Reset.IsZero() {
		return nil, ""
	}
	// The refusal without its "budget exhausted:" label: the sentence
	// says it.
	why := strings.TrimPrefix(firstLine(be.Msg), model.ErrBudgetExhausted.Error()+": ")
	p := &events.Pause{Until: be.Reset, Reason: why}
	return p, fmt.Sprintf("I paused event %s until %s: %s. It runs again then by itself.", job.EventFile, be.Reset.Format("2006-01-02 15:04 MST"), why)
}

// eventResult is how an event's run ended, for the watcher: a periodic
// event whose run failed for the MaxFailures-th time in a row is paused
// until someone resumes it, and the channel told (text, empty when
// nothing is to be said).
func eventResult(job Job, o Outcome) (events.Result, string) {
	r := events.Result{Finished: !o.Shutdown, Pause: o.Pause}
	if !r.Finished || o.Stopped || o.Skipped || o.Pause != nil {
		return r, ""
	}
	r.Failed = o.Err != nil
	if !r.Failed || !job.EventPeriodic || job.EventFailures+1 < events.MaxFailures {
		return r, ""
	}
	why := firstLine(o.Err.Error())
	r.Pause = &events.Pause{Reason: fmt.Sprintf("its last %d runs failed (the last: %s)", events.MaxFailures, why)}
	return r, fmt.Sprintf("I paused event %s: its last %d runs failed (the last with: %s). It stays paused until you ask me to resume it (resume_event) or change it.",
		job.EventFile, events.MaxFailures, why)
}
