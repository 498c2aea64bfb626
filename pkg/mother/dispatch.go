package mother

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/events"
	"github.com/mother-chat/mother/pkg/store"
)

// ErrQueueFull means a channel's queue has no room.
var ErrQueueFull = errors.New("channel queue full")

// JobKind tells a message run from an event run.
type JobKind string

// Job kinds.
const (
	KindMessage JobKind = "message"
	KindEvent   JobKind = "event"
	// KindChick: read an ended chick's result and answer the channel
	// (chicks.results "answer"; see results.go).
	KindChick JobKind = "chick"
)

// EventSenderID is the sender id of event messages in log.jsonl.
const EventSenderID = "event"

// Job is one unit of work for a channel's runner: answer a message, or run
// a scheduled event.
type Job struct {
	// Kind is KindMessage (the default) or KindEvent.
	Kind JobKind
	// Trigger is the message to answer; it has been logged already. For
	// events it is built and logged when the run starts.
	Trigger chat.ChannelMessage
	// TriggerEnd is the trigger's end offset in log.jsonl.
	TriggerEnd int64
	// Late marks work that runs later than it should have (a message that
	// arrived while Mother was down, an event that was missed or resumed).
	Late bool
	// LateNote replaces the default late header of the reply.
	LateNote string
	// Title names the job's source on the rendered reply.
	Title string
	// EventText is an event's message ("[EVENT:...] text").
	EventText string
	// EventFile is an event's file name, for logs and restart notices.
	EventFile string
	// EventKey names an event's occurrence (events.Firing.Key); its line
	// in log.jsonl carries it (MetaOccurrence).
	EventKey string
	// EventPeriodic marks a periodic event's run; EventFailures is how
	// many of its runs before failed in a row; EventMaySchedule says an
	// admin allowed its runs to schedule events.
	EventPeriodic    bool
	EventFailures    int
	EventMaySchedule bool
	// EventBy is who scheduled the event (events.Event.By): its run acts
	// with their roles.
	EventBy string
	// Chick is the ended chick a KindChick job answers; its Trigger is
	// the chick's report, logged already.
	Chick *ChickEnd
	// Cancelled, if set, is asked before the job runs; true skips it.
	Cancelled func() bool
	// Done, if set, is called when the job has finished (or was skipped).
	Done func(Outcome)

	// resumes counts the restarts this job has been carried over.
	resumes int
	// logFrom is the size of log.jsonl before the trigger was logged:
	// where recovery looks for it if the marker was written first.
	logFrom int64
	// interrupted: the job was running when Mother went down.
	interrupted bool
	// recovered: the job was read back from an in-flight marker at start
	// (queued there, maybe running since: the marker written after its
	// run started may have been lost to a power cut).
	recovered bool
	// answer is Mother's answer to Trigger that log.jsonl held when the
	// job was recovered (nil: none): its run is not run again.
	answer *chat.ChannelMessage
	// relogged: the message comes again after a failed fsync cut its
	// line away under a run that had begun (notStored); it is answered
	// whatever the context holds.
	relogged bool
	// logged, when set, is the trigger's fsync in flight: the run sends
	// the model its request meanwhile but shows nothing before it is done
	// (nil: the trigger is on disk already).
	logged *pendingSync
}

func (j *Job) kind() JobKind {
	if j.Kind == "" {
		return KindMessage
	}
	return j.Kind
}

// Outcome is how a job ended.
type Outcome struct {
	Ran    bool
	Err    error
	Silent bool
	// Stopped: a user's stop aborted the run.
	Stopped bool
	// Shutdown: Mother shut down before or while running the job; it is
	// kept for the next start.
	Shutdown bool
	// Skipped: the job did not run (already answered, or cancelled).
	Skipped bool
	// Pause: a periodic event's run that a daily cap refused pauses the
	// event until the cap resets.
	Pause *events.Pause
}

