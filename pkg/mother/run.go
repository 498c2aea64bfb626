package mother

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/prompt"
	"github.com/mother-chat/mother/pkg/session"
	"github.com/mother-chat/mother/pkg/store"
)

// SilentMarker in a final answer suppresses the reply.
const SilentMarker = "[SILENT]"

// promptHostTools are the host tools for this run's prompt.
func (m *Mother) promptHostTools() []prompt.HostTool {
	if m.hostTools == nil {
		return nil
	}
	return m.hostTools()
}

// run answers one job in one channel: load the channel's state, compose
// what the model is asked, run the agent, record and post the answer.
func (m *Mother) run(ctx context.Context, cs *channelState, job Job) Outcome {
	a, channelID := cs.adapter, cs.id
	qid := chat.QualifiedID(a.Name(), channelID)
	lg := m.logger.With("channel", qid, "msg_id", job.Trigger.ID, "kind", job.kind())
	ch, sess, stop := m.load(ctx, a, channelID, job, lg)
	if stop != nil {
		return *stop
	}
	defer sess.Close()
	req := composeRun(runState{
		Adapter:    a.Name(),
		ChannelID:  channelID,
		Workspace:  m.store.Workspace(),
		ChannelDir: ch.Dir(),
		Users:      a.Users(),
		Channels:   a.Channels(),
		Now:        m.now(),
		Location:   time.Local,
		HostTools:  m.promptHostTools(),
		Roles:      m.rolesOf(ctx, a.Name(), channelID, job.actingFor()),
		Limits:     prompt.LimitsFrom(m.cfg),
		Job:        job,
	})
	req.Prompt.Extra = append(req.Prompt.Extra, m.permissionsSection(req.Info, req.Roles))
	system := prompt.Build(req.Prompt)
	ctx = withRefusals(withRunLog(chat.WithRunInfo(ctx, req.Info), ch, sess, job.Trigger.ID))
	reply := a.NewReply(ctx, channelID, req.Trigger, chat.ReplyOptions{Title: job.Title, Quiet: m.quiet(a.Name(), channelID)})
	lg.Info("run started", "late", job.Late)
	began := m.now()
	// The trigger's fsync may still be in flight (Job.logged): the model
	// request goes out meanwhile, but the run's events wait for it and are
	// shown in order once it is done; if it failed the run is cut short
	// and answers nothing (the dispatcher has told the channel).
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	events := holdEvents(job.logged, func(ev agent.Event) { reply.Event(ctx, ev) }, cancelRun)
	out := m.agent.Run(runCtx, agent.Input{
		System:    system,
		History:   sess.History(),
		OnMessage: sess.Append,
		OnCompact: sess.Compacted,
		Emit:      events.emit,
	})
	if err := events.release(); err != nil {
		lg.Error("run abandoned: its message could not be stored", "err", err)
		m.mu.Lock()
		cs.cancel = nil
		m.mu.Unlock()
		_, _ = reply.Finish(context.WithoutCancel(ctx), "")
		return Outcome{Ran: true, Err: err, Silent: true}
	}
	lg.Info("run ended", "stop", out.StopReason, "turns", out.Turns, "tokens_in", out.Usage.InputTokens, "tokens_out", out.Usage.OutputTokens, "compactions", out.Compactions,
		"answered_by", strings.Join(out.AnsweredBy, ","))
	m.metrics.RunEnded(a.Name(), job.kind(), string(out.StopReason), m.now().Sub(began), out.Usage)

	// From here on a stop is too late: the answer is being posted.
	m.mu.Lock()
	cs.cancel = nil
	stopping := cs.stopping
	m.mu.Unlock()
	if stopping != nil {
		// Let "Stopping…" reach the channel before "Stopped.".
		select {
		case <-stopping:
		case <-clock.After(m.clock, 10*time.Second):
		}
	}
	shutdown := stopping == nil && m.ctx.Err() != nil
	if out.StopReason != agent.StopDone && out.StopReason != agent.StopAborted {
		lg.Warn("run failed", "stop", out.StopReason, "err", out.Err)
	}
	final, silent := composeAnswer(out, job, stopping != nil, shutdown)
	pause, paused := budgetPause(job, out)
	if pause != nil {
		// A periodic event at a daily cap: said once, and paused until
		// the cap resets rather than refused again at every occurrence.
		final, silent = paused, false
	}
	m.record(ctx, a, ch, sess, reply, job, final, out.StopReason == agent.StopAborted && shutdown, lg)
	if final != "" && !(out.StopReason == agent.StopAborted && shutdown) {
		m.attachChickResult(ctx, a, channelID, ch.Dir(), job.Chick)
	}
	return Outcome{
		Ran: true, Err: out.Err, Silent: silent,
		Stopped:  out.StopReason == agent.StopAborted && stopping != nil,
		Shutdown: out.StopReason == agent.StopAborted && shutdown,
		Pause:    pause,
	}
}

