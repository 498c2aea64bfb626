package discord

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/discord/discordtest"
	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
)

// hostileText spells every way a Discord message could ping: a user, a
// role, everyone and here.
const hostileText = "@everyone @here <@100000000000000001> <@!100000000000000002> <@&300000000000000001> @mario"

// allowedOf decodes the allowed_mentions the fake received with m.
func allowedOf(t *testing.T, m discordtest.Message) (parse, users []string) {
	t.Helper()
	var am struct {
		Parse []string `json:"parse"`
		Users []string `json:"users"`
		Roles []string `json:"roles"`
	}
	if len(m.AllowedMentions) == 0 || string(m.AllowedMentions) == "null" {
		t.Fatalf("message %q was sent without allowed_mentions: Discord would parse every mention in it", m.Content)
	}
	if err := json.Unmarshal(m.AllowedMentions, &am); err != nil {
		t.Fatalf("allowed_mentions %s: %v", m.AllowedMentions, err)
	}
	if len(am.Roles) > 0 {
		t.Errorf("allowed_mentions %s allows roles", m.AllowedMentions)
	}
	return am.Parse, am.Users
}

// TestInertOnTheWire: what a model or a chick wrote (a tool label, a
// result, an answer, a notice, a file's title) reaches Discord with
// allowed_mentions that parse nothing, so it pings nobody; a notice with
// Mother's own mention allows exactly that user.
func TestInertOnTheWire(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{MinEdit: 20 * time.Millisecond})
	f.start()
	trig := fake.Say(general, mario, "<@"+fake.Bot().ID+"> go")
	msg := f.in.waitMsgs(t, 1)[0].msg

	r := f.a.NewReply(t.Context(), general, &msg, chat.ReplyOptions{Title: "chick c-1 " + hostileText})
	r.Event(t.Context(), agent.Event{Type: agent.EventToolStart, ToolCallID: "1", ToolName: "bash", Label: hostileText})
	fake.Wait(t, 5*time.Second, "working message", func() bool {
		for _, m := range fake.MessagesLocked(general) {
			if strings.Contains(m.Content, "→ @everyone") {
				return true
			}
		}
		return false
	})
	r.Event(t.Context(), agent.Event{Type: agent.EventToolEnd, ToolCallID: "1", ToolName: "bash", Label: hostileText, Result: hostileText})
	if _, err := r.Finish(t.Context(), "Done, "+hostileText); err != nil {
		t.Fatal(err)
	}
	if _, err := f.a.Post(t.Context(), general, "📚 skill: "+hostileText); err != nil {
		t.Fatal(err)
	}
	if _, err := f.a.PostMentioning(t.Context(), general, "✅ @mario allowed it; "+hostileText, []chat.Mention{chat.MentionOf(chat.Sender{ID: mario.ID, Username: mario.Username})}); err != nil {
		t.Fatal(err)
	}

	var all []discordtest.Message
	for _, ch := range []string{general, trig.ID} {
		all = append(all, fake.Messages(ch)...)
	}
	// The detail thread hangs off the working message.
	for _, m := range fake.Messages(general) {
		all = append(all, fake.Messages(m.ID)...)
	}
	var own, answer bool
	for _, m := range all {
		if m.Author.ID != fake.Bot().ID {
			continue
		}
		parse, users := allowedOf(t, m)
		if len(parse) != 0 {
			t.Errorf("message %q: allowed_mentions %s parses %v", m.Content, m.AllowedMentions, parse)
		}
		switch {
		case strings.HasPrefix(m.Content, "✅"):
			own = true
			if !slices.Equal(users, []string{mario.ID}) || !strings.Contains(m.Content, "<@"+mario.ID+">") {
				t.Errorf("Mother's own mention: %q with allowed_mentions %s, want <@%s> allowed alone", m.Content, m.AllowedMentions, mario.ID)
			}
		case len(users) != 0:
			t.Errorf("message %q: allowed_mentions %s allows users", m.Content, m.AllowedMentions)
		}
		if strings.Contains(m.Content, "Done,") {
			answer = true
		}
	}
	if !own || !answer {
		t.Errorf("the fake got the answer %v and Mother's notice %v; want both", answer, own)
	}
}
