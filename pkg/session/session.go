// Package session is one channel's model context: what context.jsonl holds,
// brought up to date with the messages logged since the last run, and
// extended as a run produces messages.
package session

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/store"
)

// Session is a loaded context. It is not safe for concurrent use; the
// channel's single runner owns it for the duration of a run.
//
// It reads the store's parsed context in place (store.Channel.OpenContext:
// no copy of the records per run, and what the last run appended is not
// read back) and changes it only through the store, which keeps that state
// current; Close lets the store drop it again.
type Session struct {
	ch      *store.Channel
	st      *store.ContextState
	release func()
	selfID  string
}

// Load reads the channel's context.jsonl. selfID is Mother's own sender id
// in this channel; her replies are in the context already and never synced.
// The session holds the store's parsed context until Close.
func Load(ch *store.Channel, selfID string) (*Session, error) {
	st, release, err := ch.OpenContext()
	if err != nil {
		return nil, err
	}
	return &Session{ch: ch, st: st, release: release, selfID: selfID}, nil
}

// Close releases the parsed context to the store's cache limits. The
// session is not used after it.
func (s *Session) Close() { s.release() }

// Synced reports whether the log up to end has been synced into the context.
func (s *Session) Synced(end int64) bool { return end <= s.st.Cursor.Offset }

// Holds reports whether the context holds log message id (synced, or
// marked seen).
func (s *Session) Holds(id string) bool { return s.st.IDs[id] }

// appendRecords appends recs to context.jsonl; the store adds them to the
// session's state as written. A state that did not take them in (the
// store's parse dropped after an earlier failure) is an error: the run
// would otherwise go on without them.
func (s *Session) appendRecords(recs ...store.ContextRecord) error {
	n := len(s.st.Records)
	if err := s.ch.AppendContext(recs...); err != nil {
		return err
	}
	if len(s.st.Records) != n+len(recs) {
		return fmt.Errorf("context of %s: the loaded state no longer follows context.jsonl (an earlier write failed); the next run reloads it", s.ch.QualifiedID())
	}
	return nil
}

// Sync brings messages logged since the last sync, up to log offset upTo
// (<= 0: everything), into the context, in log order, and returns the ones
// from other people. It costs O(new messages).
func (s *Session) Sync(upTo int64) ([]store.LoggedMessage, error) {
	pending, next, err := s.ch.Pending(s.st.Cursor, upTo, func(id string) bool { return s.st.Seen[id] || s.st.IDs[id] })
	if err != nil {
		return nil, err
	}
	var recs []store.ContextRecord
	var synced []store.LoggedMessage
	for _, lm := range pending {
		if lm.Msg.Sender.ID == s.selfID && s.selfID != "" && lm.Msg.Sender.IsBot {
			// Mother's own words that are not in the context (a crash
			// between logging a reply and marking it seen) come back as
			// her assistant turn, not as a user message.
			m := model.Message{Role: model.RoleAssistant, Content: lm.Msg.Text}
			recs = append(recs, store.ContextRecord{Type: store.RecordMessage, MsgID: lm.Msg.ID, LogEnd: lm.End, Message: &m})
			continue
		}
		m := UserMessage(lm.Msg)
		recs = append(recs, store.ContextRecord{Type: store.RecordMessage, MsgID: lm.Msg.ID, LogEnd: lm.End, Message: &m, Images: ImagePaths(lm.Msg)})
		synced = append(synced, lm)
	}
	last := s.st.Cursor
	if n := len(recs); n > 0 {
		last = store.Cursor{Offset: recs[n-1].LogEnd, LastID: recs[n-1].MsgID}
	}
	if next != last {
		// Seen messages (or unreadable lines) after the last synced one:
		// record the cursor past them so a reload does not revisit them.
		recs = append(recs, store.ContextRecord{Type: store.RecordSeen, MsgID: next.LastID, LogEnd: next.Offset})
	}
	if err := s.appendRecords(recs...); err != nil {
		return nil, err
	}
	return synced, nil
}