// load opens the channel's store and context and syncs the log into it up
// to the job's own message. A non-nil Outcome means the run stops there
// (an error already told to the channel, or nothing left to answer);
// otherwise the caller closes the session.
func (m *Mother) load(ctx context.Context, a chat.Adapter, channelID string, job Job, lg *slog.Logger) (*store.Channel, *session.Session, *Outcome) {
	ch, err := m.store.Channel(a.Name(), channelID)
	if err != nil {
		lg.Error("cannot open channel store", "err", err)
		return nil, nil, &Outcome{Err: err}
	}
	sess, err := session.Load(ch, a.SelfID())
	if err != nil {
		lg.Error("cannot load context", "err", err)
		m.post(ctx, a, channelID, "I could not load this channel's context, so I am not answering. The operator has the details in my log.")
		return nil, nil, &Outcome{Err: err}
	}
	kept := false
	defer func() {
		if !kept {
			sess.Close()
		}
	}()
	synced := job.TriggerEnd > 0 && sess.Synced(job.TriggerEnd)
	if job.answer != nil {
		m.answeredBefore(sess, job.answer, synced, lg)
		return nil, nil, &Outcome{Skipped: true}
	}
	if job.kind() == KindMessage && job.relogged {
		// Its first logging was cut away (a failed fsync) after a run had
		// begun, which may have synced it into the context: whatever the
		// context holds, this is its first answer. The sync skips what
		// the context holds and moves its cursor.
		lg.Info("answering a message logged again after the disk failed under it")
		if !synced {
			if _, err := sess.Sync(job.TriggerEnd); err != nil {
				lg.Error("cannot sync log into context", "err", err)
				m.post(ctx, a, channelID, "I could not read this channel's log, so I am not answering. The operator has the details in my log.")
				return nil, nil, &Outcome{Err: err}
			}
		}
		if abandonedRun(sess.Records(), job.Trigger.ID) {
			// The abandoned run's own steps follow the message in the
			// context (it showed none of them): it is carried on from
			// there, and an answer it had reached is posted (once this
			// line is on disk), rather than the model asked again with
			// that answer as the last word.
			if !m.resumeContext(ch, sess, job.Trigger.ID, lg) {
				if err := job.logged.wait(); err != nil {
					return nil, nil, &Outcome{Ran: true, Err: err, Silent: true}
				}
				m.recordFinished(ctx, a, ch, sess, job, lg)
				return nil, nil, &Outcome{Skipped: true}
			}
		}
		kept = true
		return ch, sess, nil
	}
	if !synced && !job.interrupted && job.kind() == KindMessage && sess.Holds(job.Trigger.ID) {
		// The same message logged again further on (an adapter delivered
		// it a second time after a restart): the first was answered.
		lg.Info("trigger already in the context: delivered twice; not answering it again")
		return nil, nil, &Outcome{Skipped: true}
	}
	if synced && job.recovered && !job.interrupted {
		// Queued in the marker, yet its message is in the context: its
		// run had started, and the marker saying so was lost (a power cut
		// within the marker's deferred fsync). Skipping it, as for a
		// message an earlier run read, left an acknowledged message
		// unanswered (the power-cut soak, issue 35): resume it instead,
		// which finds an answer the run had already given.
		lg.Info("recovered job whose run had started; resuming it")
		job.interrupted = true
	}
	if synced {
		if !job.interrupted {
			// An earlier run already read this message along with another one.
			lg.Debug("trigger already answered with an earlier message")
			return nil, nil, &Outcome{Skipped: true}
		}
		if !m.resumeContext(ch, sess, job.Trigger.ID, lg) {
			m.recordFinished(ctx, a, ch, sess, job, lg)
			return nil, nil, &Outcome{Skipped: true}
		}
	} else if _, err := sess.Sync(job.TriggerEnd); err != nil {
		// Sync up to this job's own message: later messages get their own run.
		lg.Error("cannot sync log into context", "err", err)
		m.post(ctx, a, channelID, "I could not read this channel's log, so I am not answering. The operator has the details in my log.")
		return nil, nil, &Outcome{Err: err}
	}
	kept = true
	return ch, sess, nil
}

