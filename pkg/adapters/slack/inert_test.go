package slack

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/slack/slacktest"
	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
)

// hostileText spells every way a Slack message could notify people.
const hostileText = "<!channel> <!here> <!everyone> <!subteam^S0123|devs> <@UMARIO> <@ULUIGI|luigi> @channel @here [x](!channel) [y](@UMARIO) [z](https://e.com/a><!here>)"

// TestInertOnTheWire: what a model or a chick wrote (a run's title, a
// tool label, a result, an answer, a notice, buttons' text, a click's
// answer) reaches Slack with every special and mention escaped, and
// block text verbatim, so it notifies nobody; a notice with Mother's own
// mention notifies exactly that user.
func TestInertOnTheWire(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{MinEdit: 20 * time.Millisecond})
	f.start()
	fake.Post(general, mario.ID, "<@UBOT> go")
	msg := f.in.waitMsgs(t, 1)[0].msg

	r := f.a.NewReply(t.Context(), general, &msg, chat.ReplyOptions{Title: "chick c-1 " + hostileText})
	r.Event(t.Context(), agent.Event{Type: agent.EventToolStart, ToolCallID: "1", ToolName: "bash", Label: hostileText})
	fake.Wait(t, 5*time.Second, "working message", func() bool {
		for _, m := range fake.MessagesLocked(general) {
			if m.HasButton(stopActionID) {
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
	id, err := f.a.PostChoices(t.Context(), general, "🔐 "+hostileText, []chat.Choice{{ID: "allow x", Label: "Allow"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.a.EndChoices(t.Context(), general, id, "⛔ "+hostileText); err != nil {
		t.Fatal(err)
	}
	if _, err := f.a.PostMentioning(t.Context(), general, "✅ @mario allowed it; "+hostileText, []chat.Mention{{ID: mario.ID, Username: mario.Name}}); err != nil {
		t.Fatal(err)
	}

	var own, answer, working bool
	check := func(m slacktest.Message) {
		if m.User != fake.Bot().ID {
			return
		}
		got := slacktest.Notifies(m)
		if strings.HasPrefix(m.Text, "✅") {
			own = true
			if !slices.Equal(got, []string{"<@UMARIO>"}) {
				t.Errorf("Mother's own mention %q notifies %v, want <@UMARIO> alone", m.Text, got)
			}
			return
		}
		if len(got) != 0 {
			t.Errorf("message %q (blocks %s) notifies %v, want nobody", m.Text, m.Blocks, got)
		}
	}
	for _, m := range fake.Messages(general) {
		check(m)
		for _, v := range m.Sent {
			working = working || strings.Contains(v.Blocks, "→ ")
		}
		answer = answer || strings.Contains(m.Text, "Done,")
		for _, d := range fake.Thread(general, m.TS) {
			check(d)
		}
	}
	if !own || !answer || !working {
		t.Errorf("the fake got the working message %v, the answer %v and Mother's notice %v; want all", working, answer, own)
	}
}
