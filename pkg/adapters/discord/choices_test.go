package discord

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/discord/discordtest"
	"github.com/mother-chat/mother/pkg/chat"
)

var accessChoices = []chat.Choice{
	{ID: "allow c-7f3a91c2 pypi.org:443", Label: "Allow this chick", Style: chat.ChoicePrimary},
	{ID: "always c-7f3a91c2 pypi.org:443", Label: "Always (this channel)"},
	{ID: "deny c-7f3a91c2 pypi.org:443", Label: "Deny", Style: chat.ChoiceDanger},
}

// posted returns the fake's copy of one of Mother's messages.
func posted(t *testing.T, fake *discordtest.Server, channel, id string) discordtest.Message {
	t.Helper()
	for _, m := range fake.Messages(channel) {
		if m.ID == id {
			return m
		}
	}
	t.Fatalf("no message %s in %s", id, channel)
	return discordtest.Message{}
}

// TestChoicesOnTheWire: the buttons travel as one action row of three
// buttons, custom_id the choice's id behind a prefix; a click is
// acknowledged with a deferred update and delivered as a choice from the
// clicker; the private answer is an ephemeral follow-up; EndChoices
// empties the components.
func TestChoicesOnTheWire(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{})
	f.start()
	// GUILD_CREATE follows READY: wait for the members, so @mario renders.
	for deadline := time.Now().Add(5 * time.Second); len(f.a.Users()) < 3 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	id, err := f.a.PostChoices(t.Context(), general, "🔐 chick `c-7f3a91c2` asks to reach `pypi.org:443`, @mario.", accessChoices)
	if err != nil {
		t.Fatal(err)
	}
	m := posted(t, fake, general, id)
	var rows []struct {
		Type       int `json:"type"`
		Components []struct {
			Type     int    `json:"type"`
			Style    int    `json:"style"`
			Label    string `json:"label"`
			CustomID string `json:"custom_id"`
		} `json:"components"`
	}
	if err := json.Unmarshal(m.Components, &rows); err != nil || len(rows) != 1 || rows[0].Type != 1 || len(rows[0].Components) != 3 {
		t.Fatalf("components = %s (%v), want one action row of three buttons", m.Components, err)
	}
	for n, want := range []struct {
		style int
		label string
		id    string
	}{{1, "Allow this chick", "choice:allow c-7f3a91c2 pypi.org:443"}, {2, "Always (this channel)", "choice:always c-7f3a91c2 pypi.org:443"}, {4, "Deny", "choice:deny c-7f3a91c2 pypi.org:443"}} {
		if b := rows[0].Components[n]; b.Type != 2 || b.Style != want.style || b.Label != want.label || b.CustomID != want.id {
			t.Errorf("button %d = %+v, want %+v", n, b, want)
		}
	}
	if want := "🔐 chick `c-7f3a91c2` asks to reach `pypi.org:443`, @mario."; m.Content != want {
		t.Errorf("content = %q, want %q", m.Content, want)
	}

	iid := fake.Click(general, id, luigi, "choice:deny c-7f3a91c2 pypi.org:443")
	var click chat.ChannelMessage
	f.in.wait(t, "the click", func() bool {
		for _, d := range f.in.msgs {
			if d.msg.Choice {
				click = d.msg
				return true
			}
		}
		return false
	})
	if click.ID != iid || click.Text != "deny c-7f3a91c2 pypi.org:443" || click.ChannelID != general || click.ReplyTo != id ||
		click.Sender.ID != luigi.ID || click.Sender.Username != "luigi" || click.IsDM || click.IsMention {
		t.Errorf("click delivered as %+v", click)
	}
	fake.Wait(t, 5*time.Second, "the acknowledgement", func() bool { return len(fake.CallbacksLocked()) == 1 })
	if cb := fake.Callbacks()[0]; cb.InteractionID != iid || cb.Type != 6 {
		t.Errorf("callback = %+v, want a deferred update (6) of %s", cb, iid)
	}
	if err := f.a.ReplyToClick(t.Context(), click, "Only an admin can answer access requests; yours was ignored."); err != nil {
		t.Fatal(err)
	}
	fu := fake.Followups()
	if len(fu) != 1 || !fu[0].Ephemeral || fu[0].UserID != luigi.ID || fu[0].Content != "Only an admin can answer access requests; yours was ignored." {
		t.Errorf("follow-ups = %+v, want one ephemeral to luigi", fu)
	}
	if err := f.a.ReplyToClick(t.Context(), chat.ChannelMessage{ID: "123", Choice: true}, "x"); err == nil {
		t.Error("ReplyToClick to an unknown click: no error")
	}

	if err := f.a.EndChoices(t.Context(), general, id, "🔐 chick `c-7f3a91c2` asks to reach `pypi.org:443`.\n⛔ refused."); err != nil {
		t.Fatal(err)
	}
	m = posted(t, fake, general, id)
	if len(m.Buttons()) != 0 || string(m.Components) != "[]" || !strings.HasSuffix(m.Content, "⛔ refused.") {
		t.Errorf("after EndChoices: components %s, content %q", m.Components, m.Content)
	}
	for _, d := range f.in.msgs {
		if d.msg.Choice && d.msg.ID != iid {
			t.Errorf("an extra click was delivered: %+v", d.msg)
		}
	}
}