// runState is what a run's request is composed from: the loaded channel
// and the job.
type runState struct {
	Adapter, ChannelID    string
	Workspace, ChannelDir string
	Users                 []chat.UserInfo
	Channels              []chat.ChannelInfo
	Now                   time.Time
	Location              *time.Location
	HostTools             []prompt.HostTool
	// Roles are the roles of the person the run acts for (rolesOf).
	Roles []string
	// Limits are the configured numbers the prompt states.
	Limits prompt.Limits
	Job    Job
}

// runRequest is what a run asks: the system prompt's input, the run info
// the tools see, and the message the reply answers (nil for an event).
type runRequest struct {
	// Roles are the roles the run acts with.
	Roles   []string
	Prompt  prompt.Input
	Info    chat.RunInfo
	Trigger *chat.ChannelMessage
}

// composeRun decides what goes into a run from the loaded state. It is
// pure.
func composeRun(st runState) runRequest {
	req := runRequest{
		Prompt: prompt.Input{
			Flavour:    prompt.Mother,
			Workspace:  st.Workspace,
			ChannelDir: st.ChannelDir,
			Channel:    chat.QualifiedID(st.Adapter, st.ChannelID),
			Users:      st.Users,
			Channels:   st.Channels,
			Now:        st.Now,
			Location:   st.Location,
			HostTools:  st.HostTools,
			Limits:     st.Limits,
		},
		Info:  chat.RunInfo{Adapter: st.Adapter, ChannelID: st.ChannelID, ChannelDir: st.ChannelDir, Kind: string(st.Job.kind()), ActingFor: st.Job.actingFor()},
		Roles: st.Roles,
	}
	if st.Job.kind() == KindEvent {
		req.Info.Event, req.Info.EventMaySchedule = st.Job.EventFile, st.Job.EventMaySchedule
	}
	if st.Job.kind() == KindMessage {
		req.Info.UserID = st.Job.Trigger.Sender.ID
		req.Info.IsAdmin = st.Job.Trigger.Sender.ID != "" && isAdminRole(st.Roles)
		t := st.Job.Trigger
		req.Trigger = &t
	}
	if st.Job.kind() == KindChick && st.Job.Chick != nil {
		// A chick's result: the run acts for whoever asked for the chick.
		req.Info.UserID = st.Job.Chick.StartedBy
		req.Info.IsAdmin = req.Info.UserID != "" && isAdminRole(st.Roles)
	}
	return req
}

