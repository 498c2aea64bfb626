package mother

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/disk"
)

// maxUnstored bounds Mother's memory of messages whose logging was cut
// away after their run had begun (see notStored).
const maxUnstored = 1024

// notStored handles a message Mother could not log (a full or failing
// disk, most likely): it is logged here and told to the disk monitor; the
// channel is told once per disk episode when the message called for an
// answer (answer), so its sender knows why none comes yet; and the
// adapter gets a chat.NotStoredError: it must not acknowledge the message
// and delivers it again once the disk can be written (Ready). cut: the
// line was written, a run begun for it, and its fsync failed.
func (m *Mother) notStored(ctx context.Context, a chat.Adapter, msg chat.ChannelMessage, lg *slog.Logger, err error, answer, cut bool) error {
	lg.Error("message not stored; not acknowledging it, the adapter delivers it again", "err", err)
	var ready <-chan struct{}
	if m.disk != nil {
		m.disk.Report("", err)
		ready = m.disk.Ready()
	}
	qid := chat.QualifiedID(a.Name(), msg.ChannelID)
	m.mu.Lock()
	// Its run may have begun (the model request goes out while the line
	// goes to disk) and synced it into the context before the line was
	// cut away: when it comes again, it is answered whatever the context
	// says (see load).
	if cut && len(m.unstored) < maxUnstored {
		m.unstored[qid+"/"+msg.ID] = true
	}
	tell := answer && !m.diskTold[qid]
	if tell {
		m.diskTold[qid] = true
	}
	m.mu.Unlock()
	if tell {
		why := "my disk is full"
		switch disk.Classify(err) {
		case disk.Failing:
			why = "my disk fails"
		case disk.OK:
			why = "I cannot write my files"
		}
		m.post(ctx, a, msg.ChannelID, fmt.Sprintf("I cannot store messages right now (%s), so I am not answering yet. I will answer once I can; you need not send it again.", why))
	}
	return &chat.NotStoredError{Err: err, Ready: ready}
}

// takeUnstored reports whether message id of the channel came back after
// its logging was cut away (notStored), and forgets it.
func (m *Mother) takeUnstored(adapter, channelID, id string) bool {
	key := chat.QualifiedID(adapter, channelID) + "/" + id
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.unstored[key] {
		return false
	}
	delete(m.unstored, key)
	return true
}

// diskEvent tells the admins of every adapter that the disk filled or
// failed, or is fine again: one message per episode (disk.Event), by
// direct message where the adapter has them, and in the log.
func (m *Mother) diskEvent(ev disk.Event) {
	text := ev.Message(m.store.DataDir())
	if ev.Kind == disk.Cleared {
		m.mu.Lock()
		m.diskTold = map[string]bool{}
		m.mu.Unlock()
	}
	select {
	case <-m.ready:
	case <-m.ctx.Done():
		return
	}
	ctx, cancel := context.WithTimeout(m.ctx, 30*time.Second)
	defer cancel()
	m.tellAdmins(ctx, text, "disk "+string(ev.Kind))
}

// tellAdmins sends text to the admins of every adapter by direct message
// (the terminal prints it), logging each as about, and reports how many
// were told.
func (m *Mother) tellAdmins(ctx context.Context, text, about string) int {
	m.mu.Lock()
	names := append([]string(nil), m.order...)
	m.mu.Unlock()
	told := 0
	for _, name := range names {
		a, _ := m.Adapter(name)
		targets := m.adminTargets(name)
		dm, ok := a.(chat.DirectMessenger)
		switch {
		case len(targets) == 0:
			m.logger.Warn("no admin to tell", "adapter", name, "about", about)
			continue
		case !ok:
			m.logger.Warn("cannot tell the admins: the adapter has no direct messages", "adapter", name, "about", about)
			continue
		}
		for _, user := range targets {
			if err := dm.DirectMessage(ctx, user, text); err != nil {
				m.logger.Error("cannot tell an admin", "adapter", name, "admin", user, "about", about, "err", err)
				continue
			}
			told++
			m.metrics.MessageOut(name)
			m.logger.Info("admin told", "adapter", name, "admin", user, "about", about)
		}
	}
	return told
}

// adminTargets are whom Mother tells of her own trouble on an adapter:
// its admins; on the terminal (type cli, or unconfigured as in terminal
// mode) whoever sits at it ("").
func (m *Mother) adminTargets(adapter string) []string {
	ac, ok := m.cfg.Adapters[adapter]
	if !ok || ac.Type == "cli" {
		return []string{""}
	}
	return ac.Admins
}
