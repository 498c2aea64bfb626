package mother

import (
	"context"
	"fmt"
	"strings"

	"github.com/mother-chat/mother/pkg/chat"
)

// ChickCanceller cancels the chicks (background workers) of a channel. The
// chicks component implements it; Mother calls it for "stop all". A plain
// "stop" never calls it: stopping Mother's own run leaves the channel's
// chicks working.
type ChickCanceller interface {
	// CancelChicks cancels the running and queued chicks of channel (a
	// qualified id, "slack-acme/C123"). If startedBy is not empty, only
	// the chicks started by that user are cancelled. It returns how many
	// were cancelled.
	CancelChicks(ctx context.Context, channel, startedBy string) (int, error)
}

// ParseStop recognises the stop commands: "stop", or "stop all" / "stop
// everything" (also cancelling chicks), in any case, optionally after
// leading mentions ("@mother stop") and with trailing punctuation.
func ParseStop(text string) (all, ok bool) {
	fields := strings.Fields(text)
	for len(fields) > 0 && (strings.HasPrefix(fields[0], "@") || strings.HasPrefix(fields[0], "<@")) {
		fields = fields[1:]
	}
	for i, f := range fields {
		fields[i] = strings.ToLower(strings.Trim(f, ".,!:;"))
	}
	switch strings.Join(fields, " ") {
	case "stop":
		return false, true
	case "stop all", "stop everything":
		return true, true
	}
	return false, false
}

// Stop implements chat.Inbox (a platform's stop button): like the "stop"
// command.
func (m *Mother) Stop(ctx context.Context, adapterName, channelID, userID string) {
	a, ok := m.Adapter(adapterName)
	if !ok {
		m.logger.Error("stop from unknown adapter", "adapter", adapterName)
		return
	}
	m.stop(ctx, a, channelID, userID, false)
}

// Notices of the stop command.
const (
	NoticeStopping   = "Stopping…"
	NoticeStopped    = "Stopped."
	NoticeNothingRun = "Nothing is running here."
)

// stop aborts the channel's current run at once (the queue is kept), says
// so, and with all also cancels chicks: every chick of the channel for an
// admin, the user's own otherwise.
func (m *Mother) stop(ctx context.Context, a chat.Adapter, channelID, userID string, all bool) {
	qid := chat.QualifiedID(a.Name(), channelID)
	m.mu.Lock()
	cs := m.channels[qid]
	var cancel context.CancelFunc
	var posted chan struct{}
	already := false
	if cs != nil && cs.cancel != nil {
		if cs.stopping != nil {
			already = true
		} else {
			cancel, posted = cs.cancel, make(chan struct{})
			cs.stopping = posted
		}
	}
	m.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	m.logger.Info("stop requested", "channel", qid, "user", userID, "all", all, "was_running", cancel != nil || already)
	var lines []string
	switch {
	case cancel != nil:
		lines = append(lines, NoticeStopping)
	case already:
		lines = append(lines, "Already stopping.")
	default:
		lines = append(lines, NoticeNothingRun)
	}
	if all {
		lines = append(lines, m.cancelChicks(ctx, qid, userID))
	}
	m.post(ctx, a, channelID, strings.Join(lines, " "))
	if posted != nil {
		close(posted)
	}
}

func (m *Mother) cancelChicks(ctx context.Context, qid, userID string) string {
	if m.canceller == nil {
		return "No chicks are running here."
	}
	adapter, _, _ := strings.Cut(qid, "/")
	admin := m.isAdmin(adapter, userID)
	by := userID
	if admin {
		by = ""
	}
	n, err := m.canceller.CancelChicks(context.WithoutCancel(ctx), qid, by)
	if err != nil {
		m.logger.Error("cannot cancel chicks", "channel", qid, "err", err)
		return "I could not cancel the chicks: " + firstLine(err.Error())
	}
	m.logger.Info("chicks cancelled", "channel", qid, "count", n, "started_by", by)
	switch {
	case n == 0 && admin:
		return "No chicks are running here."
	case n == 0:
		return "You have no chicks running here."
	case admin:
		return fmt.Sprintf("Cancelled %d chick(s).", n)
	}
	return fmt.Sprintf("Cancelled %d of your chick(s); an admin can cancel the others.", n)
}