// composeAnswer turns a run's outcome into the text to post (empty: post
// nothing) and whether the model chose silence. stopped: a stop was asked
// for; shutdown: Mother is shutting down. It is pure.
func composeAnswer(out agent.Output, job Job, stopped, shutdown bool) (final string, silent bool) {
	final = strings.TrimSpace(out.Final)
	switch out.StopReason {
	case agent.StopDone:
		if stopped && final != "" && !strings.HasPrefix(final, SilentMarker) {
			final += "\n\n(I had already finished when you said stop.)"
		}
	case agent.StopRepeating, agent.StopUnusable:
		// The agent's own plain words say what happened.
	case agent.StopAborted:
		switch {
		case shutdown:
			final = joinNonEmpty(final, "Interrupted: I am shutting down. I will pick this up again when I am back.")
		default:
			final = joinNonEmpty(final, NoticeStopped)
		}
	default:
		final = joinNonEmpty(final, UserError(out.Err))
	}
	// [SILENT] is checked before any late header is added.
	silent = out.StopReason == agent.StopDone && strings.HasPrefix(final, SilentMarker)
	if silent {
		final = ""
	}
	if job.Chick != nil {
		final, silent = chickAnswer(out, job.Chick, final, silent, stopped, shutdown), false
	}
	if job.Late && final != "" {
		note := job.LateNote
		if note == "" {
			note = "(Late answer: your message arrived while I was offline.)"
		}
		final = note + "\n\n" + final
	}
	return final, silent
}

// MetaInterrupted marks, in log.jsonl, Mother's reply to a run a shutdown
// cut short ("Interrupted: I am shutting down…"): it is not the run's
// answer, and the run is resumed at the next start.
const MetaInterrupted = "interrupted"

// answers reports whether logged message msg is Mother's answer (self is
// her sender id, as ownLine) to message trigger: her reply to it, not a
// shutdown's interruption notice.
func answers(msg chat.ChannelMessage, self, trigger string) bool {
	return ownLine(msg, self) && msg.ReplyTo == trigger && msg.Metadata[MetaInterrupted] == nil
}

// OwnUsername is the sender name of the lines Mother logs herself.
const OwnUsername = "mother"

// ownSender is the sender of the lines Mother logs herself (her replies,
// notices, relayed chick results, file writes): her id on a's platform, OwnUsername, a
// bot.
func ownSender(a chat.Adapter) chat.Sender {
	return chat.Sender{ID: a.SelfID(), Username: OwnUsername, IsBot: true}
}

// ownLine reports whether logged message msg is one Mother logged
// herself, self being her id on the platform. Before an adapter has
// connected it does not know that id (Telegram's getMe, Discord's READY
// and Slack's auth.test come with its start, and a Pi back from a power
// cut may have no network yet), but the restart's recovery, which runs
// before the adapters start, must still find the answers she logged
// before the cut: with self "", a line from a bot named OwnUsername is
// hers. (Telegram bot names end in "bot"; another bot named "mother" on
// Discord or Slack could at worst keep her from posting an answer again.)
func ownLine(msg chat.ChannelMessage, self string) bool {
	if self == "" {
		return msg.Sender.IsBot && msg.Sender.Username == OwnUsername
	}
	return msg.Sender.ID == self
}

// record posts the answer and keeps it in the channel's log and context.
// interrupted: final is a shutdown's interruption notice, not an answer.
func (m *Mother) record(ctx context.Context, a chat.Adapter, ch *store.Channel, sess *session.Session, reply chat.Reply, job Job, final string, interrupted bool, lg *slog.Logger) {
	// Finish with a context that outlives an abort, so "Stopped." is shown.
	fctx := context.WithoutCancel(ctx)
	platformID, err := reply.Finish(fctx, final)
	if err != nil {
		lg.Error("cannot post reply", "err", err)
	} else if final != "" {
		m.metrics.MessageOut(a.Name())
	}
	if final == "" || m.crashed("answer posted") {
		return
	}
	id := platformID
	if id == "" {
		id = m.newID()
	}
	msg := chat.ChannelMessage{
		ID:        id,
		ChannelID: ch.ID,
		Timestamp: m.now(),
		Sender:    ownSender(a),
		Text:      final,
		ReplyTo:   job.Trigger.ID,
	}
	if interrupted {
		msg.Metadata = map[string]any{MetaInterrupted: "shutdown"}
	}
	// Durable before anything that follows it (the marker saying the
	// job is done, the next job): a power cut after this fsync finds the
	// answer in the log, and the recovery does not post it again. The
	// one window left is the platform's answer to the post and this
	// fsync (docs/dispatch.md, Restarts).
	if _, err := ch.AppendMessage(msg); err != nil {
		lg.Error("cannot log reply", "err", err)
		return
	}
	lg.Info("answer stored", "reply_id", id)
	if m.crashed("answer logged") {
		return
	}
	if err := sess.MarkSeen(id); err != nil {
		lg.Error("cannot mark reply as seen in context", "err", err)
	}
	if !interrupted {
		m.speak(fctx, a, job, final, lg)
	}
}

