package telegram

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/telegram/telegramtest"
	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
)

// hostileText spells every way a Telegram message could notify someone:
// links to users by id (a text mention) and @username.
const hostileText = "[hi](tg://user?id=666) [x](TG://user?id=777) @luigi @mario_bros .@luigi <tg://user?id=666>"

// TestInertOnTheWire: what a model or a chick wrote (a run's title, a tool
// label, a result, an answer, a notice, a file's title) reaches Telegram
// without links to users and with every @username broken, so it notifies
// nobody; a notice with Mother's own mention notifies exactly that user.
func TestInertOnTheWire(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	a := newAdapter(t, fake, "", nil)
	in := start(t, a)
	fake.Post(group.ID, mario.ID, "@mother_bot go")
	msg, _ := in.wait(t, "go")

	r := a.NewReply(t.Context(), msg.ChannelID, &msg, chat.ReplyOptions{Title: "chick c-1 " + hostileText})
	r.Event(t.Context(), agent.Event{Type: agent.EventToolStart, ToolCallID: "1", ToolName: "bash", Label: hostileText})
	for deadline := time.Now().Add(5 * time.Second); len(fake.BotMessages(group.ID, 0)) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	r.Event(t.Context(), agent.Event{Type: agent.EventToolEnd, ToolCallID: "1", ToolName: "bash", Label: hostileText, Result: hostileText, Duration: time.Second})
	if _, err := r.Finish(t.Context(), "Done, "+hostileText); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Post(t.Context(), msg.ChannelID, "📚 skill: "+hostileText); err != nil {
		t.Fatal(err)
	}
	// Sent again as plain text after a refusal: code is no code there.
	fake.RejectMarkdown(1)
	if _, err := a.Post(t.Context(), msg.ChannelID, "refused once: `@luigi` "+hostileText); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "out.txt")
	if err := os.WriteFile(file, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.Upload(t.Context(), msg.ChannelID, file, "for @luigi "+hostileText); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PostMentioning(t.Context(), msg.ChannelID, "✅ @mario allowed it; "+hostileText, []chat.Mention{{ID: "555", Username: "mario"}}); err != nil {
		t.Fatal(err)
	}

	var notice, answer, plain bool
	for _, m := range fake.BotMessages(group.ID, 0) {
		plain = plain || m.Parse == "" && strings.HasPrefix(m.Text, "refused once")
		got := telegramtest.NotifiesAny(m)
		if strings.HasPrefix(m.Shown(), "✅") {
			notice = true
			if !slices.Equal(got, []string{"id:555"}) {
				t.Errorf("Mother's own mention %q notifies %v, want id:555 alone", m.Text, got)
			}
			continue
		}
		answer = answer || strings.Contains(m.Text, "Done,")
		if len(got) != 0 {
			t.Errorf("message %q (%s) notifies %v, want nobody", m.Text, m.Parse, got)
		}
	}
	ups := fake.Uploads()
	if len(ups) != 1 {
		t.Fatalf("uploads = %+v, want one", ups)
	}
	if got := telegramtest.Notifies(ups[0].Caption, ""); len(got) != 0 {
		t.Errorf("caption %q notifies %v, want nobody", ups[0].Caption, got)
	}
	if !notice || !answer || !plain {
		t.Errorf("the fake got the answer %v, Mother's notice %v and the plain text %v; want all", answer, notice, plain)
	}
}
