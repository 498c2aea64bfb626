package slack

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack/slackevents"

	"github.com/mother-chat/mother/pkg/adapters/internal/loopback"
	"github.com/mother-chat/mother/pkg/adapters/slack/slacktest"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/store"
)

// FuzzEventsAPI feeds arbitrary Events API payloads (the "payload" of a
// Socket Mode events_api envelope), parsed as slack-go's socket client
// parses them, through the real adapter connected to the fake Slack, into
// a recording inbox. Whatever the payload: no panic (not even into the
// adapter's own recover), and what is delivered is a message Mother can
// store: an id, a sender, a channel id that is a safe directory name, a
// DM that counts as addressed, and files saved inside the channel's
// attachments.
func FuzzEventsAPI(f *testing.F) {
	for _, seed := range []string{
		`{"type":"event_callback","event":{"type":"app_mention","user":"UMARIO","text":"<@UBOT> hi <#CGENERAL|general> <!here> &lt;b&gt;","ts":"1734567890.000100","channel":"CGENERAL"}}`,
		`{"type":"event_callback","event":{"type":"message","channel_type":"im","user":"UMARIO","text":"dm","ts":"1734567890.000200","channel":"DMARIO"}}`,
		`{"type":"event_callback","event":{"type":"message","subtype":"file_share","user":"UMARIO","text":"f","ts":"1734567890.000300","channel":"CGENERAL","files":[{"id":"F1","name":"../../../etc/passwd","url_private_download":"https://files.slack.com/x","size":10},{"id":"F2","name":"..","url_private":"http://127.0.0.1:1/y"}]}}`,
		`{"type":"event_callback","event":{"type":"message","user":"UMARIO","text":"x","ts":"NaN","channel":"../../x"}}`,
		`{"type":"event_callback","event":{"type":"message","user":"UMARIO","text":"x","ts":"1e400","channel":"C1","thread_ts":"1","parent_user_id":"UBOT"}}`,
		`{"type":"event_callback","event":{"type":"message","subtype":"bot_message","bot_id":"B9","username":"other","text":"<@UBOT|mother>","ts":"1734567890.000400","channel":"CGENERAL"}}`,
		`{"type":"event_callback","event":{"type":"message","message":null}}`,
		`{"type":"event_callback","event":{"type":"app_mention"}}`,
		`{"type":"event_callback","event":null}`,
		`{"type":"url_verification","challenge":"x"}`,
		`{}`, `[`, `null`,
	} {
		f.Add([]byte(seed))
	}
	fake := slacktest.New(slacktest.Options{
		Users: []slacktest.User{mario, luigi},
		Channels: []slacktest.Channel{
			{ID: general, Name: "general", IsChannel: true, IsMember: true},
			{ID: dm, IsIM: true, User: mario.ID, IsMember: true},
		},
	})
	f.Cleanup(fake.Close)
	st, err := store.Open(f.TempDir(), store.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	logs := &syncBuffer{}
	a, err := New(chat.Env{
		Name:   "slack",
		Config: config.Adapter{Type: "slack", Settings: &Settings{BotToken: slacktest.BotToken, AppToken: slacktest.AppToken, APIURL: fake.APIURL()}},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Files:  st.AdapterFiles("slack"),
	}, Options{HTTPClient: &http.Client{Transport: loopback.Transport(f, nil), Timeout: 10 * time.Second}, MaxAttachment: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	in := newInbox()
	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(cancel)
	if err := a.Start(ctx, in); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		sctx, c := context.WithTimeout(context.Background(), 10*time.Second)
		defer c()
		a.Stop(sctx)
	})
	chanRoot := filepath.Join(st.Workspace(), "channels", "slack")
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := slackevents.ParseEvent(json.RawMessage(data), slackevents.OptionNoVerifyToken())
		if err != nil {
			return // the socket client drops what it cannot parse
		}
		inc, ok := a.incomingOf(ev)
		if !ok {
			return
		}
		in.mu.Lock()
		before := len(in.msgs)
		in.mu.Unlock()
		a.handle(ctx, inc)
		if strings.Contains(logs.String(), "broke the adapter") {
			t.Fatalf("the payload panicked the adapter:\n%s", logs.String())
		}
		in.mu.Lock()
		got := append([]delivered(nil), in.msgs[before:]...)
		in.mu.Unlock()
		for _, d := range got {
			m := d.msg
			if m.ID == "" || m.Sender.ID == "" {
				t.Fatalf("delivered without an id or a sender: %+v", m)
			}
			if err := store.ValidName(m.ChannelID); err != nil {
				t.Fatalf("delivered with channel id %q: %v", m.ChannelID, err)
			}
			if m.IsDM && !m.IsMention {
				t.Fatalf("a DM not marked as addressed: %+v", m)
			}
			dir := filepath.Join(chanRoot, m.ChannelID)
			for _, att := range m.Attachments {
				p := filepath.Join(dir, att.LocalPath)
				if rel, err := filepath.Rel(dir, p); err != nil || !strings.HasPrefix(rel, "attachments"+string(filepath.Separator)) {
					t.Fatalf("attachment %q stored at %q, outside the channel's attachments", att.Filename, att.LocalPath)
				}
			}
		}
	})
}