// triggerRecord is the index in recs of the last record of log message
// trigger, or -1.
func triggerRecord(recs []store.ContextRecord, trigger string) int {
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Type == store.RecordMessage && recs[i].MsgID == trigger {
			return i
		}
	}
	return -1
}

// abandonedRun reports whether the context holds the record of message
// trigger followed by steps of a run on it (assistant turns, tool
// results) and nothing else said after it.
func abandonedRun(recs []store.ContextRecord, trigger string) bool {
	at := triggerRecord(recs, trigger)
	if at < 0 {
		return false
	}
	steps := false
	for _, r := range recs[at+1:] {
		if r.Message == nil {
			continue
		}
		if r.Message.Role == model.RoleUser {
			return false
		}
		steps = true
	}
	return steps
}

// answeredBefore settles a recovered job whose answer log.jsonl held
// (Job.answer: the run had answered, and its answer was fsynced before
// the marker could say the job was done, record), which is not run
// again. If the context ends with that answer (the run's last step) but
// the crash came before the answer was marked as in it, it is marked
// now, or the next sync adds it again; a context that lost its tail to a
// power cut gets the answer back from the next sync, as her turn.
func (m *Mother) answeredBefore(sess *session.Session, answer *chat.ChannelMessage, synced bool, lg *slog.Logger) {
	lg.Info("the recovered job had been answered before the restart; nothing to resume", "reply_id", answer.ID)
	h := sess.History()
	ends := len(h) > 0 && h[len(h)-1].Role == model.RoleAssistant && len(h[len(h)-1].ToolCalls) == 0
	if synced && ends && !sess.Holds(answer.ID) {
		if err := sess.MarkSeen(answer.ID); err != nil {
			lg.Error("cannot mark reply as seen in context", "err", err)
		}
	}
}

// recordFinished completes a run cut off after it had finished (its
// context ends with the answer) whose answer log.jsonl does not hold
// (answeredBefore): the crash came between the answer and its log line,
// before or after it was posted (she cannot tell which), so the answer is
// posted again and logged: twice is better than not at all.
func (m *Mother) recordFinished(ctx context.Context, a chat.Adapter, ch *store.Channel, sess *session.Session, job Job, lg *slog.Logger) {
	h := sess.History()
	final, silent := composeAnswer(agent.Output{Final: h[len(h)-1].Content, StopReason: agent.StopDone}, job, false, false)
	if silent || final == "" {
		return
	}
	lg.Info("the interrupted run had answered, but the answer is not in the log; posting it again")
	var trigger *chat.ChannelMessage
	if job.kind() == KindMessage {
		t := job.Trigger
		trigger = &t
	}
	reply := a.NewReply(ctx, ch.ID, trigger, chat.ReplyOptions{Title: job.Title, Quiet: m.quiet(a.Name(), ch.ID)})
	m.record(ctx, a, ch, sess, reply, job, final, false, lg)
}

// ResumeNote is the context note a run resumed after a restart starts
// from.
const ResumeNote = "[restart] Mother restarted while answering the message above and the run was cut off. Continue from where it stopped; check before repeating anything that changes things (a tool call may or may not have taken effect)."

