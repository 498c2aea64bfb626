package session_test

import (
	"os"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/session"
	"github.com/mother-chat/mother/pkg/store"
)

// TestContextTailLostIsRebuiltFromTheLog is what a power loss may do to
// context.jsonl, whose appends are fsynced within store.FlushAfter rather
// than one by one: its last run's records are gone while log.jsonl (the
// message fsynced before it was queued, Mother's reply) holds them. The
// next sync brings back the user's message and Mother's reply, as her
// assistant turn, each once.
func TestContextTailLostIsRebuiltFromTheLog(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := st.Channel("test", "C1")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	user := func(id, text string) chat.ChannelMessage {
		return chat.ChannelMessage{ID: id, ChannelID: "C1", Timestamp: at, Sender: chat.Sender{ID: "U1", Username: "mario"}, Text: text}
	}
	mother := func(id, text, replyTo string) chat.ChannelMessage {
		return chat.ChannelMessage{ID: id, ChannelID: "C1", Timestamp: at, Sender: chat.Sender{ID: "BOT", Username: "mother", IsBot: true}, Text: text, ReplyTo: replyTo}
	}
	// A run as Mother's makes it: sync, the answer, the reply logged and
	// marked seen.
	run := func(s *session.Session, in, out chat.ChannelMessage) {
		t.Helper()
		if _, err := ch.AppendMessage(in); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Sync(0); err != nil {
			t.Fatal(err)
		}
		if err := s.Append(model.Message{Role: model.RoleAssistant, Content: out.Text}); err != nil {
			t.Fatal(err)
		}
		if _, err := ch.AppendMessage(out); err != nil {
			t.Fatal(err)
		}
		if err := s.MarkSeen(out.ID); err != nil {
			t.Fatal(err)
		}
	}
	s, err := session.Load(ch, "BOT")
	if err != nil {
		t.Fatal(err)
	}
	run(s, user("u1", "first question"), mother("r1", "first answer", "u1"))
	ctxPath := ch.ContextPath()
	info, err := os.Stat(ctxPath)
	if err != nil {
		t.Fatal(err)
	}
	kept := info.Size()
	run(s, user("u2", "second question"), mother("r2", "second answer", "u2"))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// The power loss: the second run's context records never reached
	// the disk.
	if err := os.Truncate(ctxPath, kept); err != nil {
		t.Fatal(err)
	}
	st2, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	ch2, err := st2.Channel("test", "C1")
	if err != nil {
		t.Fatal(err)
	}
	s2, err := session.Load(ch2, "BOT")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Sync(0); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range s2.History() {
		got = append(got, string(m.Role)+": "+m.Content)
	}
	want := []string{
		"user: " + session.FormatMessage(user("u1", "first question")),
		"assistant: first answer",
		"user: " + session.FormatMessage(user("u2", "second question")),
		"assistant: second answer",
	}
	if len(got) != len(want) {
		t.Fatalf("history after the rebuild:\n%q\nwant\n%q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("history[%d] = %q, want %q", i, got[i], want[i])
		}
	}
	// A second sync finds nothing new: the rebuild recorded its cursor.
	if again, err := s2.Sync(0); err != nil || len(again) != 0 {
		t.Errorf("second sync: %v, %v; want nothing", again, err)
	}
}
