package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/discord/discordtest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/render"
)

const (
	dGeneral = "700000000000000001"
	dRandom  = "700000000000000002"
	dDMMario = "700000000000000008"
	dDMLuigi = "700000000000000009"
)

var (
	dMario = discordtest.User{ID: "100000000000000001", Username: "mario"}
	dLuigi = discordtest.User{ID: "100000000000000002", Username: "luigi"}
)

func newDiscordFake(t *testing.T, hb time.Duration) *discordtest.Server {
	fake := discordtest.New(discordtest.Options{
		Channels: []discordtest.Channel{
			{ID: dGeneral, Type: discordtest.TypeText, Name: "general"},
			{ID: dRandom, Type: discordtest.TypeText, Name: "random"},
		},
		Members:           []discordtest.User{dMario, dLuigi},
		HeartbeatInterval: hb,
	})
	fake.AddChannel(discordtest.Channel{ID: dDMMario, Type: discordtest.TypeDM, Recipients: []discordtest.User{dMario}})
	fake.AddChannel(discordtest.Channel{ID: dDMLuigi, Type: discordtest.TypeDM, Recipients: []discordtest.User{dLuigi}})
	t.Cleanup(fake.Close)
	return fake
}

func discordConfig(fake *discordtest.Server, model *ollamatest.Server) map[string]any {
	return map[string]any{
		"adapters": map[string]any{"discord": map[string]any{
			"type": "discord", "botToken": "test-token", "apiURL": fake.URL, "guildId": fake.GuildID(),
			"admins": []string{dMario.ID}, "dm": "none",
		}},
		"model":     map[string]any{"provider": "ollama", "id": "tiny"},
		"providers": map[string]any{"ollama": map[string]any{"url": model.URL}},
	}
}

// botReplyTo returns Mother's message answering trigger, once it is final
// (no stop button) and has text containing want (the fake locked).
func botReplyTo(fake *discordtest.Server, channel, trigger, want string) *discordtest.Message {
	for _, m := range fake.MessagesLocked(channel) {
		if m.Author.ID == fake.Bot().ID && m.ReplyTo == trigger && !m.HasButton("mother:stop") && strings.Contains(m.Content, want) {
			return m
		}
	}
	return nil
}

