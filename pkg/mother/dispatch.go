package mother

import (
	"context"
	"errors"
	"fmt"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/store"
)

// ErrQueueFull means a channel's queue has no room.
var ErrQueueFull = errors.New("channel queue full")

// Job is one unit of work for a channel's runner: answer a message, or run
// a scheduled event.
type Job struct {
	// Trigger is the message to answer; it has been logged already.
	Trigger chat.ChannelMessage
	// TriggerEnd is the trigger's end offset in log.jsonl.
	TriggerEnd int64
	// Late marks a message that arrived while Mother was down.
	Late bool
	// Title names the job's source on the rendered reply.
	Title string
	// Done, if set, is called when the job has finished (or was skipped).
	Done func(Outcome)
}

// Outcome is how a job ended.
type Outcome struct {
	Ran    bool
	Err    error
	Silent bool
}

// channelState is one channel's queue and runner.
type channelState struct {
	adapter chat.Adapter
	id      string
	pending []Job
	running bool
	// cancel aborts the run in progress (nil when idle).
	cancel context.CancelFunc
}

func (m *Mother) channelFor(a chat.Adapter, channelID string) *channelState {
	key := chat.QualifiedID(a.Name(), channelID)
	cs, ok := m.channels[key]
	if !ok {
		cs = &channelState{adapter: a, id: channelID}
		m.channels[key] = cs
	}
	return cs
}

// Deliver implements chat.Inbox: log every message; queue the ones that
// address Mother.
func (m *Mother) Deliver(ctx context.Context, adapterName string, msg chat.ChannelMessage, late bool) {
	a, ok := m.Adapter(adapterName)
	if !ok {
		m.logger.Error("message from unknown adapter", "adapter", adapterName)
		return
	}
	lg := m.logger.With("channel", chat.QualifiedID(adapterName, msg.ChannelID), "msg", msg.ID)
	ch, err := m.store.Channel(adapterName, msg.ChannelID)
	if err != nil {
		lg.Error("cannot open channel store; message not logged", "err", err)
		return
	}
	if msg.ID == "" {
		msg.ID = m.newID()
	}
	if msg.Timestamp.IsZero() {
		msg.Timestamp = m.now()
	}
	lm, err := ch.AppendMessage(msg)
	if err != nil {
		lg.Error("cannot log message", "err", err)
		if _, perr := a.Post(ctx, msg.ChannelID, "I could not store your message (disk problem?), so I am not answering it. The operator has the details in my log."); perr != nil {
			lg.Error("cannot post notice", "err", perr)
		}
		return
	}
	lg.Debug("message logged", "mention", msg.IsMention, "late", late)
	if !msg.IsMention || msg.Sender.IsBot && msg.Sender.ID == a.SelfID() {
		return
	}
	job := Job{Trigger: msg, TriggerEnd: lm.End, Late: late}
	if err := m.Enqueue(a.Name(), msg.ChannelID, job); err != nil {
		n := m.cfg.Dispatch.QueueSize
		notice := fmt.Sprintf("I am busy in this channel and %d messages are already waiting, so I will not answer this one separately. It is logged and I will see it with the next message.", n)
		if errors.Is(err, errClosing) {
			notice = "I am shutting down and will not answer this now. It is logged; ask again once I am back."
		}
		lg.Warn("message not queued", "err", err)
		if _, perr := a.Post(ctx, msg.ChannelID, notice); perr != nil {
			lg.Error("cannot post notice", "err", perr)
		}
	}
}

// Stop implements chat.Inbox; the dispatch issue gives it its full meaning.
func (m *Mother) Stop(ctx context.Context, adapterName, channelID, userID string) {
	m.mu.Lock()
	cs, ok := m.channels[chat.QualifiedID(adapterName, channelID)]
	var cancel context.CancelFunc
	if ok && cs.cancel != nil {
		cancel = cs.cancel
	}
	m.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

var errClosing = errors.New("mother is shutting down")

// Enqueue queues a job for a channel. It returns ErrQueueFull when the
// channel already has Dispatch.QueueSize jobs waiting.
func (m *Mother) Enqueue(adapterName, channelID string, job Job) error {
	a, ok := m.Adapter(adapterName)
	if !ok {
		return fmt.Errorf("unknown adapter %q", adapterName)
	}
	if err := store.ValidName(channelID); err != nil {
		return fmt.Errorf("channel id: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return errClosing
	}
	cs := m.channelFor(a, channelID)
	if len(cs.pending) >= m.cfg.Dispatch.QueueSize {
		return ErrQueueFull
	}
	cs.pending = append(cs.pending, job)
	m.work.Add(1)
	if !cs.running {
		cs.running = true
		go m.runChannel(cs)
	}
	return nil
}

// runChannel works through a channel's queue, one job at a time, and exits
// when it is empty (so idle channels cost no goroutine).
func (m *Mother) runChannel(cs *channelState) {
	for {
		m.mu.Lock()
		if len(cs.pending) == 0 {
			cs.running = false
			m.mu.Unlock()
			return
		}
		job := cs.pending[0]
		cs.pending = cs.pending[1:]
		runCtx, cancel := context.WithCancel(m.ctx)
		cs.cancel = cancel
		m.mu.Unlock()

		out := m.run(runCtx, cs.adapter, cs.id, job)

		m.mu.Lock()
		cs.cancel = nil
		m.mu.Unlock()
		cancel()
		if job.Done != nil {
			job.Done(out)
		}
		m.work.Done()
	}
}
