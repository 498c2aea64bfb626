package mother

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/store"
)

// The named steps of Deliver (dispatch.go): what a message is, its
// reservation in the in-flight marker, and the messages that get no run.

// delivery is what Deliver decided about a message before logging it.
type delivery struct {
	addressed bool
	// isStop, stopAll: a stop command (ParseStop).
	isStop, stopAll bool
	// refusedDM: a DM the dm policy refuses.
	refusedDM bool
	// access: an answer to a chick's access request.
	access bool
	// noTalk is the refusal sentence for a person whose roles do not
	// grant talk here ("": may talk).
	noTalk string
	// answer: the message gets a run.
	answer bool
}

// classify decides first whether the message is one to answer (not
// Mother's own, not a bot's, not a refused DM, not a stop, from a person
// who may talk to her, and addressed to her): its job goes into the
// in-flight marker before the message goes into the log, so a crash
// between the two leaves a job the next start finds (logging the message
// then if it is missing), never a logged message nobody answers. It fills
// in a missing id and time.
func (m *Mother) classify(ctx context.Context, a chat.Adapter, msg *chat.ChannelMessage, late bool) delivery {
	d := delivery{addressed: Addressed(a.SelfID(), *msg)}
	if msg.ID == "" {
		msg.ID = m.newID()
	}
	if msg.Timestamp.IsZero() {
		msg.Timestamp = m.now()
	}
	person := !msg.Sender.IsBot && msg.Sender.ID != a.SelfID()
	d.stopAll, d.isStop = ParseStop(msg.Text)
	d.refusedDM = msg.IsDM && !m.mayDM(a.Name(), msg.Sender.ID)
	d.access = !d.refusedDM && person && m.isAccessAnswer(a, *msg, late, d.addressed)
	d.answer = d.addressed && !d.isStop && !d.access && !d.refusedDM && person
	if d.answer {
		if sentence, ok := m.mayTalk(ctx, a.Name(), msg.ChannelID, msg.Sender.ID); !ok {
			d.noTalk, d.answer = sentence, false
		}
	}
	return d
}

// mayTalk checks the talk permission. When the channel's default role
// may talk (as it may unless roles say otherwise) no platform is asked.
func (m *Mother) mayTalk(ctx context.Context, adapter, channel, user string) (string, bool) {
	if m.terminal(adapter) || m.grants([]string{m.cfg.Roles.DefaultRole(adapter, channel)}, config.PermTalk) {
		return "", true
	}
	return m.permit(ctx, adapter, channel, user, config.PermTalk)
}

// reserveFor writes the job of a message to answer into the channel's
// in-flight marker, durably, before its line is logged (nil: nothing to
// answer, or no room: the error says which).
func (m *Mother) reserveFor(cs *channelState, ch *store.Channel, msg chat.ChannelMessage, late bool, d delivery, lg *slog.Logger) (*Job, error) {
	if !d.answer {
		return nil, nil
	}
	// relogged is taken here, when the job of the delivery that brings
	// the message again is made: the run of the delivery it failed under
	// may still be loading, and must not take it.
	job := &Job{Kind: KindMessage, Trigger: msg, Late: late, relogged: m.takeUnstored(cs.adapter.Name(), msg.ChannelID, msg.ID)}
	if err := m.reserve(cs, ch, job); err != nil {
		return nil, err
	}
	// Once the line may be on disk (its own fsync, or any other append's),
	// a power cut must not leave it there without its job: the adapter
	// does not deliver again what the log holds (the power-cut soak,
	// issue 35). The line itself carries the job (MetaAnswering), and the
	// channel's marker, which a restart reads, is on disk before it (see
	// answering.go): no fsync of the marker per message.
	if err := m.markerOnDisk(cs); err != nil {
		lg.Warn("cannot fsync in-flight marker; a power cut now could leave this message unanswered", "err", err)
	}
	return job, nil
}