func TestDiscordEndToEnd(t *testing.T) {
	t.Parallel()
	model := scriptedModel()
	defer model.Close()
	fake := newDiscordFake(t, 0)
	data := t.TempDir()
	d := startDaemon(t, data, discordConfig(fake, model))
	fake.Wait(t, 15*time.Second, "mother on the gateway", func() bool { return fake.ConnectedLocked() == 1 })
	bot := fake.Bot()

	t.Run("mention gets a rendered threaded answer", func(t *testing.T) {
		fake.Say(dGeneral, dLuigi, "just chatting, not for Mother")
		trig := fake.Say(dGeneral, dMario, "<@"+bot.ID+"> how many files are there?")
		var main discordtest.Message
		fake.Wait(t, 15*time.Second, "the answer", func() bool {
			if m := botReplyTo(fake, dGeneral, trig.ID, "There are **two** files"); m != nil {
				main = *m
				return true
			}
			return false
		})
		if want := "There are **two** files, @mario."; main.Content != want {
			t.Errorf("answer = %q, want %q (markdown kept; the model's @mario is inert text)", main.Content, want)
		}
		// The tool is instant here, so the working message may show the
		// tool or just the working indicator before the answer replaces it.
		if len(main.History) < 2 || !strings.Contains(main.History[0], "Working…") && !strings.Contains(main.History[0], "→ listing files") {
			t.Errorf("no working message before the answer: %q", main.History)
		}
		th, ok := fake.Channel(main.ID)
		if !ok || th.ParentID != dGeneral {
			t.Fatalf("no detail thread under the answer: %+v", th)
		}
		details := fake.Messages(main.ID)
		if len(details) < 2 || !strings.Contains(details[0].Content, "**bash** · listing files") || !strings.Contains(details[0].Content, "**error**") ||
			!strings.Contains(details[len(details)-1].Content, "tokens in") {
			t.Errorf("thread = %+v, want the bash call (an unknown tool here) and the usage", details)
		}
		// The prompt lists the people and channels the adapter knows.
		if sys := model.Requests()[0].System(); !strings.Contains(sys, "@mario") || !strings.Contains(sys, "@luigi") || !strings.Contains(sys, "#general ("+dGeneral+")") {
			t.Errorf("system prompt lacks the guild's users and channels:\n%s", sys)
		}
		// Only the mention was answered; both messages and the answer are logged.
		waitFor(t, "the answer in log.jsonl", func() bool { return len(readChannelLog(t, data, "discord", dGeneral)) >= 3 })
		logged := readChannelLog(t, data, "discord", dGeneral)
		var texts []string
		for _, m := range logged {
			texts = append(texts, m.Text)
		}
		want := []string{"just chatting, not for Mother", "@mother how many files are there?", "There are **two** files, @mario."}
		if strings.Join(texts, "|") != strings.Join(want, "|") || logged[2].ID != main.ID {
			t.Errorf("log.jsonl texts = %q (reply id %s), want %q with the answer under its Discord id %s", texts, logged[len(logged)-1].ID, want, main.ID)
		}
	})

	t.Run("long answer split at the limit", func(t *testing.T) {
		trig := fake.Say(dGeneral, dMario, "<@"+bot.ID+"> write a long program")
		fake.Wait(t, 15*time.Second, "the last part", func() bool {
			ms := fake.MessagesLocked(dGeneral)
			return strings.Contains(ms[len(ms)-1].Content, "That is all.")
		})
		var parts []discordtest.Message
		for _, m := range fake.Messages(dGeneral) {
			if m.Author.ID == bot.ID && (m.ReplyTo == trig.ID || len(parts) > 0) {
				parts = append(parts, m)
			}
		}
		if len(parts) < 4 {
			t.Fatalf("answer in %d messages, want it split", len(parts))
		}
		var all strings.Builder
		for _, p := range parts {
			if render.Len(p.Content) > 2000 {
				t.Errorf("a part has %d runes", render.Len(p.Content))
			}
			if strings.Count(p.Content, "```")%2 != 0 {
				t.Errorf("a part leaves a code block open:\n%s", p.Content)
			}
			all.WriteString(p.Content)
		}
		for i := range 150 {
			if !strings.Contains(all.String(), fmt.Sprintf("fmt.Println(%d) //", i)) {
				t.Fatalf("line %d lost in the split", i)
			}
		}
	})

	t.Run("rate limit answers are respected", func(t *testing.T) {
		fake.RateLimit("PATCH", "/channels/"+dGeneral+"/messages/", 0.6, 1)
		trig := fake.Say(dGeneral, dMario, "<@"+bot.ID+"> count the files again")
		fake.Wait(t, 15*time.Second, "the answer despite the 429", func() bool {
			return botReplyTo(fake, dGeneral, trig.ID, "There are **two** files") != nil
		})
		var limited, retried time.Time
		for _, r := range fake.Requests() {
			if r.Method == "PATCH" && r.Status == 429 {
				limited = r.At
			} else if r.Method == "PATCH" && !limited.IsZero() && retried.IsZero() {
				retried = r.At
			}
		}
		if limited.IsZero() || retried.IsZero() || retried.Sub(limited) < 600*time.Millisecond {
			t.Errorf("429 at %v, next edit at %v: want the edit retried after retry_after (0.6s)", limited, retried)
		}
	})

	t.Run("dropped connection is re-established", func(t *testing.T) {
		before := fake.Sessions()
		fake.DropConnections()
		fake.Wait(t, 15*time.Second, "a new gateway session", func() bool { return fake.SessionsLocked() > before && fake.ConnectedLocked() == 1 })
		waitFor(t, "mother to log the reconnect", func() bool { return strings.Contains(d.stderr.String(), "reconnected") })
		trig := fake.Say(dGeneral, dMario, "<@"+bot.ID+"> are you back?")
		var ans *discordtest.Message
		fake.Wait(t, 15*time.Second, "an answer after the reconnect", func() bool {
			ans = botReplyTo(fake, dGeneral, trig.ID, "Hello, @mario!")
			return ans != nil
		})
		if strings.Contains(ans.Content, "Late answer") {
			t.Errorf("a message sent after the reconnect was answered as late: %q", ans.Content)
		}
	})

	t.Run("stop button aborts the run", func(t *testing.T) {
		trig := fake.Say(dGeneral, dMario, "<@"+bot.ID+"> do something slow")
		var working string
		fake.Wait(t, 15*time.Second, "the working message with its stop button", func() bool {
			for _, m := range fake.MessagesLocked(dGeneral) {
				if m.ReplyTo == trig.ID && m.HasButton("mother:stop") {
					working = m.ID
					return true
				}
			}
			return false
		})
		fake.Click(dGeneral, working, dMario, "mother:stop")
		fake.Wait(t, 15*time.Second, "the run to end as stopped", func() bool {
			m := botReplyTo(fake, dGeneral, trig.ID, "Stopped.")
			return m != nil && m.ID == working
		})
		for _, m := range fake.Messages(dGeneral) {
			if strings.Contains(m.Content, "far too late") {
				t.Errorf("the stopped run still answered: %q", m.Content)
			}
		}
	})

	t.Run("DM from an admin is answered", func(t *testing.T) {
		trig := fake.Say(dDMMario, dMario, "hi there")
		fake.Wait(t, 15*time.Second, "the DM answer", func() bool {
			return botReplyTo(fake, dDMMario, trig.ID, "Hello") != nil
		})
		if logged := readChannelLog(t, data, "discord", dDMMario); len(logged) == 0 || !logged[0].IsDM || !logged[0].IsMention {
			t.Errorf("DM logged as %+v, want IsDM and IsMention", logged)
		}
	})

	t.Run("DM from a refused user is refused", func(t *testing.T) {
		fake.Say(dDMLuigi, dLuigi, "let me in")
		fake.Wait(t, 15*time.Second, "a refusal", func() bool {
			ms := fake.MessagesLocked(dDMLuigi)
			return len(ms) == 2 && ms[1].Author.ID == bot.ID && strings.HasPrefix(ms[1].Content, "Sorry, I only answer direct messages")
		})
		for _, r := range model.Requests() {
			if strings.Contains(r.LastUser(), "let me in") {
				t.Errorf("the refused DM reached the model")
			}
		}
	})
}