// TestChoiceClickInThreadAndDM: a click in a thread is delivered in the
// thread's channel; one in a DM is marked as such.
func TestChoiceClickInThreadAndDM(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 0)
	const thread = "700000000000000077"
	fake.AddChannel(discordtest.Channel{ID: thread, Type: discordtest.TypePublicThread, GuildID: fake.GuildID(), ParentID: general, Name: "Details"})
	f := newFixture(t, fake, Options{})
	f.start()
	for _, ch := range []string{thread, dmChan} {
		id, err := f.a.PostChoices(t.Context(), ch, "question", accessChoices)
		if err != nil {
			t.Fatal(err)
		}
		fake.Click(ch, id, mario, "choice:"+accessChoices[0].ID)
	}
	f.in.wait(t, "two clicks", func() bool {
		n := 0
		for _, d := range f.in.msgs {
			if d.msg.Choice {
				n++
			}
		}
		return n == 2
	})
	for _, d := range f.in.msgs {
		if !d.msg.Choice {
			continue
		}
		switch d.msg.ChannelID {
		case general:
			if d.msg.Metadata["threadId"] != thread || d.msg.IsDM {
				t.Errorf("thread click = %+v", d.msg)
			}
		case dmChan:
			if !d.msg.IsDM {
				t.Errorf("DM click = %+v", d.msg)
			}
		default:
			t.Errorf("click delivered in %s: %+v", d.msg.ChannelID, d.msg)
		}
	}
}

// TestMalformedInteractionsSkipped: broken INTERACTION_CREATE dispatches
// are logged and skipped without a panic; the next good click works.
func TestMalformedInteractionsSkipped(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{})
	f.start()
	id, err := f.a.PostChoices(t.Context(), general, "question", accessChoices)
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{
		`{"id":"1","type":3,"token":"t","channel_id":"` + general + `","data":{"custom_id":"choice:allow c-1 x"}}`,                                // nobody clicked
		`{"id":"2","type":3,"token":"t","channel_id":"` + general + `","member":{"user":{"id":"` + mario.ID + `"}},"data":{"custom_id":7}}`,       // custom_id not a string
		`{"id":"3","type":3,"token":"t","channel_id":"` + general + `","user":{"id":"` + mario.ID + `"}}`,                                         // no data
		`{"id":"4","type":3,"token":"","channel_id":"` + general + `","user":{"id":"` + mario.ID + `"},"data":{"custom_id":"choice:deny c-1 x"}}`, // no token
		`{"id":"5","type":3,"token":"t","user":{"id":"` + mario.ID + `"},"data":{"custom_id":"choice:deny c-1 x"}}`,                               // no channel
		`{"id":"6","type":3,"token":"t","channel_id":"` + general + `","user":{"id":"` + mario.ID + `"},"data":{"custom_id":""}}`,                 // no custom_id
		`{"type":"three"}`, `[]`, `null`,
	} {
		fake.DispatchRaw("INTERACTION_CREATE", json.RawMessage(raw))
	}
	fake.Click(general, id, mario, "choice:"+accessChoices[1].ID)
	f.in.wait(t, "the good click", func() bool {
		for _, d := range f.in.msgs {
			if d.msg.Choice && d.msg.Text == accessChoices[1].ID {
				return true
			}
		}
		return false
	})
	for _, d := range f.in.msgs {
		if d.msg.Choice && d.msg.Text != accessChoices[1].ID {
			t.Errorf("a malformed click was delivered: %+v", d.msg)
		}
	}
	if n := strings.Count(f.logs.String(), "skipping malformed button click"); n < 6 {
		t.Errorf("%d malformed clicks logged, want 6:\n%s", n, f.logs.String())
	}
	if strings.Contains(f.logs.String(), "broke the adapter") {
		t.Errorf("a malformed interaction panicked the handler:\n%s", f.logs.String())
	}
}
