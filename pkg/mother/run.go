package mother

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/prompt"
	"github.com/mother-chat/mother/pkg/session"
)

// SilentMarker in a final answer suppresses the reply.
const SilentMarker = "[SILENT]"

// run answers one job in one channel.
func (m *Mother) run(ctx context.Context, a chat.Adapter, channelID string, job Job) Outcome {
	qid := chat.QualifiedID(a.Name(), channelID)
	lg := m.logger.With("channel", qid, "msg", job.Trigger.ID)
	ch, err := m.store.Channel(a.Name(), channelID)
	if err != nil {
		lg.Error("cannot open channel store", "err", err)
		return Outcome{Err: err}
	}
	sess, err := session.Load(ch, a.SelfID())
	if err != nil {
		lg.Error("cannot load context", "err", err)
		m.post(ctx, a, channelID, "I could not load this channel's context, so I am not answering. The operator has the details in my log.")
		return Outcome{Err: err}
	}
	if job.TriggerEnd > 0 && sess.Synced(job.TriggerEnd) {
		// An earlier run already read this message along with another one.
		lg.Debug("trigger already answered with an earlier message")
		return Outcome{}
	}
	// Sync up to this job's own message: later messages get their own run.
	if _, err := sess.Sync(job.TriggerEnd); err != nil {
		lg.Error("cannot sync log into context", "err", err)
		m.post(ctx, a, channelID, "I could not read this channel's log, so I am not answering. The operator has the details in my log.")
		return Outcome{Err: err}
	}

	system := prompt.Build(prompt.Input{
		Flavour:    prompt.Mother,
		Workspace:  m.store.Workspace(),
		ChannelDir: ch.Dir(),
		Channel:    qid,
		Users:      a.Users(),
		Channels:   a.Channels(),
		Now:        m.now(),
		Location:   time.Local,
	})
	ctx = chat.WithRunInfo(ctx, chat.RunInfo{
		Adapter:    a.Name(),
		ChannelID:  channelID,
		UserID:     job.Trigger.Sender.ID,
		IsAdmin:    m.isAdmin(a.Name(), job.Trigger.Sender.ID),
		ChannelDir: ch.Dir(),
	})
	trigger := job.Trigger
	reply := a.NewReply(ctx, channelID, &trigger, chat.ReplyOptions{Title: job.Title, Quiet: m.quiet(a.Name(), channelID)})
	lg.Info("run started", "late", job.Late)
	out := m.agent.Run(ctx, agent.Input{
		System:    system,
		History:   sess.History(),
		OnMessage: sess.Append,
		OnCompact: sess.Compacted,
		Emit:      func(ev agent.Event) { reply.Event(ctx, ev) },
	})
	lg.Info("run ended", "stop", out.StopReason, "turns", out.Turns, "tokens_in", out.Usage.InputTokens, "tokens_out", out.Usage.OutputTokens, "compactions", out.Compactions)

	final := strings.TrimSpace(out.Final)
	switch out.StopReason {
	case agent.StopDone:
	case agent.StopAborted:
		final = joinNonEmpty(final, "Stopped.")
	default:
		lg.Warn("run failed", "stop", out.StopReason, "err", out.Err)
		final = joinNonEmpty(final, UserError(out.Err))
	}
	if job.Late && final != "" {
		final = "(Late answer: your message arrived while I was offline.)\n\n" + final
	}
	silent := out.StopReason == agent.StopDone && strings.HasPrefix(final, SilentMarker)
	if silent {
		final = ""
	}
	// Finish with a context that outlives an abort, so "Stopped." is shown.
	fctx := context.WithoutCancel(ctx)
	platformID, err := reply.Finish(fctx, final)
	if err != nil {
		lg.Error("cannot post reply", "err", err)
	}
	if final != "" {
		id := platformID
		if id == "" {
			id = m.newID()
		}
		msg := chat.ChannelMessage{
			ID:        id,
			ChannelID: channelID,
			Timestamp: m.now(),
			Sender:    chat.Sender{ID: a.SelfID(), Username: "mother", IsBot: true},
			Text:      final,
			ReplyTo:   job.Trigger.ID,
		}
		if _, err := ch.AppendMessage(msg); err != nil {
			lg.Error("cannot log reply", "err", err)
		} else if err := sess.MarkSeen(id); err != nil {
			lg.Error("cannot mark reply as seen in context", "err", err)
		}
	}
	return Outcome{Ran: true, Err: out.Err, Silent: silent}
}

// post sends a notice, logging failures.
func (m *Mother) post(ctx context.Context, a chat.Adapter, channelID, text string) {
	if _, err := a.Post(context.WithoutCancel(ctx), channelID, text); err != nil {
		m.logger.Error("cannot post notice", "channel", chat.QualifiedID(a.Name(), channelID), "err", err)
	}
}

func (m *Mother) isAdmin(adapterName, userID string) bool {
	if userID == "" {
		return false
	}
	for _, id := range m.cfg.Adapters[adapterName].Admins {
		if id == userID {
			return true
		}
	}
	return false
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

// UserError turns a run error into one clear line for a channel. The
// operator's log has the full chain.
func UserError(err error) string {
	if err == nil {
		return "Error: the run ended without an answer."
	}
	msg := err.Error()
	switch {
	case errors.Is(err, model.ErrUnreachable):
		return "Error: I cannot reach my model server (" + firstLine(msg) + "). I am still here; try again once it is back."
	case errors.Is(err, model.ErrModelNotFound):
		return "Error: my model is not available (" + firstLine(msg) + ")."
	case errors.Is(err, model.ErrBudgetExhausted):
		return "Error: budget exhausted (" + firstLine(msg) + ")."
	case errors.Is(err, model.ErrContextOverflow):
		return "Error: the conversation no longer fits my model's context window (" + firstLine(msg) + ")."
	}
	return fmt.Sprintf("Error: %s", firstLine(msg))
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
