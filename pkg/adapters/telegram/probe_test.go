package telegram

import (
	"errors"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/adapters/telegram/telegramtest"
)

func TestProbeAndRecentUsers(t *testing.T) {
	fake := telegramtest.New()
	defer fake.Close()
	fake.AddChat(telegramtest.Chat{ID: 7, Type: "private"})
	fake.AddUser(telegramtest.User{ID: 7, FirstName: "Mario", Username: "mario"})
	fake.Post(7, 7, "hi")
	fake.Post(7, 7, "again")
	if _, err := Probe(t.Context(), Settings{BotToken: "123:wrong", APIURL: fake.APIURL()}); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("Probe(wrong token) = %v, want ErrUnauthorized", err)
	}
	if _, err := Probe(t.Context(), Settings{BotToken: "not a token", APIURL: fake.APIURL()}); err == nil {
		t.Error("Probe(malformed token) = nil error")
	}
	s := Settings{BotToken: telegramtest.BotToken, APIURL: fake.APIURL()}
	id, err := Probe(t.Context(), s)
	if err != nil || id.Username != "mother_bot" {
		t.Errorf("Probe = %+v, %v", id, err)
	}
	ms, err := RecentUsers(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].ID != "7" || ms[0].Name != "Mario (@mario)" {
		t.Errorf("RecentUsers = %+v, want Mario once", ms)
	}
	if fake.Confirmed() != 0 {
		t.Errorf("RecentUsers confirmed updates up to %d; the adapter would lose them", fake.Confirmed())
	}
	_, err = RecentUsers(t.Context(), Settings{BotToken: "123:wrong", APIURL: fake.APIURL()})
	if err == nil || strings.Contains(err.Error(), "123:wrong") {
		t.Errorf("RecentUsers(wrong token) = %v, want an error without the token", err)
	}
}
