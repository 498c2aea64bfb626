package telegram

import (
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/telegram/telegramtest"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/chat/chattest"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/store"
)

// The fake's cast.
var (
	group  = telegramtest.Chat{ID: -1001234567890, Type: "supergroup", Title: "Family", IsForum: true}
	mario  = telegramtest.User{ID: 555, FirstName: "Mario", Username: "mario"}
	luigi  = telegramtest.User{ID: 666, FirstName: "Luigi", Username: "luigi"}
	dmChat = telegramtest.Chat{ID: mario.ID, Type: "private"}
)

// newFake starts a fake Bot API with the cast.
func newFake(t *testing.T) *telegramtest.Server {
	t.Helper()
	fake := telegramtest.New()
	t.Cleanup(fake.Close)
	fake.AddChat(group)
	fake.AddChat(dmChat)
	fake.AddUser(mario)
	fake.AddUser(luigi)
	return fake
}

// newAdapter builds an adapter on fake with a store in dir (a fresh one
// when dir is empty).
func newAdapter(t *testing.T, fake *telegramtest.Server, dir string, edit func(*Settings, *config.Adapter)) *Adapter {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := &Settings{BotToken: telegramtest.BotToken, APIURL: fake.APIURL()}
	ac := config.Adapter{Type: "telegram", Admins: []string{"777"}, Settings: s}
	if edit != nil {
		edit(s, &ac)
	}
	a, err := New(chat.Env{
		Name:   "telegram",
		Config: ac,
		Logger: slog.New(slog.DiscardHandler),
		Files:  st.AdapterFiles("telegram"),
	}, Options{Grace: 50 * time.Millisecond, MinEdit: 100 * time.Millisecond, BackoffMin: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond, PollTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// platform drives the adapter through telegramtest.
type platform struct {
	a    *Adapter
	fake *telegramtest.Server
	// updates maps each text sent to its update_id.
	mu      sync.Mutex
	updates map[string]int64
}

func newPlatform(t *testing.T) chattest.Platform {
	fake := newFake(t)
	return &platform{a: newAdapter(t, fake, "", nil), fake: fake, updates: map[string]int64{}}
}

func (p *platform) Adapter() chat.Adapter { return p.a }
func (p *platform) Channel() string       { return strconv.FormatInt(group.ID, 10) }
func (p *platform) DM() string            { return strconv.FormatInt(dmChat.ID, 10) }

func chatOf(t *testing.T, channelID string) (int64, int) {
	t.Helper()
	c, topic, err := parseChannel(channelID)
	if err != nil {
		t.Fatal(err)
	}
	return c, topic
}

func (p *platform) Send(t *testing.T, in chattest.Incoming) {
	c, topic := chatOf(t, in.Channel)
	text := in.Text
	if in.Mention {
		text = "@" + telegramtest.Bot.Username + " " + text
	}
	var opts []telegramtest.PostOption
	if topic != 0 {
		opts = append(opts, telegramtest.InTopic(topic))
	}
	if in.File != nil {
		opts = append(opts, telegramtest.WithDocument(in.File.Name, in.File.Data))
	}
	if in.Offline {
		opts = append(opts, telegramtest.Offline())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.updates[in.Text] = p.fake.NextUpdateID()
	p.fake.Post(c, mario.ID, text, opts...)
}

// Confirmed implements chattest.Confirmer: the bot asked for an offset
// past the update that carried text.
func (p *platform) Confirmed(t *testing.T, text string) bool {
	p.mu.Lock()
	id, ok := p.updates[text]
	p.mu.Unlock()
	if !ok {
		t.Fatalf("no message %q was sent", text)
	}
	return p.fake.Confirmed() >= id
}

func (p *platform) Answers(t *testing.T, channelID string) []string {
	c, topic := chatOf(t, channelID)
	var out []string
	for _, m := range p.fake.BotMessages(c, topic) {
		out = append(out, m.Shown())
	}
	return out
}

func (p *platform) Uploaded(t *testing.T, channelID string) []chattest.File {
	c, topic := chatOf(t, channelID)
	var out []chattest.File
	for _, u := range p.fake.Uploads() {
		if u.Chat == c && u.Topic == topic {
			out = append(out, chattest.File{Name: u.Name, Data: u.Data})
		}
	}
	return out
}

func (p *platform) EditCount(t *testing.T, channelID string) int {
	c, topic := chatOf(t, channelID)
	n := 0
	for _, m := range p.fake.BotMessages(c, topic) {
		n += m.Edits
	}
	return n
}

func (p *platform) RateLimitNextPost(t *testing.T, channelID string) {
	p.fake.RateLimit("sendMessage", 1)
}

func (p *platform) RateLimited(t *testing.T) bool {
	for _, r := range p.fake.Requests() {
		if r.Status == 429 {
			return true
		}
	}
	return false
}

func (p *platform) Drop(t *testing.T) { p.fake.Drop() }

func TestConformance(t *testing.T) {
	t.Parallel()
	chattest.Run(t, chattest.Harness{Limit: MessageLimit, New: newPlatform, Lacks: map[chattest.Capability]string{
		chattest.Choices:      "not built yet: choices (inline keyboards) are on Discord and Slack; Telegram admins type the answer",
		chattest.ClickReplies: "no choice buttons yet (see choices)",
	}})
}

// Admin and DirectMessages implement chattest.DMReader: a private chat's
// id is its user's.
func (p *platform) Admin() string { return strconv.FormatInt(mario.ID, 10) }

func (p *platform) DirectMessages(t *testing.T, userID string) []string {
	return p.Answers(t, userID)
}
