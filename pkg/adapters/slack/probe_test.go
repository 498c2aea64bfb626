package slack

import (
	"errors"
	"testing"

	"github.com/mother-chat/mother/pkg/adapters/slack/slacktest"
	"github.com/mother-chat/mother/pkg/config"
)

func TestProbeSocketAndMembers(t *testing.T) {
	fake := slacktest.New(slacktest.Options{Users: []slacktest.User{{ID: "U1", Name: "peach", RealName: "Peach"}}})
	defer fake.Close()
	s := Settings{BotToken: slacktest.BotToken, AppToken: slacktest.AppToken, APIURL: fake.APIURL()}
	if _, err := Probe(t.Context(), Settings{BotToken: "xoxb-no", APIURL: fake.APIURL()}); !errors.Is(err, ErrBotToken) {
		t.Errorf("Probe(wrong bot token) = %v, want ErrBotToken", err)
	}
	id, err := Probe(t.Context(), s)
	if err != nil || id.BotID != "UBOT" || id.TeamID != "T1" {
		t.Errorf("Probe = %+v, %v, want UBOT in T1", id, err)
	}
	bad := s
	bad.AppToken = config.Secret("xapp-no")
	if err := ProbeSocket(t.Context(), bad); !errors.Is(err, ErrAppToken) {
		t.Errorf("ProbeSocket(wrong app token) = %v, want ErrAppToken", err)
	}
	if err := ProbeSocket(t.Context(), s); err != nil {
		t.Errorf("ProbeSocket = %v", err)
	}
	if fake.Opens() != 1 {
		t.Errorf("%d Socket Mode connections opened, want 1 (the refused one never got a URL)", fake.Opens())
	}
	ms, err := Members(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].ID != "U1" || ms[0].Name != "Peach (peach)" || !ms[1].Bot {
		t.Errorf("Members = %+v, want Peach then the bot", ms)
	}
}
