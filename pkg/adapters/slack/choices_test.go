package slack

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/slack/slacktest"
	"github.com/mother-chat/mother/pkg/chat"
)

var accessChoices = []chat.Choice{
	{ID: "allow c-7f3a91c2 pypi.org:443", Label: "Allow this chick", Style: chat.ChoicePrimary},
	{ID: "always c-7f3a91c2 pypi.org:443", Label: "Always (this channel)"},
	{ID: "deny c-7f3a91c2 pypi.org:443", Label: "Deny", Style: chat.ChoiceDanger},
}

func posted(t *testing.T, fake *slacktest.Server, channel, ts string) slacktest.Message {
	t.Helper()
	for _, m := range fake.Messages(channel) {
		if m.TS == ts {
			return m
		}
	}
	t.Fatalf("no message %s in %s", ts, channel)
	return slacktest.Message{}
}

func (i *inbox) clicks() []chat.ChannelMessage {
	var out []chat.ChannelMessage
	for _, d := range i.msgs {
		if d.msg.Choice {
			out = append(out, d.msg)
		}
	}
	return out
}

// TestChoicesOnTheWire: the request goes out as a section and an actions
// block of three buttons whose values are the choices' ids; a click's
// envelope is acknowledged and the click delivered from the clicker; the
// private answer is chat.postEphemeral to that user; EndChoices removes
// the blocks.
func TestChoicesOnTheWire(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{})
	f.start()
	ts, err := f.a.PostChoices(t.Context(), general, "🔐 chick `c-7f3a91c2` asks to reach **pypi.org:443**, @mario.", accessChoices)
	if err != nil {
		t.Fatal(err)
	}
	m := posted(t, fake, general, ts)
	var blocks []struct {
		Type    string `json:"type"`
		BlockID string `json:"block_id"`
		Text    *struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"text"`
		Elements []struct {
			Type     string `json:"type"`
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
			Style    string `json:"style"`
			Text     struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"text"`
		} `json:"elements"`
	}
	if err := json.Unmarshal([]byte(m.Blocks), &blocks); err != nil || len(blocks) != 2 || blocks[0].Type != "section" || blocks[1].Type != "actions" || len(blocks[1].Elements) != 3 {
		t.Fatalf("blocks = %s (%v), want a section and an actions block of three buttons", m.Blocks, err)
	}
	wantText := "🔐 chick `c-7f3a91c2` asks to reach *pypi.org:443*, @mario."
	if blocks[0].Text == nil || blocks[0].Text.Type != "mrkdwn" || blocks[0].Text.Text != wantText || m.Text != wantText {
		t.Errorf("section %+v, text %q; want mrkdwn %q in both", blocks[0].Text, m.Text, wantText)
	}
	for n, want := range []struct{ style, label string }{{"primary", "Allow this chick"}, {"", "Always (this channel)"}, {"danger", "Deny"}} {
		e := blocks[1].Elements[n]
		if e.Type != "button" || e.Style != want.style || e.Text.Type != "plain_text" || e.Text.Text != want.label || e.Value != accessChoices[n].ID || !strings.HasPrefix(e.ActionID, choiceActionPrefix) {
			t.Errorf("button %d = %+v, want %+v with value %q", n, e, want, accessChoices[n].ID)
		}
	}

	env := fake.Click(general, ts, luigi.ID, blocks[1].Elements[2].ActionID)
	f.in.wait(t, "the click", func() bool { return len(f.in.clicks()) == 1 })
	click := f.in.clicks()[0]
	if click.Text != accessChoices[2].ID || click.ChannelID != general || click.ReplyTo != ts || click.Sender.ID != luigi.ID ||
		click.Sender.Username != "luigi" || click.ID == "" || click.IsDM || click.IsMention {
		t.Errorf("click delivered as %+v", click)
	}
	fake.Wait(t, 5*time.Second, "the envelope's ack", func() bool { return slices.Contains(fake.AcksLocked(), env) })

	if err := f.a.ReplyToClick(t.Context(), click, "Only an admin can answer access requests; yours was ignored."); err != nil {
		t.Fatal(err)
	}
	if e := fake.Ephemerals(); len(e) != 1 || e[0].User != luigi.ID || e[0].Channel != general || e[0].Text != "Only an admin can answer access requests; yours was ignored." {
		t.Errorf("ephemerals = %+v, want one to luigi in general", e)
	}

	if err := f.a.EndChoices(t.Context(), general, ts, "🔐 chick `c-7f3a91c2` asks to reach `pypi.org:443`.\n⛔ refused."); err != nil {
		t.Fatal(err)
	}
	m = posted(t, fake, general, ts)
	if len(m.Buttons()) != 0 || (m.Blocks != "" && m.Blocks != "[]") || !strings.HasSuffix(m.Text, "⛔ refused.") {
		t.Errorf("after EndChoices: blocks %s, text %q", m.Blocks, m.Text)
	}
}

