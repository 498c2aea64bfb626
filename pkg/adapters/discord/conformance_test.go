package discord

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/mother-chat/mother/pkg/adapters/discord/discordtest"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/chat/chattest"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/store"
)

// platform drives the Discord adapter through discordtest, the fake
// Discord on a loopback socket.
type platform struct {
	a    *Adapter
	fake *discordtest.Server
}

func newPlatform(t *testing.T) chattest.Platform {
	fake := newFake(t, 0)
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a, err := New(chat.Env{
		Name:   "discord",
		Config: config.Adapter{Type: "discord", Settings: &Settings{BotToken: "test-token", APIURL: fake.URL, GuildID: fake.GuildID()}},
		Logger: slog.New(slog.DiscardHandler),
		Files:  st.AdapterFiles("discord"),
	}, Options{Grace: 50 * time.Millisecond, MinEdit: 100 * time.Millisecond, BackoffMin: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return &platform{a: a, fake: fake}
}

func (p *platform) Adapter() chat.Adapter { return p.a }
func (p *platform) Channel() string       { return general }
func (p *platform) DM() string            { return dmChan }

func (p *platform) Send(t *testing.T, in chattest.Incoming) {
	text := in.Text
	if in.Mention {
		text = "<@" + p.fake.Bot().ID + "> " + text
	}
	var opts []discordtest.SayOption
	if in.File != nil {
		opts = append(opts, discordtest.WithAttachment(in.File.Name, "text/csv", in.File.Data))
	}
	if in.Offline {
		opts = append(opts, discordtest.Offline())
	}
	p.fake.Say(in.Channel, mario, text, opts...)
}

func (p *platform) mine(channelID string) []discordtest.Message {
	var out []discordtest.Message
	for _, m := range p.fake.Messages(channelID) {
		if m.Author.ID == p.fake.Bot().ID && !m.Deleted {
			out = append(out, m)
		}
	}
	return out
}

func (p *platform) Answers(t *testing.T, channelID string) []string {
	var out []string
	for _, m := range p.mine(channelID) {
		out = append(out, m.Content)
	}
	return out
}

func (p *platform) Uploaded(t *testing.T, channelID string) []chattest.File {
	var out []chattest.File
	for _, m := range p.mine(channelID) {
		for _, f := range m.Files {
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
	p.fake.RateLimit("POST", "/channels/"+channelID+"/messages", 0.3, 1)
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
		if m.ID != messageID {
			continue
		}
		for _, b := range m.Buttons() {
			id, ok := strings.CutPrefix(b.CustomID, choicePrefix)
			if !ok {
				continue
			}
			c := chat.Choice{ID: id, Label: b.Label}
			switch b.Style {
			case int(discordgo.PrimaryButton):
				c.Style = chat.ChoicePrimary
			case int(discordgo.DangerButton):
				c.Style = chat.ChoiceDanger
			}
			out = append(out, c)
		}
	}
	return out
}

func (p *platform) Click(t *testing.T, channelID, messageID, choiceID string) {
	p.fake.Click(channelID, messageID, mario, choicePrefix+choiceID)
}

func (p *platform) Acknowledged(t *testing.T) int { return len(p.fake.Callbacks()) }

func (p *platform) Private(t *testing.T, channelID string) []string {
	var out []string
	for _, f := range p.fake.Followups() {
		if f.ChannelID == channelID && f.Ephemeral {
			out = append(out, f.Content)
		}
	}
	return out
}

func TestConformance(t *testing.T) {
	t.Parallel()
	chattest.Run(t, chattest.Harness{Limit: 2000, New: newPlatform})
}

// Admin and DirectMessages implement chattest.DMReader.
func (p *platform) Admin() string { return mario.ID }

func (p *platform) DirectMessages(t *testing.T, userID string) []string {
	c, ok := p.fake.DMWith(userID)
	if !ok {
		return nil
	}
	return p.Answers(t, c.ID)
}
