package telegram

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/telegram/telegramtest"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/render"
	"github.com/mother-chat/mother/pkg/store"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// FuzzUpdate feeds arbitrary getUpdates entries through the real adapter
// (the same path polled and webhook updates take), connected to the fake
// Bot API, into a recording inbox. Whatever the update: no panic (not even
// into the adapter's own recover), and what is delivered is a message
// Mother can store: an id, a sender, a channel id that is a safe
// directory name, a DM that counts as addressed, and files saved inside
// the channel's attachments.
func FuzzUpdate(f *testing.F) {
	for _, seed := range []string{
		`{"update_id":1,"message":{"message_id":1,"date":1734567890,"chat":{"id":-1001234567890,"type":"supergroup","title":"Family"},"from":{"id":555,"username":"mario"},"text":"@mother_bot hi","entities":[{"type":"mention","offset":0,"length":11}]}}`,
		`{"update_id":2,"message":{"message_id":2,"date":1,"chat":{"id":555,"type":"private"},"from":{"id":555},"text":"/ask@mother_bot x"}}`,
		`{"update_id":3,"message":{"message_id":3,"date":1,"chat":{"id":-100,"type":"supergroup","is_forum":true},"message_thread_id":45,"is_topic_message":true,"from":{"id":1},"caption":"c","document":{"file_id":"nope","file_unique_id":"../x","file_name":"../../etc/passwd","file_size":10}}}`,
		`{"update_id":4,"message":{"message_id":4,"date":1,"chat":{"id":-100,"type":"group"},"from":{"id":1},"photo":[{"file_id":"a","file_unique_id":"/","width":-1,"height":2,"file_size":-5}]}}`,
		`{"update_id":5,"message":{"message_id":5,"chat":{"id":-100,"type":"group"},"from":{"id":1},"text":"x","entities":[{"type":"mention","offset":-3,"length":99}],"reply_to_message":{"message_id":1,"chat":{"id":-100},"from":{"id":123456789}}}}`,
		`{"update_id":6,"callback_query":{"id":"q","from":{"id":555},"data":"mother:stop","message":{"message_id":1,"date":1,"chat":{"id":-100,"type":"group"}}}}`,
		`{"update_id":7,"callback_query":{"id":"q","from":{"id":555},"data":"mother:stop","message":{"message_id":1,"date":0,"chat":{"id":-100}}}}`,
		`{"update_id":8,"message":{"message_id":8,"chat":{"id":-100},"sender_chat":{"id":-100,"title":"x"},"text":"/stop"}}`,
		`{"update_id":9,"message":null}`, `{"update_id":"x"}`, `{}`, `[`, `null`, `{"update_id":10,"message":{"message_id":1e99}}`,
	} {
		f.Add([]byte(seed))
	}
	fake := telegramtest.New()
	f.Cleanup(fake.Close)
	fake.AddChat(group)
	st, err := store.Open(f.TempDir(), store.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	logs := &syncBuffer{}
	a, err := New(chat.Env{
		Name:   "telegram",
		Config: config.Adapter{Type: "telegram", Settings: &Settings{BotToken: telegramtest.BotToken, APIURL: fake.APIURL()}},
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Files:  st.AdapterFiles("telegram"),
	}, Options{Client: nil})
	if err != nil {
		f.Fatal(err)
	}
	in := &inbox{}
	a.inbox = in
	a.self.ID, a.self.Username = telegramtest.Bot.ID, telegramtest.Bot.Username
	f.Fuzz(func(t *testing.T, raw []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		in.mu.Lock()
		in.msgs, in.late = nil, nil
		in.mu.Unlock()
		a.off.mu.Lock()
		a.off.id = 0 // every input is a new update
		a.off.mu.Unlock()
		a.handleRaw(ctx, raw, false)
		if strings.Contains(logs.String(), "broke the adapter") {
			t.Fatalf("the adapter recovered from a panic on %q:\n%s", raw, logs.String())
		}
		in.mu.Lock()
		defer in.mu.Unlock()
		for _, m := range in.msgs {
			if m.ID == "" || m.Sender.ID == "" {
				t.Errorf("delivered without id or sender: %+v", m)
			}
			if err := chat.ValidID(m.ChannelID); err != nil {
				t.Errorf("delivered with a bad channel id: %v", err)
			}
			if m.IsDM && !m.IsMention {
				t.Errorf("a DM that is not addressed: %+v", m)
			}
			for _, att := range m.Attachments {
				if !strings.HasPrefix(att.LocalPath, "attachments/") || strings.Contains(att.LocalPath, "..") {
					t.Errorf("attachment outside attachments/: %+v", att)
				}
			}
		}
	})
}

// FuzzMarkdownV2 converts any markdown for Telegram: the result parses as
// MarkdownV2 the way Telegram checks it (so the plain-text fallback is for
// surprises, not the rule), and so does every part it is split into.
func FuzzMarkdownV2(f *testing.F) {
	for _, s := range []string{"**a** _b_ ~~c~~", "```go\nx.y()\n```", "- a\n  - b\n1. c", "| a |\n|---|\n| b.c |", "[x](http://e.com/a_(b)) `a\\`b`", "> q\n\n# H!", "<b>x</b> 1+1=2 {a} #t |p|"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		out := render.ToTelegram(md, []chat.Mention{{ID: "555", Username: "mario"}, {ID: "777", Username: "a_b.c-d"}})
		if strings.TrimSpace(out) == "" {
			return
		}
		if err := telegramtest.CheckMarkdownV2(out); err != nil {
			t.Fatalf("ToTelegram(%q) = %q: %v", md, out, err)
		}
	})
}