// channelState is one channel's queue and runner. Fields are guarded by
// Mother.mu except the persistence fields.
type channelState struct {
	adapter chat.Adapter
	id      string
	pending []Job
	// running: a runner goroutine exists.
	running bool
	// current is the job being run; interrupted the one a shutdown cut
	// short (kept so the in-flight marker still names it).
	current     *Job
	interrupted *Job
	// incoming is the message job being logged (see reserve): in the
	// in-flight marker, not yet in the queue.
	incoming *Job
	// cancel aborts the run in progress (nil when idle).
	cancel context.CancelFunc
	// stopping is set when a user stopped the current run; it is closed
	// once "Stopping" has been posted, so "Stopped" comes after it.
	stopping chan struct{}

	// order serialises logging and queueing in the channel, so the log's
	// order is the queue's (a run syncs up to its trigger and must not
	// swallow a message queued after it).
	order sync.Mutex

	seq       uint64
	persistMu sync.Mutex
	written   uint64
	// markerFlush is the pending fsync of the in-flight marker (guarded
	// by persistMu; see persist). markerData is the marker last written;
	// markerRewrite: its write or fsync failed, so it is written again,
	// whole, before the next fsync (armMarkerFlush).
	markerFlush   clock.Timer
	markerData    []byte
	markerRewrite bool
	// marker: the channel's in-flight marker file is there (guarded by
	// persistMu). An idle channel's marker is kept, saying it is idle, for
	// its next message: rewritten in place, not removed and made again.
	marker bool
	// markerNamed: the marker's name is durable (its directory was
	// fsynced since it was made), so making its content durable takes
	// one fsync of the file (guarded by persistMu).
	markerNamed bool
	// markerLen is the length of the marker last written (guarded by
	// persistMu): past a page it is replaced through a rename, a new name.
	markerLen int
	// markerKept: a marker of the channel's has been made durable, file
	// and name, by this process (guarded by persistMu). Some version of
	// it survives a power cut from then on (a rename over it that is not
	// durable brings back the one it replaced): a restart reads it, and
	// the log's answering lines after its logEnd (answering.go).
	markerKept bool
}

func (cs *channelState) qid() string { return chat.QualifiedID(cs.adapter.Name(), cs.id) }

func (m *Mother) channelFor(a chat.Adapter, channelID string) *channelState {
	key := chat.QualifiedID(a.Name(), channelID)
	cs, ok := m.channels[key]
	if !ok {
		cs = &channelState{adapter: a, id: channelID}
		m.channels[key] = cs
	}
	return cs
}

