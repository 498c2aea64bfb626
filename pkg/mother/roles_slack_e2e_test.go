package mother_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/slack"
	"github.com/mother-chat/mother/pkg/adapters/slack/slacktest"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model/ollama"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/mother"
	"github.com/mother-chat/mother/pkg/store"
)

// TestRolesSlackUserGroups: ops is the Slack user group S0OPS, which the
// fake serves through usergroups.list as Slack does; a display name
// equal to an admin's gives nothing.
func TestRolesSlackUserGroups(t *testing.T) {
	t.Parallel()
	const general = "CGENERAL"
	mario := slacktest.User{ID: "UMARIO", Name: "mario", RealName: "Mario"}
	peach := slacktest.User{ID: "UPEACH", Name: "peach"}
	impostor := slacktest.User{ID: "UFAKE", Name: "mario", RealName: "Mario"}
	fake := slacktest.New(slacktest.Options{
		Users:      []slacktest.User{mario, peach, impostor},
		Channels:   []slacktest.Channel{{ID: general, Name: "general", IsChannel: true, IsMember: true}},
		UserGroups: []slacktest.UserGroup{{ID: "S0OPS", Handle: "ops", Users: []string{peach.ID}}},
	})
	t.Cleanup(fake.Close)
	data := t.TempDir()
	ac := config.Adapter{Type: "slack", Admins: []string{mario.ID}, Settings: &slack.Settings{BotToken: slacktest.BotToken, AppToken: slacktest.AppToken, APIURL: fake.APIURL()}}
	cfg := &config.Config{Adapters: map[string]config.Adapter{"slack": ac}}
	cfg.Chicks.Tiers = map[string]config.Tier{"local": {Provider: "ollama", Model: "tiny"}, "hard": {Provider: "ollama", Model: "big"}}
	cfg.Chicks.DefaultTier = "local"
	cfg.Roles = config.Roles{
		Define:   map[string]config.RoleDef{"ops": {May: []string{"talk", "chicks:hard"}}},
		Adapters: map[string]config.AdapterRoles{"slack": {Default: "guest", Members: map[string][]string{"ops": {"group:S0OPS"}}}},
	}
	cfg.SetDefaults(data)
	cfg.Model.ID = "tiny"
	st, err := store.Open(data, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	model := ollamatest.NewFunc(rolesScript)
	t.Cleanup(model.Close)
	p, err := ollama.New(model.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	hatch := &recHatchery{}
	m, err := mother.New(mother.Options{Config: cfg, Store: st, Provider: p, Chicks: hatch, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	a, err := slack.New(chat.Env{Name: "slack", Config: ac, Files: st.AdapterFiles("slack"), Logger: slog.New(slog.DiscardHandler)}, slack.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AddAdapter(a); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = m.Shutdown(ctx)
		st.Close()
	})
	ask := func(u slacktest.User, text string) string {
		t.Helper()
		said := fake.Post(general, u.ID, "<@"+fake.Bot().ID+"> "+text)
		var out []string
		fake.Wait(t, 20*time.Second, "Mother's answer to "+u.Name, func() bool {
			out = out[:0]
			done := false
			for _, msg := range fake.MessagesLocked(general) {
				if msg.User == fake.Bot().ID && msg.TS > said.TS {
					out = append(out, msg.Text)
					done = done || strings.Contains(msg.Text, "tool said:")
				}
			}
			return done
		})
		time.Sleep(50 * time.Millisecond)
		return strings.Join(out, "\n")
	}
	const sentence = "Only members or members of ops can start chicks on the hard tier."
	if got := ask(peach, `call spawn_chick {"goal":"g","tier":"hard"}`); strings.Contains(got, "Refused") {
		t.Errorf("peach (in @ops) was refused: %q", got)
	}
	if got := hatch.tiers(); len(got) != 1 || got[0] != "hard" {
		t.Fatalf("spawned %v, want [hard]", got)
	}
	if got := ask(impostor, `call spawn_chick {"goal":"g","tier":"hard"}`); !strings.Contains(got, sentence) || !strings.Contains(got, "tool said: Refused: "+sentence) {
		t.Errorf("the impostor got %q, want %q", got, sentence)
	}
	if got := hatch.tiers(); len(got) != 1 {
		t.Fatalf("spawned %v after the impostor's request", got)
	}
}