// TestMalformedInteractiveSkipped: broken interactive envelopes are
// acknowledged, logged and skipped; the next good click works.
func TestMalformedInteractiveSkipped(t *testing.T) {
	t.Parallel()
	fake := newFake(t, 0)
	f := newFixture(t, fake, Options{})
	f.start()
	ts, err := f.a.PostChoices(t.Context(), general, "question", accessChoices)
	if err != nil {
		t.Fatal(err)
	}
	var envs []string
	for _, p := range []any{
		map[string]any{"type": "block_actions", "channel": map[string]any{"id": general}, "actions": []any{map[string]any{"block_id": choiceBlockID, "action_id": choiceActionPrefix + "0", "value": "allow c-1 x"}}},                 // nobody clicked
		map[string]any{"type": "block_actions", "user": map[string]any{"id": mario.ID}, "actions": []any{map[string]any{"block_id": choiceBlockID, "action_id": choiceActionPrefix + "0", "value": "allow c-1 x"}}},                   // no channel
		map[string]any{"type": "block_actions", "user": map[string]any{"id": mario.ID}, "channel": map[string]any{"id": general}, "actions": []any{map[string]any{"block_id": choiceBlockID, "action_id": choiceActionPrefix + "0"}}}, // no value
		map[string]any{"type": "block_actions", "user": map[string]any{"id": mario.ID}, "channel": map[string]any{"id": general}, "actions": []any{map[string]any{"action_id": choiceActionPrefix + "0", "value": "x"}}},              // no block_id: not a block action
		map[string]any{"type": "block_actions", "user": map[string]any{"id": mario.ID}, "channel": map[string]any{"id": general}, "actions": []any{}},
		map[string]any{"type": "block_actions", "user": map[string]any{"id": mario.ID}, "channel": map[string]any{"id": "../etc"}, "actions": []any{map[string]any{"block_id": choiceBlockID, "action_id": choiceActionPrefix + "0", "value": "allow c-1 x"}}},
		map[string]any{"type": "block_actions", "user": "mario", "actions": 7},
		"not an object",
	} {
		envs = append(envs, fake.SendInteractive(p))
	}
	for _, m := range fake.Messages(general) {
		if m.TS == ts {
			envs = append(envs, fake.Click(general, ts, mario.ID, m.Buttons()[1].ActionID))
		}
	}
	f.in.wait(t, "the good click", func() bool { return len(f.in.clicks()) >= 1 })
	fake.Wait(t, 5*time.Second, "every envelope acknowledged", func() bool {
		for _, e := range envs {
			if !slices.Contains(fake.AcksLocked(), e) {
				return false
			}
		}
		return true
	})
	if cs := f.in.clicks(); len(cs) != 1 || cs[0].Text != accessChoices[1].ID {
		t.Errorf("clicks delivered: %+v, want only the good one", cs)
	}
	logs := f.logs.String()
	for _, want := range []string{"skipping malformed choice click", "skipping block_actions without actions", "skipping choice click with an unusable channel id", "skipping malformed Slack event"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "broke the adapter") {
		t.Errorf("a malformed envelope panicked the adapter:\n%s", logs)
	}
}
