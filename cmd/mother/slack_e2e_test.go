package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/slack/slacktest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/render"
)

var (
	sMario = slacktest.User{ID: "UMARIO", Name: "mario", RealName: "Mario Rossi"}
	sLuigi = slacktest.User{ID: "ULUIGI", Name: "luigi"}
)

const (
	sGeneral = "CGENERAL"
	sDMMario = "DMARIO"
	sDMLuigi = "DLUIGI"
)

func newSlackFake(t *testing.T) *slacktest.Server {
	fake := slacktest.New(slacktest.Options{
		Users: []slacktest.User{sMario, sLuigi},
		Channels: []slacktest.Channel{
			{ID: sGeneral, Name: "general", IsChannel: true, IsMember: true},
			{ID: sDMMario, IsIM: true, User: sMario.ID, IsMember: true},
			{ID: sDMLuigi, IsIM: true, User: sLuigi.ID, IsMember: true},
		},
		PingInterval: time.Second,
	})
	t.Cleanup(fake.Close)
	return fake
}

func slackConfig(fake *slacktest.Server, model *ollamatest.Server) map[string]any {
	return map[string]any{
		"adapters": map[string]any{"slack": map[string]any{
			"type": "slack", "botToken": slacktest.BotToken, "appToken": slacktest.AppToken, "apiURL": fake.APIURL(),
			"admins": []string{sMario.ID}, "dm": "none",
		}},
		"model":     map[string]any{"provider": "ollama", "id": "tiny"},
		"providers": map[string]any{"ollama": map[string]any{"url": model.URL}},
	}
}

// slackAnswer returns Mother's top-level message posted after ts, once it
// is final (no stop button) and contains want (the fake locked).
func slackAnswer(fake *slacktest.Server, channel, after, want string) *slacktest.Message {
	for _, m := range fake.MessagesLocked(channel) {
		if m.User == fake.Bot().ID && m.ThreadTS == "" && m.TS > after && !m.HasButton("mother_stop") && strings.Contains(m.Text, want) {
			return m
		}
	}
	return nil
}