func TestDiscordBackfillAfterRestart(t *testing.T) {
	t.Parallel()
	model := scriptedModel()
	defer model.Close()
	fake := newDiscordFake(t, 0)
	data := t.TempDir()
	cfg := discordConfig(fake, model)
	bot := fake.Bot()

	d := startDaemon(t, data, cfg)
	fake.Wait(t, 15*time.Second, "mother on the gateway", func() bool { return fake.ConnectedLocked() == 1 })
	first := fake.Say(dGeneral, dMario, "<@"+bot.ID+"> hello")
	fake.Wait(t, 15*time.Second, "the first answer", func() bool { return botReplyTo(fake, dGeneral, first.ID, "Hello") != nil })
	d.stop(t)

	// While Mother is down.
	fake.Say(dGeneral, dLuigi, "she is offline", discordtest.Offline())
	missed := fake.Say(dGeneral, dMario, "<@"+bot.ID+"> are you there?", discordtest.Offline())

	startDaemon(t, data, cfg)
	fake.Wait(t, 15*time.Second, "the late answer", func() bool {
		return botReplyTo(fake, dGeneral, missed.ID, "(Late answer") != nil
	})
	waitFor(t, "the late answer in log.jsonl", func() bool { return len(readChannelLog(t, data, "discord", dGeneral)) >= 5 })
	logged := readChannelLog(t, data, "discord", dGeneral)
	var texts []string
	for _, m := range logged {
		texts = append(texts, m.Text)
	}
	if !strings.Contains(strings.Join(texts, "|"), "she is offline|@mother are you there?|(Late answer") {
		t.Errorf("log.jsonl = %q, want the missed messages logged in order, then the late answer", texts)
	}
}

func TestDiscordSilentGatewayDetected(t *testing.T) {
	t.Parallel()
	model := scriptedModel()
	defer model.Close()
	// Heartbeats every 200 ms: a gateway that stops acknowledging them is
	// dead after a few intervals.
	fake := newDiscordFake(t, 200*time.Millisecond)
	data := t.TempDir()
	d := startDaemon(t, data, discordConfig(fake, model))
	fake.Wait(t, 15*time.Second, "mother on the gateway", func() bool { return fake.ConnectedLocked() == 1 })
	bot := fake.Bot()
	first := fake.Say(dGeneral, dMario, "<@"+bot.ID+"> hello")
	fake.Wait(t, 15*time.Second, "the first answer", func() bool { return botReplyTo(fake, dGeneral, first.ID, "Hello") != nil })

	before := fake.Sessions()
	fake.SetSilent(true)
	swallowed := fake.Say(dGeneral, dMario, "<@"+bot.ID+"> can you hear me?")
	fake.Wait(t, 15*time.Second, "a new session", func() bool { return fake.SessionsLocked() > before })
	fake.SetSilent(false)
	// The message the silent connection swallowed is fetched and answered.
	fake.Wait(t, 15*time.Second, "the swallowed message answered", func() bool {
		return botReplyTo(fake, dGeneral, swallowed.ID, "Hello") != nil
	})
	waitFor(t, "the reconnect logged", func() bool { return strings.Contains(d.stderr.String(), "gateway connection was lost; reconnected") })
}