// Append records a message the run produced.
func (s *Session) Append(m model.Message) error {
	return s.appendRecords(store.ContextRecord{Type: store.RecordMessage, Message: &m})
}

// MarkSeen records that log message id (Mother's reply, logged after the
// run) is already in the context.
func (s *Session) MarkSeen(id string) error {
	return s.appendRecords(store.ContextRecord{Type: store.RecordSeen, MsgID: id})
}

// History is the context as model messages: the latest compaction summary
// (if any) followed by every message after it. Image attachments of synced
// messages are loaded inline (the agent drops them for models without
// vision); one that is gone or too large is replaced by a note.
//
// The slice is the caller's, with room for a run's messages to be appended
// without copying it again.
func (s *Session) History() []model.Message {
	records := s.st.Records
	start, n := 0, 0
	summary := ""
	for i, r := range records {
		switch {
		case r.Type == store.RecordCompaction:
			start, summary, n = i+1, r.Summary, 0
		case r.Type == store.RecordMessage && r.Message != nil:
			n++
		}
	}
	out := make([]model.Message, 0, n+1+historyRoom)
	if summary != "" {
		out = append(out, SummaryMessage(summary))
	}
	for _, r := range records[start:] {
		if r.Type == store.RecordMessage && r.Message != nil {
			m := *r.Message
			if len(r.Images) > 0 {
				m = s.withImages(m, r.Images)
			}
			out = append(out, m)
		}
	}
	return out
}

// historyRoom is the spare capacity History leaves for a run's messages.
const historyRoom = 16

// MaxImageBytes caps an image attachment shown inline.
const MaxImageBytes = 5 << 20

// imageTypes are the attachment types shown inline, by extension.
var imageTypes = map[string]string{".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp"}

// ImagePaths returns the channel-relative paths of a message's image
// attachments.
func ImagePaths(m chat.ChannelMessage) []string {
	var out []string
	for _, a := range m.Attachments {
		if imageType(a) != "" {
			out = append(out, a.LocalPath)
		}
	}
	return out
}

func imageType(a chat.ChannelAttachment) string {
	if t := imageTypes[strings.ToLower(filepath.Ext(a.LocalPath))]; t != "" {
		return t
	}
	switch a.MimeType {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return a.MimeType
	}
	return ""
}

func (s *Session) withImages(m model.Message, paths []string) model.Message {
	m.Images = nil
	var notes []string
	for _, rel := range paths {
		clean := filepath.Clean(rel)
		if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
			notes = append(notes, fmt.Sprintf("[image %s is outside the channel directory and not shown]", rel))
			continue
		}
		p := filepath.Join(s.ch.Dir(), clean)
		fi, err := os.Stat(p)
		if err != nil {
			notes = append(notes, fmt.Sprintf("[image %s is no longer available]", rel))
			continue
		}
		if fi.Size() > MaxImageBytes {
			notes = append(notes, fmt.Sprintf("[image %s is too large to show inline (%d MB)]", rel, fi.Size()>>20))
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			notes = append(notes, fmt.Sprintf("[image %s could not be read]", rel))
			continue
		}
		mt := http.DetectContentType(data)
		if !strings.HasPrefix(mt, "image/") {
			notes = append(notes, fmt.Sprintf("[%s is not an image]", rel))
			continue
		}
		m.Images = append(m.Images, model.Image{MimeType: mt, Data: data})
	}
	if len(notes) > 0 {
		m.Content += "\n" + strings.Join(notes, "\n")
	}
	return m
}

// Records returns the loaded records (shared; do not modify).
func (s *Session) Records() []store.ContextRecord { return s.st.Records }

// Cursor is how far the log has been synced.
func (s *Session) Cursor() store.Cursor { return s.st.Cursor }