func TestSlackEndToEnd(t *testing.T) {
	t.Parallel()
	model := scriptedModel()
	defer model.Close()
	fake := newSlackFake(t)
	data := t.TempDir()
	d := startDaemon(t, data, slackConfig(fake, model))
	fake.Wait(t, 15*time.Second, "mother on the socket", func() bool { return fake.OpensLocked() == 1 })

	t.Run("mention gets a rendered threaded answer", func(t *testing.T) {
		fake.Post(sGeneral, sLuigi.ID, "just chatting")
		trig := fake.Post(sGeneral, sMario.ID, "<@UBOT> how many files are there?")
		var main slacktest.Message
		fake.Wait(t, 15*time.Second, "the answer", func() bool {
			if m := slackAnswer(fake, sGeneral, trig.TS, "There are"); m != nil {
				main = *m
				return true
			}
			return false
		})
		if want := "There are *two* files, @mario."; main.Text != want {
			t.Errorf("answer = %q, want %q (mrkdwn; the model's @mario is inert text)", main.Text, want)
		}
		if len(main.History) < 2 {
			t.Errorf("the answer did not replace a working message: %q", main.History)
		}
		th := fake.Thread(sGeneral, main.TS)
		if len(th) < 2 || !strings.Contains(th[0].Text, "*bash* · listing files") || !strings.Contains(th[0].Text, "*error*") || !strings.Contains(th[len(th)-1].Text, "tokens in") {
			t.Errorf("thread = %+v, want the tool call and the usage", th)
		}
		if sys := model.Requests()[0].System(); !strings.Contains(sys, "@mario (Mario Rossi)") || !strings.Contains(sys, "#general ("+sGeneral+")") || !strings.Contains(sys, "#dm-mario ("+sDMMario+")") {
			t.Errorf("system prompt lacks the workspace's users and channels:\n%s", sys)
		}
		waitFor(t, "the answer in log.jsonl", func() bool { return len(readChannelLog(t, data, "slack", sGeneral)) >= 3 })
		logged := readChannelLog(t, data, "slack", sGeneral)
		var texts []string
		for _, m := range logged {
			texts = append(texts, m.Text)
		}
		want := []string{"just chatting", "@mother how many files are there?", "There are **two** files, @mario."}
		if strings.Join(texts, "|") != strings.Join(want, "|") || logged[2].ID != main.TS {
			t.Errorf("log.jsonl = %q, want %q with the answer under its ts %s", texts, want, main.TS)
		}
	})

	t.Run("long answer split with the whole text in the thread", func(t *testing.T) {
		trig := fake.Post(sGeneral, sMario.ID, "<@UBOT> write a long program")
		var main slacktest.Message
		fake.Wait(t, 15*time.Second, "the answer", func() bool {
			if m := slackAnswer(fake, sGeneral, trig.TS, "continued in the thread"); m != nil {
				main = *m
				return true
			}
			return false
		})
		fake.Wait(t, 15*time.Second, "the whole answer in the thread", func() bool {
			ms := fake.MessagesLocked(sGeneral)
			last := ms[len(ms)-1]
			return last.ThreadTS == main.TS && strings.Contains(last.Text, "That is all.")
		})
		if render.Len(main.Text) > 3900 {
			t.Errorf("main message has %d runes", render.Len(main.Text))
		}
		var all strings.Builder
		for _, m := range fake.Thread(sGeneral, main.TS) {
			if render.Len(m.Text) > 3900 || strings.Count(m.Text, "```")%2 != 0 {
				t.Errorf("thread part of %d runes, fences balanced %v", render.Len(m.Text), strings.Count(m.Text, "```")%2 == 0)
			}
			all.WriteString(m.Text)
		}
		for i := range 150 {
			if !strings.Contains(all.String(), fmt.Sprintf("fmt.Println(%d) //", i)) {
				t.Fatalf("line %d missing from the thread", i)
			}
		}
	})

	t.Run("rate limit answers are respected", func(t *testing.T) {
		fake.RateLimit("chat.update", time.Second)
		trig := fake.Post(sGeneral, sMario.ID, "<@UBOT> count the files again")
		fake.Wait(t, 15*time.Second, "the answer despite the 429", func() bool { return slackAnswer(fake, sGeneral, trig.TS, "There are") != nil })
		var limited, retried time.Time
		for _, r := range fake.Requests() {
			if r.Method == "chat.update" && r.Status == 429 {
				limited = r.At
			} else if r.Method == "chat.update" && !limited.IsZero() && retried.IsZero() {
				retried = r.At
			}
		}
		if limited.IsZero() || retried.IsZero() || retried.Sub(limited) < time.Second {
			t.Errorf("429 at %v, next update at %v: want it after Retry-After (1s)", limited, retried)
		}
	})

	t.Run("dropped connection is re-established", func(t *testing.T) {
		fake.DropConnections()
		fake.Wait(t, 15*time.Second, "a new socket", func() bool { return fake.OpensLocked() >= 2 })
		waitFor(t, "mother to log the reconnect", func() bool { return strings.Contains(d.stderr.String(), "reconnected") })
		trig := fake.Post(sGeneral, sMario.ID, "<@UBOT> are you back?")
		fake.Wait(t, 15*time.Second, "an answer after the reconnect", func() bool { return slackAnswer(fake, sGeneral, trig.TS, "Hello, @mario!") != nil })
	})

	t.Run("stop button aborts the run", func(t *testing.T) {
		trig := fake.Post(sGeneral, sMario.ID, "<@UBOT> do something slow")
		var working string
		fake.Wait(t, 15*time.Second, "the working message with its stop button", func() bool {
			for _, m := range fake.MessagesLocked(sGeneral) {
				if m.TS > trig.TS && m.HasButton("mother_stop") {
					working = m.TS
					return true
				}
			}
			return false
		})
		fake.Click(sGeneral, working, sMario.ID, "mother_stop")
		fake.Wait(t, 15*time.Second, "the run to end as stopped", func() bool {
			m := slackAnswer(fake, sGeneral, trig.TS, "Stopped.")
			return m != nil && m.TS == working
		})
		for _, m := range fake.Messages(sGeneral) {
			if strings.Contains(m.Text, "far too late") {
				t.Errorf("the stopped run still answered: %q", m.Text)
			}
		}
	})

	t.Run("DM from an admin is answered", func(t *testing.T) {
		trig := fake.Post(sDMMario, sMario.ID, "hi there")
		fake.Wait(t, 15*time.Second, "the DM answer", func() bool { return slackAnswer(fake, sDMMario, trig.TS, "Hello") != nil })
		if logged := readChannelLog(t, data, "slack", sDMMario); len(logged) == 0 || !logged[0].IsDM || !logged[0].IsMention {
			t.Errorf("DM logged as %+v, want IsDM and IsMention", logged)
		}
	})

	t.Run("DM from a refused user is refused", func(t *testing.T) {
		trig := fake.Post(sDMLuigi, sLuigi.ID, "let me in")
		fake.Wait(t, 15*time.Second, "a refusal", func() bool {
			return slackAnswer(fake, sDMLuigi, trig.TS, "Sorry, I only answer direct messages") != nil
		})
		for _, r := range model.Requests() {
			if strings.Contains(r.LastUser(), "let me in") {
				t.Errorf("the refused DM reached the model")
			}
		}
	})
}

func TestSlackBackfillAfterRestart(t *testing.T) {
	t.Parallel()
	model := scriptedModel()
	defer model.Close()
	fake := newSlackFake(t)
	data := t.TempDir()
	cfg := slackConfig(fake, model)

	d := startDaemon(t, data, cfg)
	fake.Wait(t, 15*time.Second, "mother on the socket", func() bool { return fake.OpensLocked() == 1 })
	first := fake.Post(sGeneral, sMario.ID, "<@UBOT> hello")
	fake.Wait(t, 15*time.Second, "the first answer", func() bool { return slackAnswer(fake, sGeneral, first.TS, "Hello") != nil })
	d.stop(t)

	fake.Post(sGeneral, sLuigi.ID, "she is offline", slacktest.Offline())
	missed := fake.Post(sGeneral, sMario.ID, "<@UBOT> are you there?", slacktest.Offline())

	startDaemon(t, data, cfg)
	fake.Wait(t, 15*time.Second, "the late answer", func() bool { return slackAnswer(fake, sGeneral, missed.TS, "(Late answer") != nil })
	waitFor(t, "the late answer in log.jsonl", func() bool { return len(readChannelLog(t, data, "slack", sGeneral)) >= 5 })
	var texts []string
	for _, m := range readChannelLog(t, data, "slack", sGeneral) {
		texts = append(texts, m.Text)
	}
	if !strings.Contains(strings.Join(texts, "|"), "she is offline|@mother are you there?|(Late answer") {
		t.Errorf("log.jsonl = %q, want the missed messages in order, then the late answer", texts)
	}
}
