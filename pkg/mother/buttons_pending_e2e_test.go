package mother_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/discord"
	"github.com/mother-chat/mother/pkg/adapters/discord/discordtest"
	"github.com/mother-chat/mother/pkg/adapters/slack"
	"github.com/mother-chat/mother/pkg/adapters/slack/slacktest"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/egress"
)

// Two requests of one chick pending, answered through a real adapter
// against its platform's fake: the typed `allow <id>` the first request
// shows answers none and lists the answers that name each; a button
// answers its own request; the bare answer then answers the one left.

// platform is what the two-pending flow needs of a fake: post a typed
// message as the admin, click a request's button, and read Mother's
// messages and their buttons.
type platform struct {
	say      func(text string)
	click    func(msgID, choice string)
	messages func() []platformMsg
	wait     func(what string, cond func() bool)
}

type platformMsg struct {
	id, text string
	choices  []string // the buttons' values
}

func twoPendingFlow(t *testing.T, r *buttonsRig, p platform, channel string) {
	t.Helper()
	in, pypi := r.ask(t, "c-7f3a91c2", channel, "pypi.org:443")
	var reqPypi, reqCrates platformMsg
	p.wait("the first request", func() bool {
		for _, m := range p.messages() {
			if strings.Contains(m.text, "asks to reach `pypi.org:443`") && len(m.choices) == 3 {
				reqPypi = m
				return true
			}
		}
		return false
	})
	_, crates := r.ask(t, "c-7f3a91c2", channel, "crates.io:443")
	p.wait("the second request", func() bool {
		for _, m := range p.messages() {
			if strings.Contains(m.text, "asks to reach `crates.io:443`") && len(m.choices) == 3 {
				reqCrates = m
				return true
			}
		}
		return false
	})
	ci := egress.ChickInfo{ID: in.ID, Channel: in.Channel, Tier: in.Tier}

	// The admin types what the first request shows.
	if !strings.Contains(reqPypi.text, "`allow c-7f3a91c2`") {
		t.Fatalf("the first request reads %q", reqPypi.text)
	}
	p.say("allow c-7f3a91c2")
	p.wait("the list of answers", func() bool {
		for _, m := range p.messages() {
			if strings.Contains(m.text, "names 2 pending access requests, so it answered none of them") &&
				strings.Contains(m.text, "allow c-7f3a91c2 crates.io:443") && strings.Contains(m.text, "allow c-7f3a91c2 pypi.org:443") {
				return true
			}
		}
		return false
	})
	pending(t, pypi, "a bare allow with two pending")
	pending(t, crates, "a bare allow with two pending")
	for _, host := range []string{"pypi.org", "crates.io"} {
		if ok, _ := r.policy.Allowed(ci, host, 443); ok {
			t.Errorf("a bare allow with two pending approved %s", host)
		}
	}

	// crates.io's Allow button answers crates.io only.
	if reqCrates.choices[0] != "allow c-7f3a91c2 crates.io:443" {
		t.Fatalf("crates.io's buttons %q", reqCrates.choices)
	}
	p.click(reqCrates.id, reqCrates.choices[0])
	if g := answered(t, crates); g.err != nil || !g.g.Granted || g.g.Scope != egress.ScopeChick {
		t.Fatalf("crates.io: %+v, %v", g.g, g.err)
	}
	pending(t, pypi, "crates.io's button")
	if ok, _ := r.policy.Allowed(ci, "pypi.org", 443); ok {
		t.Error("crates.io's button approved pypi.org")
	}

	// One left: the bare answer answers it.
	p.say("allow c-7f3a91c2")
	if g := answered(t, pypi); g.err != nil || !g.g.Granted {
		t.Fatalf("pypi.org: %+v, %v", g.g, g.err)
	}
	for _, host := range []string{"pypi.org", "crates.io"} {
		if ok, _ := r.policy.Allowed(ci, host, 443); !ok {
			t.Errorf("%s is not allowed after its approval", host)
		}
	}
	if n := len(r.model.Requests()); n != 0 {
		t.Errorf("the model was asked %d times: access answers must not reach it", n)
	}
}

func TestAccessTwoPendingDiscord(t *testing.T) {
	t.Parallel()
	const general = "700000000000000001"
	mario := discordtest.User{ID: "100000000000000001", Username: "mario"}
	fake := discordtest.New(discordtest.Options{
		Channels: []discordtest.Channel{{ID: general, Type: discordtest.TypeText, Name: "general"}},
		Members:  []discordtest.User{mario},
	})
	t.Cleanup(fake.Close)
	ac := config.Adapter{Type: "discord", Admins: []string{mario.ID}, Settings: &discord.Settings{BotToken: "test-token", APIURL: fake.URL, GuildID: fake.GuildID()}}
	r := newButtonsRig(t, "discord", ac, func(env chat.Env) (chat.Adapter, error) { return discord.New(env, discord.Options{}) })
	twoPendingFlow(t, r, platform{
		say:   func(text string) { fake.Say(general, mario, text) },
		click: func(id, choice string) { fake.Click(general, id, mario, "choice:"+choice) },
		messages: func() []platformMsg {
			var out []platformMsg
			for _, m := range fake.MessagesLocked(general) {
				if m.Author.ID != fake.Bot().ID {
					continue
				}
				pm := platformMsg{id: m.ID, text: m.Content}
				for _, b := range m.Buttons() {
					pm.choices = append(pm.choices, strings.TrimPrefix(b.CustomID, "choice:"))
				}
				out = append(out, pm)
			}
			return out
		},
		wait: func(what string, cond func() bool) { fake.Wait(t, 15*time.Second, what, cond) },
	}, general)
}

func TestAccessTwoPendingSlack(t *testing.T) {
	t.Parallel()
	const general = "CGENERAL"
	mario := slacktest.User{ID: "UMARIO", Name: "mario"}
	fake := slacktest.New(slacktest.Options{
		Users:    []slacktest.User{mario},
		Channels: []slacktest.Channel{{ID: general, Name: "general", IsChannel: true, IsMember: true}},
	})
	t.Cleanup(fake.Close)
	ac := config.Adapter{Type: "slack", Admins: []string{mario.ID}, Settings: &slack.Settings{BotToken: slacktest.BotToken, AppToken: slacktest.AppToken, APIURL: fake.APIURL()}}
	r := newButtonsRig(t, "slack", ac, func(env chat.Env) (chat.Adapter, error) { return slack.New(env, slack.Options{}) })
	twoPendingFlow(t, r, platform{
		say: func(text string) { fake.Post(general, mario.ID, text) },
		click: func(ts, choice string) {
			for _, m := range fake.Messages(general) {
				if m.TS != ts {
					continue
				}
				for _, b := range m.Buttons() {
					if b.Value == choice {
						fake.Click(general, ts, mario.ID, b.ActionID)
						return
					}
				}
			}
			t.Fatalf("no button %q on message %s", choice, ts)
		},
		messages: func() []platformMsg {
			var out []platformMsg
			for _, m := range fake.MessagesLocked(general) {
				if m.User != fake.Bot().ID {
					continue
				}
				pm := platformMsg{id: m.TS, text: m.Text}
				for _, b := range m.Buttons() {
					pm.choices = append(pm.choices, b.Value)
				}
				out = append(out, pm)
			}
			return out
		},
		wait: func(what string, cond func() bool) { fake.Wait(t, 15*time.Second, what, cond) },
	}, general)
}