// Rewrite replaces the context with a compaction summary followed by kept
// messages (the recent tail of History, as a Compactor returns it),
// archiving the old records. Kept messages keep their original records
// (message ids, image references); the cursor and any seen ids past it are
// preserved.
func (s *Session) Rewrite(summary string, kept []model.Message) error {
	cursor := s.st.Cursor
	after, err := s.ch.IDsAfter(cursor.Offset)
	if err != nil {
		return fmt.Errorf("compact context: %w", err)
	}
	var seen []string
	for id := range s.st.Seen {
		if after[id] {
			seen = append(seen, id)
		}
	}
	sort.Strings(seen)
	recs := []store.ContextRecord{
		{Type: store.RecordSession},
		{Type: store.RecordCompaction, Summary: summary, MsgID: cursor.LastID, LogEnd: cursor.Offset, Seen: seen},
	}
	recs = append(recs, s.keptRecords(kept)...)
	// The store resets the state to these records as written.
	if err := s.ch.RewriteContext(recs); err != nil {
		return err
	}
	if len(s.st.Records) != len(recs) {
		return fmt.Errorf("context of %s: the loaded state no longer follows context.jsonl (an earlier write failed); the next run reloads it", s.ch.QualifiedID())
	}
	return nil
}

// Compacted is Rewrite with the argument order of agent.Input.OnCompact.
func (s *Session) Compacted(kept []model.Message, summary string) error {
	return s.Rewrite(summary, kept)
}

// keptRecords maps kept messages back to the records they came from,
// matching from the end (kept is a tail of the history); messages with no
// record (added in memory) get a fresh one. Sync cursors are dropped from
// reused records: the compaction record carries the cursor.
func (s *Session) keptRecords(kept []model.Message) []store.ContextRecord {
	out := make([]store.ContextRecord, len(kept))
	records := s.st.Records
	ri := len(records) - 1
	for ki := len(kept) - 1; ki >= 0; ki-- {
		m := kept[ki]
		found := false
		for j := ri; j >= 0; j-- {
			r := records[j]
			if r.Type == store.RecordCompaction {
				break
			}
			if r.Type == store.RecordMessage && r.Message != nil && sameMessage(*r.Message, m) {
				r.LogEnd = 0
				out[ki], ri, found = r, j-1, true
				break
			}
		}
		if !found {
			m.Images = nil
			out[ki] = store.ContextRecord{Type: store.RecordMessage, Message: &m}
		}
	}
	return out
}

func sameMessage(a, b model.Message) bool {
	if a.Role != b.Role || a.ToolCallID != b.ToolCallID || len(a.ToolCalls) != len(b.ToolCalls) {
		return false
	}
	// Loaded images may have added notes to the content.
	return a.Content == b.Content || strings.HasPrefix(b.Content, a.Content+"\n[")
}

// SummaryPrefix starts the message that carries a compaction summary.
const SummaryPrefix = agent.SummaryPrefix

// SummaryMessage is the user-role message carrying a compaction summary.
func SummaryMessage(summary string) model.Message { return agent.SummaryMessage(summary) }

// UserMessage formats a channel message for the model:
// "[YYYY-MM-DD HH:MM:SS+HH:MM] [username]: text", then the attachments.
func UserMessage(m chat.ChannelMessage) model.Message {
	return model.Message{Role: model.RoleUser, Content: FormatMessage(m)}
}

// FormatMessage renders one message as the model sees it.
func FormatMessage(m chat.ChannelMessage) string {
	ts := m.Timestamp
	if ts.IsZero() {
		ts = clock.Real{}.Now()
	}
	name := m.Sender.Username
	if name == "" {
		name = m.Sender.ID
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[%s] [%s]: %s", ts.Local().Format("2006-01-02 15:04:05-07:00"), name, m.Text)
	if len(m.Attachments) > 0 {
		b.WriteString("\n<attachments>")
		for _, a := range m.Attachments {
			fmt.Fprintf(&b, "\n%s", a.LocalPath)
		}
		b.WriteString("\n</attachments>")
	}
	return b.String()
}