// resumeContext prepares the context of a run cut off by a restart: tool
// calls left without a result get one (interruptedResult: what became of
// a spawn_chick call, else an error saying it may or may not have taken
// effect), then a note says what happened. It reports false when the run
// had in fact finished (the context ends with a final answer).
func (m *Mother) resumeContext(ch *store.Channel, sess *session.Session, trigger string, lg *slog.Logger) bool {
	h := sess.History()
	if n := len(h); n > 0 && h[n-1].Role == model.RoleAssistant && len(h[n-1].ToolCalls) == 0 {
		return false
	}
	answered := map[string]bool{}
	for i := len(h) - 1; i >= 0; i-- {
		msg := h[i]
		if msg.Role == model.RoleTool {
			answered[msg.ToolCallID] = true
			continue
		}
		if msg.Role == model.RoleAssistant {
			for _, c := range msg.ToolCalls {
				if !answered[c.ID] {
					if err := sess.Append(m.interruptedResult(sess.Records(), ch, trigger, c)); err != nil {
						lg.Error("cannot record interrupted tool call", "err", err)
					}
				}
			}
		}
		break
	}
	if err := sess.Append(model.Message{Role: model.RoleUser, Content: ResumeNote}); err != nil {
		lg.Error("cannot record resume note", "err", err)
	}
	return true
}

// post sends a notice, logging failures.
func (m *Mother) post(ctx context.Context, a chat.Adapter, channelID, text string) {
	if _, err := a.Post(context.WithoutCancel(ctx), channelID, text); err != nil {
		m.logger.Error("cannot post notice", "channel", chat.QualifiedID(a.Name(), channelID), "err", err)
		return
	}
	m.metrics.MessageOut(a.Name())
}

// isAdmin reports whether userID is an admin of the adapter by id: one of
// its admins, or named owner or admin in roles.adapters.<name>.members
// (no platform lookup: it serves DMs and stops, which must not wait).
func (m *Mother) isAdmin(adapterName, userID string) bool {
	if userID == "" {
		return false
	}
	if slices.Contains(m.cfg.Adapters[adapterName].Admins, userID) {
		return true
	}
	members := m.cfg.Roles.Adapters[adapterName].Members
	return slices.Contains(members[config.RoleOwner], userID) || slices.Contains(members[config.RoleAdmin], userID)
}

func (m *Mother) quiet(adapterName, channelID string) bool {
	ac, ok := m.cfg.Adapters[adapterName]
	if !ok {
		return false
	}
	if ac.Quiet {
		return true
	}
	for _, c := range ac.QuietChannels {
		if c == channelID {
			return true
		}
	}
	return false
}

// UserError turns a run error into one plain sentence for a channel
// (model.Sentence). The operator's log has the full chain.
func UserError(err error) string {
	return model.Sentence(err)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

func joinNonEmpty(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n\n" + b
}

// ReadPolicy keeps Mother's read tool out of other channels' directories:
// in a run for one channel, paths under <workspace>/channels/ must lie in
// that channel's directory (another channel's log is not this channel's
// business). Everything else in the workspace is readable.
func ReadPolicy(workspace string) func(ctx context.Context, abs string) error {
	channels := filepath.Join(workspace, "channels")
	if real, err := filepath.EvalSymlinks(channels); err == nil {
		channels = real
	}
	return func(ctx context.Context, abs string) error {
		rel, err := filepath.Rel(channels, abs)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return nil // not under channels/
		}
		info, ok := chat.RunInfoFrom(ctx)
		if !ok || info.ChannelDir == "" {
			return errors.New("channel files can only be read in a channel's run")
		}
		own := info.ChannelDir
		if real, err := filepath.EvalSymlinks(own); err == nil {
			own = real
		}
		if r, err := filepath.Rel(own, abs); err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) {
			return nil
		}
		return errors.New("that is another channel's directory; you may read only this channel's files")
	}
}
