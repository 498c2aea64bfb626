package slack

import (
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/slack/slacktest"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/chat/chattest"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/store"
)

// platform drives the Slack adapter through slacktest, the fake Slack (Web
// API and Socket Mode) on a loopback socket.
type platform struct {
	a    *Adapter
	fake *slacktest.Server

	mu     sync.Mutex
	clicks []string // envelope ids of clicks
}

func newPlatform(t *testing.T) chattest.Platform {
	fake := newFake(t, 0)
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a, err := New(chat.Env{
		Name:   "slack",
		Config: config.Adapter{Type: "slack", Settings: &Settings{BotToken: slacktest.BotToken, AppToken: slacktest.AppToken, APIURL: fake.APIURL()}},
		Logger: slog.New(slog.DiscardHandler),
		Files:  st.AdapterFiles("slack"),
	}, Options{Grace: 50 * time.Millisecond, MinEdit: 100 * time.Millisecond, BackoffMin: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return &platform{a: a, fake: fake}
}

func (p *platform) Adapter() chat.Adapter { return p.a }
func (p *platform) Channel() string       { return general }
func (p *platform) DM() string            { return dm }

func (p *platform) Send(t *testing.T, in chattest.Incoming) {
	text := in.Text
	if in.Mention {
		text = "<@" + p.fake.Bot().ID + "> " + text
	}
	var opts []slacktest.PostOption
	if in.File != nil {
		opts = append(opts, slacktest.WithFile(in.File.Name, "text/csv", in.File.Data))
	}
	if in.Offline {
		opts = append(opts, slacktest.Offline())
	}
	p.fake.Post(in.Channel, mario.ID, text, opts...)
}

func (p *platform) mine(channelID string) []slacktest.Message {
	var out []slacktest.Message
	for _, m := range p.fake.Messages(channelID) {
		if (m.User == p.fake.Bot().ID || m.BotID != "") && !m.Deleted {
			out = append(out, m)
		}
	}
	return out
}

func (p *platform) Answers(t *testing.T, channelID string) []string {
	var out []string
	for _, m := range p.mine(channelID) {
		out = append(out, m.Text)
	}
	return out
}

func (p *platform) Uploaded(t *testing.T, channelID string) []chattest.File {
	var out []chattest.File
	for _, f := range p.fake.Files() {
		if f.Channel == channelID {
			out = append(out, chattest.File{Name: f.Name, Data: f.Data})
		}
	}
	return out
}

func (p *platform) EditCount(t *testing.T, channelID string) int {
	n := 0
	for _, m := range p.mine(channelID) {
		n += m.Edits
	}
	return n
}

func (p *platform) RateLimitNextPost(t *testing.T, channelID string) {
	p.fake.RateLimit("chat.postMessage", time.Second)
}

func (p *platform) RateLimited(t *testing.T) bool {
	for _, r := range p.fake.Requests() {
		if r.Status == 429 {
			return true
		}
	}
	return false
}

func (p *platform) Drop(t *testing.T) { p.fake.DropConnections() }

func (p *platform) Buttons(t *testing.T, channelID, messageID string) []chat.Choice {
	var out []chat.Choice
	for _, m := range p.fake.Messages(channelID) {
		if m.TS != messageID {
			continue
		}
		for _, b := range m.Buttons() {
			if strings.HasPrefix(b.ActionID, choiceActionPrefix) {
				out = append(out, chat.Choice{ID: b.Value, Label: b.Label, Style: chat.ChoiceStyle(b.Style)})
			}
		}
	}
	return out
}

func (p *platform) Click(t *testing.T, channelID, messageID, choiceID string) {
	for _, m := range p.fake.Messages(channelID) {
		for _, b := range m.Buttons() {
			if m.TS == messageID && b.Value == choiceID {
				env := p.fake.Click(channelID, messageID, mario.ID, b.ActionID)
				p.mu.Lock()
				p.clicks = append(p.clicks, env)
				p.mu.Unlock()
				return
			}
		}
	}
	t.Fatalf("no button %q on message %s", choiceID, messageID)
}

func (p *platform) Acknowledged(t *testing.T) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, ack := range p.fake.Acks() {
		if slices.Contains(p.clicks, ack) {
			n++
		}
	}
	return n
}

func (p *platform) Private(t *testing.T, channelID string) []string {
	var out []string
	for _, e := range p.fake.Ephemerals() {
		if e.Channel == channelID {
			out = append(out, e.Text)
		}
	}
	return out
}

func TestConformance(t *testing.T) {
	t.Parallel()
	chattest.Run(t, chattest.Harness{Limit: messageLimit, New: newPlatform})
}

// Admin and DirectMessages implement chattest.DMReader.
func (p *platform) Admin() string { return mario.ID }

func (p *platform) DirectMessages(t *testing.T, userID string) []string {
	c, ok := p.fake.IMWith(userID)
	if !ok {
		return nil
	}
	return p.Answers(t, c)
}