// handledUnanswered handles a logged message that gets no run: Mother's
// own, a bot's, a refused DM, a person who may not talk here, an access
// answer, a stop. It reports whether the message was one of those.
func (m *Mother) handledUnanswered(ctx context.Context, a chat.Adapter, ch *store.Channel, msg chat.ChannelMessage, late bool, d delivery, unlock func(), lg *slog.Logger) bool {
	if msg.Sender.ID == a.SelfID() {
		return true
	}
	m.metrics.MessageIn(a.Name())
	switch {
	case msg.Sender.IsBot:
		return true
	case d.refusedDM:
		unlock()
		m.refuseDM(ctx, a, ch, msg, DMRefusal, lg)
		return true
	case d.noTalk != "":
		unlock()
		if !late {
			m.refuseDM(ctx, a, ch, msg, d.noTalk, lg)
		}
		return true
	case d.access:
		m.handleAccessAnswer(ctx, a, msg, late, d.addressed, unlock)
		return true
	case d.isStop:
		switch {
		case late:
			lg.Info("ignoring a stop that arrived while Mother was down")
			return true
		case d.addressed || m.busy(chat.QualifiedID(a.Name(), msg.ChannelID)):
			unlock()
			m.stop(ctx, a, msg.ChannelID, msg.Sender.ID, d.stopAll)
			return true
		}
	}
	return false
}

// tellNotQueued tells the channel a message it logged gets no run of its
// own (a full queue, a shutdown).
func (m *Mother) tellNotQueued(ctx context.Context, a chat.Adapter, msg chat.ChannelMessage, qerr error, lg *slog.Logger) {
	n := m.queueSize()
	notice := fmt.Sprintf("I am busy in this channel and %d messages are already waiting, so I will not answer this one separately. It is logged and I will see it with the next message.", n)
	switch {
	case errors.Is(qerr, errKept):
		notice = "I am shutting down; I will answer this once I am back."
	case errors.Is(qerr, errClosing):
		notice = "I am shutting down and will not answer this now. It is logged; ask again once I am back."
	}
	lg.Warn("message not queued", "err", qerr)
	if _, perr := a.Post(ctx, msg.ChannelID, notice); perr != nil {
		lg.Error("cannot post notice", "err", perr)
	} else {
		m.metrics.MessageOut(a.Name())
	}
}

// DMRefusal is the one line a refused DM gets.
const DMRefusal = "Sorry, I only answer direct messages from people my operator has allowed. You can talk to me in a channel we share, or ask an admin for access."

// mayDM applies the adapter's access control: admins always; otherwise
// the dm policy ("everyone", "none" or a list of ids). The terminal (an
// adapter of type "cli", or one without configuration, as in --cli mode)
// is the operator at the machine and is not restricted.
func (m *Mother) mayDM(adapterName, userID string) bool {
	ac, ok := m.cfg.Adapters[adapterName]
	if !ok || ac.Type == "cli" {
		return true
	}
	return m.isAdmin(adapterName, userID) || ac.DM.Allows(userID)
}

// refuseDM answers a refused message with one line (DMRefusal, or a
// roles refusal) and logs the line.
func (m *Mother) refuseDM(ctx context.Context, a chat.Adapter, ch *store.Channel, msg chat.ChannelMessage, text string, lg *slog.Logger) {
	if msg.IsDM {
		lg.Info("direct message refused by access control", "user", msg.Sender.ID)
	} else {
		lg.Info("message refused by roles: no talk permission here", "user", msg.Sender.ID)
	}
	id, err := a.Post(ctx, msg.ChannelID, text)
	if err != nil {
		lg.Error("cannot post refusal", "err", err)
		return
	}
	m.metrics.MessageOut(a.Name())
	if id == "" {
		id = m.newID()
	}
	reply := chat.ChannelMessage{ID: id, ChannelID: msg.ChannelID, Timestamp: m.now(), Sender: ownSender(a), Text: text, ReplyTo: msg.ID}
	if _, err := ch.AppendMessage(reply); err != nil {
		lg.Error("cannot log refusal", "err", err)
	}
}