// Deliver implements chat.Inbox: log every message; apply access control
// to DMs; handle admins' answers to chicks' access requests (typed, or
// clicked: a click, msg.Choice, is handled and never logged as a message)
// and stop commands; queue the messages that address Mother.
//
// A message addresses Mother when it is a DM (IsDM), mentions her
// (IsMention), or is posted in a thread she started
// (Metadata[chat.MetaThreadStarter] == the adapter's SelfID). Her own
// messages and other bots' messages are logged and never answered.
//
// It returns nil once the message is hers (logged, its job queued or
// kept), or dropped for good (an adapter or channel id she can never
// store). It returns a chat.NotStoredError when she could not log it (a
// full or failing disk): nothing was queued, and the adapter must not
// acknowledge the message but deliver it again (see notStored).
func (m *Mother) Deliver(ctx context.Context, adapterName string, msg chat.ChannelMessage, late bool) error {
	lg := m.logger.With("channel", chat.QualifiedID(adapterName, msg.ChannelID), "msg_id", msg.ID)
	a, cs, err := m.state(adapterName, msg.ChannelID)
	if err != nil {
		lg.Error("message dropped: it can never be stored", "err", err)
		return nil
	}
	if msg.Choice {
		m.choose(ctx, a, msg, late)
		return nil
	}
	ch, err := m.store.Channel(adapterName, msg.ChannelID)
	if err != nil {
		return m.notStored(ctx, a, msg, lg, fmt.Errorf("open channel store: %w", err), Addressed(a.SelfID(), msg) && !msg.Sender.IsBot, false)
	}
	d := m.classify(ctx, a, &msg, late)
	if d.noTalk == "" && !d.refusedDM {
		// Heard after the message is classified: a transcript never makes
		// a stop or an access answer, and nobody pays to hear a stranger's
		// DM or a person who may not talk here.
		m.hear(ctx, adapterName, ch.Dir(), &msg, lg)
	}
	cs.order.Lock()
	locked := true
	unlock := func() {
		if locked {
			locked = false
			cs.order.Unlock()
		}
	}
	defer unlock()
	job, qerr := m.reserveFor(cs, ch, msg, late, d, lg)
	if m.crashed("reserved") {
		return nil
	}
	// The line is written here and made durable by its fsync (shared
	// with whatever else is appended meanwhile: group commit). A message
	// to answer has its fsync run after its job is queued, so the model
	// request goes out while the line goes to disk; the run shows nothing
	// before the fsync is done, and this returns (the adapter's
	// acknowledgement) only after it. Every other message is on disk
	// before anything else happens, as before.
	line := msg
	if job != nil {
		line = answeringLine(msg)
	}
	lm, err := ch.WriteMessage(line)
	if err == nil && job == nil {
		err = ch.CommitLog(lm)
	}
	if err != nil {
		relogged := job != nil && job.relogged
		if job != nil {
			m.unreserve(cs)
		}
		unlock()
		// Not written at all: a message that came back after a cut
		// keeps that mark for its next delivery.
		return m.notStored(ctx, a, msg, lg, err, d.answer, relogged)
	}
	if m.crashed("logged") {
		return nil
	}
	lg.Debug("message logged", "mention", msg.IsMention, "dm", msg.IsDM, "late", late)
	if m.handledUnanswered(ctx, a, ch, msg, late, d, unlock, lg) {
		return nil
	}
	var logged *pendingSync
	if job != nil {
		job.TriggerEnd = lm.End
		logged = newPendingSync()
		job.logged = logged
		if err := m.queue(cs, *job); err != nil {
			// Shutting down: the job stays in the marker for the next start.
			qerr = errKept
		}
	}
	unlock()
	if logged != nil {
		err := ch.CommitLog(lm)
		logged.settle(err)
		if err != nil {
			// The run queued for it sees the failure and ends without a
			// word (see pendingSync); the adapter delivers the message
			// again.
			return m.notStored(ctx, a, msg, lg, err, true, true)
		}
	}
	if qerr != nil {
		m.tellNotQueued(ctx, a, msg, qerr, lg)
	}
	return nil
}

