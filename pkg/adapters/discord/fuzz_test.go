package discord

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/mother-chat/mother/pkg/adapters/discord/discordtest"
	"github.com/mother-chat/mother/pkg/adapters/internal/loopback"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/store"
)

// FuzzMessageCreate feeds arbitrary MESSAGE_CREATE payloads (the JSON of a
// gateway dispatch's "d") through the real adapter, connected to the fake
// Discord, into a recording inbox. Whatever the payload: the adapter never
// panics (not even into its own recover), and what it delivers is a
// message Mother can store: an id, a sender, a channel id that is a safe
// directory name, a DM that counts as addressed, and attachments saved
// inside the channel's directory.
func FuzzMessageCreate(f *testing.F) {
	for _, seed := range []string{
		`{"id":"900000000000000001","channel_id":"700000000000000001","guild_id":"` + "800000000000000001" + `","author":{"id":"100000000000000001","username":"mario"},"content":"<@` + "100000000000000099" + `> hi <@100000000000000002> <#700000000000000002>","type":0,"timestamp":"2025-01-02T03:04:05Z"}`,
		`{"id":"900000000000000002","channel_id":"700000000000000009","author":{"id":"100000000000000001","username":"mario"},"content":"dm","type":0}`,
		`{"id":"900000000000000003","channel_id":"700000000000000001","author":{"id":"100000000000000001"},"content":"file","attachments":[{"id":"1","filename":"../../../etc/passwd","url":"https://cdn.discordapp.com/attachments/1/2/passwd","size":10},{"id":"2","filename":"..","url":"http://127.0.0.1:1/x","size":10}],"type":0}`,
		`{"id":"900000000000000004","channel_id":"../..","author":{"id":"1"},"type":0}`,
		`{"id":"900000000000000005","channel_id":"700000000000000001","author":null,"mentions":[null,{"id":""}],"type":19,"message_reference":{}}`,
		`{"id":"900000000000000006","channel_id":"700000000000000001","author":{"id":"1","bot":true},"member":{"nick":"x"},"attachments":[null,{"filename":"a","url":"https://cdn.discordapp.com/attachments/1/2/..%2f..%2fx","size":-1}]}`,
		`{"id":"","channel_id":""}`, `null`, `{}`, `[`,
	} {
		f.Add([]byte(seed))
	}
	fake := discordtest.New(discordtest.Options{
		Channels: []discordtest.Channel{{ID: general, Type: discordtest.TypeText, Name: "general"}},
		Members:  []discordtest.User{mario, luigi},
	})
	f.Cleanup(fake.Close)
	fake.AddChannel(discordtest.Channel{ID: dmChan, Type: discordtest.TypeDM, Recipients: []discordtest.User{mario}})
	st, err := store.Open(f.TempDir(), store.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	logs := &syncBuffer{}
	a, err := New(chat.Env{
		Name:   "discord",
		Config: config.Adapter{Type: "discord", Settings: &Settings{BotToken: "test-token", APIURL: fake.URL, GuildID: fake.GuildID()}},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Files:  st.AdapterFiles("discord"),
	}, Options{Transport: loopback.Transport(f, nil), MaxAttachment: 1 << 20})
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
	chanRoot := filepath.Join(st.Workspace(), "channels", "discord")
	f.Fuzz(func(t *testing.T, data []byte) {
		var mc discordgo.MessageCreate
		if json.Unmarshal(data, &mc) != nil || mc.Message == nil {
			return // discordgo drops what it cannot decode
		}
		in.mu.Lock()
		before := len(in.msgs)
		in.mu.Unlock()
		a.handle(ctx, mc.Message, delivery{})
		if strings.Contains(logs.String(), "broke the adapter") {
			t.Fatalf("the payload panicked the adapter:\n%s", logs.String())
		}
		in.mu.Lock()
		got := append([]delivered(nil), in.msgs[before:]...)
		in.mu.Unlock()
		for _, d := range got {
			checkDelivered(t, d.msg, chanRoot)
		}
	})
}

// checkDelivered is the contract a delivered message must meet whatever
// the platform sent.
func checkDelivered(t *testing.T, m chat.ChannelMessage, chanRoot string) {
	t.Helper()
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
