package discord

import (
	"errors"
	"testing"

	"github.com/mother-chat/mother/pkg/adapters/discord/discordtest"
	"github.com/mother-chat/mother/pkg/config"
)

func TestProbeAndMembers(t *testing.T) {
	fake := discordtest.New(discordtest.Options{Members: []discordtest.User{{ID: "11", Username: "mario", GlobalName: "Mario"}, {ID: "12", Username: "helper", Bot: true}}})
	defer fake.Close()
	if _, err := Probe(t.Context(), Settings{BotToken: "wrong", APIURL: fake.URL}); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("Probe(wrong token) = %v, want ErrUnauthorized", err)
	}
	s := Settings{BotToken: config.Secret("test-token"), APIURL: fake.URL}
	id, err := Probe(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if id.BotID != fake.Bot().ID || len(id.Guilds) != 1 || id.Guilds[0].ID != fake.GuildID() || id.Guilds[0].Name != "Test Guild" {
		t.Errorf("Probe = %+v, want the bot in Test Guild", id)
	}
	ms, err := Members(t.Context(), s, fake.GuildID())
	if err != nil {
		t.Fatal(err)
	}
	// People first, bots last; the bot itself is a member too.
	if len(ms) != 3 || ms[0].ID != "11" || ms[0].Name != "Mario (mario)" || !ms[len(ms)-1].Bot {
		t.Errorf("Members = %+v, want mario first and bots last", ms)
	}
	if _, err := Members(t.Context(), s, "999"); err == nil {
		t.Error("Members(unknown guild) = nil error")
	}
}