// state returns the adapter and the channel's state, creating it.
func (m *Mother) state(adapterName, channelID string) (chat.Adapter, *channelState, error) {
	a, ok := m.Adapter(adapterName)
	if !ok {
		return nil, nil, fmt.Errorf("unknown adapter %q", adapterName)
	}
	if err := store.ValidName(channelID); err != nil {
		return nil, nil, fmt.Errorf("channel id: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return a, m.channelFor(a, channelID), nil
}

// Addressed reports whether msg calls for an answer from the account
// selfID: a DM, a mention, or a message in a thread selfID started.
func Addressed(selfID string, msg chat.ChannelMessage) bool {
	if msg.IsDM || msg.IsMention {
		return true
	}
	starter, _ := msg.Metadata[chat.MetaThreadStarter].(string)
	return selfID != "" && starter == selfID
}

func (m *Mother) busy(qid string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	cs := m.channels[qid]
	return cs != nil && cs.cancel != nil
}

func (m *Mother) queueSize() int {
	if n := m.cfg.Dispatch.QueueSize; n > 0 {
		return n
	}
	return 5
}

func (m *Mother) eventQueueSize() int {
	if n := m.cfg.Events.MaxQueuedPerChannel; n > 0 {
		return n
	}
	return 5
}

var errClosing = errors.New("mother is shutting down")

// errKept: Mother began shutting down while a message was being logged;
// its job stays in the in-flight marker for the next start.
var errKept = errors.New("mother is shutting down; the message is kept for the next start")

// Enqueue queues a job for a channel. Messages and events have separate
// limits (dispatch.queueSize, events.maxQueuedPerChannel), counting the
// jobs waiting, not the one running. When the message queue is full, a
// late message is folded into the last queued late message (one run then
// reads both); otherwise Enqueue returns an error wrapping ErrQueueFull
// (and, for events, events.ErrChannelFull).
func (m *Mother) Enqueue(adapterName, channelID string, job Job) error {
	_, cs, err := m.state(adapterName, channelID)
	if err != nil {
		return err
	}
	cs.order.Lock()
	defer cs.order.Unlock()
	return m.enqueueOrdered(cs, job)
}

// enqueueOrdered is Enqueue with cs.order held. An event job's message is
// logged here, once the job is sure to be queued, so the log's order is
// the queue's.
func (m *Mother) enqueueOrdered(cs *channelState, job Job) error {
	job.Kind = job.kind()
	m.mu.Lock()
	err := m.roomLocked(cs, job)
	m.mu.Unlock()
	if err != nil {
		return err
	}
	if job.Kind == KindEvent && job.TriggerEnd == 0 {
		// Only event enqueues add event jobs, and they hold cs.order: the
		// slot checked above is still free.
		if err := m.logEvent(cs, &job); err != nil {
			return err
		}
	}
	return m.queue(cs, job)
}

// roomLocked tells whether job may be queued: not while closing, and only
// within the queue limits (a late message past the limit may be folded
// into a queued late message). Caller holds m.mu and cs.order; jobs only
// leave the queue until cs.order is released, so room found stays.
func (m *Mother) roomLocked(cs *channelState, job Job) error {
	if m.closing {
		return errClosing
	}
	msgs, evs := countLocked(cs)
	switch {
	case job.kind() == KindEvent && evs >= m.eventQueueSize():
		return fmt.Errorf("%w (%w)", ErrQueueFull, events.ErrChannelFull)
	case job.kind() == KindMessage && msgs >= m.queueSize() && (!job.Late || foldableLocked(cs) == nil):
		return ErrQueueFull
	}
	return nil
}

func countLocked(cs *channelState) (msgs, evs int) {
	for i := range cs.pending {
		if cs.pending[i].kind() == KindEvent {
			evs++
		} else {
			msgs++
		}
	}
	return msgs, evs
}

// foldableLocked is the last queued late message a late message past the
// limit is folded into (nil: none).
func foldableLocked(cs *channelState) *Job {
	for i := len(cs.pending) - 1; i >= 0; i-- {
		if p := &cs.pending[i]; p.kind() == KindMessage && p.Late && !p.interrupted {
			return p
		}
	}
	return nil
}

// reserve checks that a message job may be queued and writes it to the
// channel's in-flight marker (as its incoming job) before its message is
// logged. Caller holds cs.order, so there is one reservation at a time;
// queue or unreserve ends it.
func (m *Mother) reserve(cs *channelState, ch *store.Channel, job *Job) error {
	m.mu.Lock()
	if err := m.roomLocked(cs, *job); err != nil {
		m.mu.Unlock()
		return err
	}
	job.logFrom = ch.LogSize()
	j := *job
	cs.incoming = &j
	cs.seq++
	m.mu.Unlock()
	m.persist(cs)
	return nil
}

// unreserve drops the incoming job (its message could not be logged).
func (m *Mother) unreserve(cs *channelState) {
	m.mu.Lock()
	cs.incoming = nil
	cs.seq++
	m.mu.Unlock()
	m.persist(cs)
}

// queue adds a job roomLocked allowed, its message logged, and ends the
// channel's reservation in the same step (the marker names the job
// throughout). A late message past the limit is folded into the last
// queued late message when there is one. While closing it queues nothing
// and returns errClosing; a reserved job then stays in the marker.
func (m *Mother) queue(cs *channelState, job Job) error {
	m.mu.Lock()
	if m.closing {
		m.mu.Unlock()
		return errClosing
	}
	cs.incoming = nil
	if msgs, _ := countLocked(cs); job.kind() == KindMessage && job.Late && msgs >= m.queueSize() {
		if p := foldableLocked(cs); p != nil {
			p.TriggerEnd = max(p.TriggerEnd, job.TriggerEnd)
			cs.seq++
			m.mu.Unlock()
			m.logger.Info("late message folded into an earlier queued late message", "channel", cs.qid(), "msg_id", job.Trigger.ID)
			m.persist(cs)
			return nil
		}
		// The job it was to be folded into has started: queue it past
		// the limit rather than drop what was promised.
	}
	m.pushLocked(cs, job)
	m.mu.Unlock()
	m.persist(cs)
	return nil
}

// logEvent writes an event job's line to the channel's log as a message
// from the "event" sender, so the normal sync brings it into the context
// and the run syncs up to it.
func (m *Mother) logEvent(cs *channelState, job *Job) error {
	ch, err := m.store.Channel(cs.adapter.Name(), cs.id)
	if err != nil {
		return fmt.Errorf("log event: %w", err)
	}
	msg := chat.ChannelMessage{
		ID: m.newID(), ChannelID: cs.id, Timestamp: m.now(),
		Sender:      chat.Sender{ID: EventSenderID, Username: "event", IsBot: true},
		Text:        job.EventText,
		Attachments: []chat.ChannelAttachment{},
	}
	if job.EventKey != "" {
		msg.Metadata = map[string]any{MetaOccurrence: job.EventKey}
	}
	lm, err := ch.AppendMessage(msg)
	if err != nil {
		return fmt.Errorf("log event: %w", err)
	}
	job.Trigger, job.TriggerEnd = msg, lm.End
	return nil
}

// pushLocked appends a job and makes sure a runner works the queue.
func (m *Mother) pushLocked(cs *channelState, job Job) {
	cs.pending = append(cs.pending, job)
	cs.seq++
	m.workAdd()
	if !cs.running {
		cs.running = true
		go m.runChannel(cs)
	}
}

// runChannel works through a channel's queue, one job at a time, and exits
// when it is empty (so idle channels cost no goroutine). It starts only
// once Mother has started (restart notices and late messages first).
func (m *Mother) runChannel(cs *channelState) {
	select {
	case <-m.ready:
	case <-m.ctx.Done():
	}
	for {
		m.mu.Lock()
		if len(cs.pending) == 0 || m.ctx.Err() != nil {
			// At shutdown the jobs still waiting stay in the in-flight
			// marker for the next start.
			var left []Job
			if m.ctx.Err() != nil {
				left = cs.pending
			}
			cs.running = false
			cs.seq++
			m.settled.Broadcast()
			m.mu.Unlock()
			m.persist(cs)
			for _, j := range left {
				if j.Done != nil {
					j.Done(Outcome{Shutdown: true})
				}
				m.workDone()
			}
			return
		}
		job := cs.pending[0]
		cs.pending = cs.pending[1:]
		cs.current = &job
		runCtx, cancel := context.WithCancel(m.ctx)
		cs.cancel = cancel
		cs.seq++
		m.mu.Unlock()
		m.persist(cs)

		var out Outcome
		if job.Cancelled != nil && job.Cancelled() {
			m.logger.Info("job cancelled before it ran", "channel", cs.qid(), "event", job.EventFile)
			out = Outcome{Skipped: true}
			m.mu.Lock()
			cs.cancel = nil
			m.mu.Unlock()
		} else {
			out = m.run(runCtx, cs, job)
		}
		cancel()

		m.mu.Lock()
		cs.cancel = nil
		cs.stopping = nil
		cs.current = nil
		if out.Shutdown {
			cs.interrupted = &job
		}
		cs.seq++
		m.mu.Unlock()
		m.persist(cs)
		if job.Done != nil {
			job.Done(out)
		}
		m.workDone()
	}
}
