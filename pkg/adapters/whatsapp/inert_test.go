package whatsapp

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
)

// TestInertOnTheWire: what a model or a chick wrote (a tool label, a
// result, an answer, a notice) reaches WhatsApp with an empty mention
// list, however it spells @<number>; a notice with Mother's own mention
// lists exactly that user.
func TestInertOnTheWire(t *testing.T) {
	t.Parallel()
	a, f, _ := newTestAdapter(t, func(s *Settings, _ *config.Adapter, o *Options) { s.Details = true; o.Grace = 0 })
	in := start(t, a)
	f.post(userMsg(family, mario, mentioning("go", selfPN)), false)
	trigger, _ := in.wait(t, "go")
	hostile := "@" + luigi.User + " @" + mario.User + " @everyone"
	r := a.NewReply(t.Context(), trigger.ChannelID, &trigger, chat.ReplyOptions{Title: "chick c-1 " + hostile})
	r.Event(t.Context(), agent.Event{Type: agent.EventToolStart, ToolCallID: "1", ToolName: "bash", Label: hostile})
	f.waitSent(t, "the working message", func(s []sent) bool { return len(s) >= 1 })
	r.Event(t.Context(), agent.Event{Type: agent.EventToolEnd, ToolCallID: "1", ToolName: "bash", Label: hostile, Result: hostile, Duration: time.Second})
	if _, err := r.Finish(t.Context(), "Done, "+hostile); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Post(t.Context(), trigger.ChannelID, "📚 skill: "+hostile); err != nil {
		t.Fatal(err)
	}
	own := []chat.Mention{{ID: mario.String(), Username: "mario"}}
	if _, err := a.PostMentioning(t.Context(), trigger.ChannelID, "✅ @mario allowed it; "+hostile, own); err != nil {
		t.Fatal(err)
	}
	sentMsgs := f.waitSent(t, "the notices", func(s []sent) bool { return len(s) >= 5 })
	var notice, answer bool
	for _, s := range sentMsgs {
		m := s.Msg
		if e := m.GetEditedMessage(); e != nil {
			m = e.GetMessage().GetProtocolMessage().GetEditedMessage()
		}
		if m.GetProtocolMessage() != nil {
			m = m.GetProtocolMessage().GetEditedMessage()
		}
		text := m.GetConversation() + m.GetExtendedTextMessage().GetText()
		listed := m.GetExtendedTextMessage().GetContextInfo().GetMentionedJID()
		switch {
		case strings.HasPrefix(text, "✅"):
			notice = true
			if !slices.Equal(listed, []string{mario.String()}) || !strings.Contains(text, "@"+mario.User+" allowed") {
				t.Errorf("Mother's own mention %q lists %v, want %s alone", text, listed, mario)
			}
		case len(listed) != 0:
			t.Errorf("%q lists mentions %v, want none", text, listed)
		}
		answer = answer || strings.Contains(text, "Done,")
	}
	if !notice || !answer {
		t.Errorf("sent the answer %v and Mother's notice %v; want both (%d messages)", answer, notice, len(sentMsgs))
	}
}
