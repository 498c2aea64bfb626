package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/adapters/discord/discordtest"
	"github.com/mother-chat/mother/pkg/adapters/slack/slacktest"
	"github.com/mother-chat/mother/pkg/adapters/telegram/telegramtest"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// textModel is the model of a TestHostileBackText Mother: Mother's own
// model delegates the user's message to a chick and, in a run on the
// chick's result (the default answer mode), quotes the chick word for
// word, as a prompt-injected model would; the chick puts the hostile
// text into a tool label and its output, a request_access reason, a
// skill's description, an attachment's title and its result.
type textModel struct {
	hostile string

	mu   sync.Mutex
	seen []string // the last user message of each of Mother's runs
}

func (m *textModel) turn(r ollamatest.Request) ollamatest.Turn {
	last := r.Messages[len(r.Messages)-1]
	if r.Model != chickModel {
		m.mu.Lock()
		m.seen = append(m.seen, r.LastUser())
		m.mu.Unlock()
		switch {
		case last.Role == "tool":
			return ollamatest.Turn{Text: "Delegated."}
		case strings.Contains(r.LastUser(), "Result:"):
			// The chick's result: quoted, as a model that was told to
			// by the chick would.
			return ollamatest.Turn{Text: "The chick says: " + m.hostile}
		case strings.Contains(r.LastUser(), "textrow"):
			return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "spawn_chick", Args: map[string]any{"label": "delegating", "goal": "textrow: report"}}}}
		default:
			return ollamatest.Turn{Text: "ok"}
		}
	}
	skill := fmt.Sprintf("mkdir -p /workspace/skills/textskill && printf -- '---\\nname: textskill\\ndescription: the skill %s\\n---\\nbody\\n' > /workspace/skills/textskill/SKILL.md && printf '%%s\\n' 'out: %s' > /workspace/out.txt", m.hostile, m.hostile)
	steps := []ollamatest.Call{
		bashCall(m.hostile, "printf '%s\\n' 'label and output: "+m.hostile+"'"),
		{Name: "request_access", Args: map[string]any{"label": "asking", "destination": "text.example:443", "reason": "reason " + m.hostile}},
		bashCall("skill", skill),
		{Name: "attach", Args: map[string]any{"label": "attaching", "path": "/workspace/out.txt", "title": "title " + m.hostile}},
	}
	if n := len(toolResults(r)); n < len(steps) {
		return ollamatest.Turn{Calls: []ollamatest.Call{steps[n]}}
	}
	return ollamatest.Turn{Text: "Result: " + m.hostile}
}

// runs are the user messages Mother's model was asked about.
func (m *textModel) runs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.seen...)
}

// textMother starts the real binary with chicks against a platform's
// config (adapters), in the default answer mode unless relay, with
// request_access lapsing after a few seconds.
func textMother(t *testing.T, api *client.Client, model *ollamatest.Server, adapters map[string]any, relay bool) string {
	t.Helper()
	data, _ := chickData(t, api, nil)
	removeGateVolumes(t, api, data)
	var cfg map[string]any
	b, _ := os.ReadFile(filepath.Join(data, "config.json"))
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	chicks := cfg["chicks"].(map[string]any)
	if !relay {
		delete(chicks, "results")
	}
	chicks["egress"] = map[string]any{"requestTimeout": "3s"}
	cfg["adapters"] = adapters
	cfg["model"] = map[string]any{"provider": "ollama", "id": "tiny"}
	cfg["providers"] = map[string]any{"ollama": map[string]any{"url": model.URL}}
	startDaemon(t, data, cfg)
	return data
}

// textWaitEnded waits until Mother has answered the chick's result
// (answer mode) or relayed it.
func textWaitEnded(t *testing.T, data string, posted func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !posted() {
		if time.Now().After(deadline) {
			recs := chickRecords(t, data)
			t.Fatalf("the chick's end was not posted; chicks %+v", recs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// textNoRun checks that a bot's message never started a run of
// Mother's.
func textNoRun(t *testing.T, m *textModel, marker string) {
	t.Helper()
	time.Sleep(3 * time.Second)
	for _, u := range m.runs() {
		if strings.Contains(u, marker) {
			t.Errorf("another bot's message woke Mother: her model was asked about %q", u)
		}
	}
}

// TestHostileBackText: what a chick sends back, and what Mother's model
// writes quoting it, notifies nobody on the platforms. Real chicks (the
// scripted chick model) put Slack's mass mentions, user mentions and
// Telegram's links to users into a tool label and output, a
// request_access reason, a skill's description, an attachment's title,
// their result and, in the default answer mode, Mother's own answer; the
// wire fakes say whom each message Mother sent would notify (all
// versions of it, edits included). And another bot's message carrying
// mass mentions and a mention of Mother never starts a run.
func TestHostileBackText(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	runHostileRows(t, api,
		hostileRow{"SlackMassMentions", textSlack},
		hostileRow{"DiscordPings", textDiscord},
		hostileRow{"TelegramNotifies", textTelegram},
	)
}

// textSlack: row (a) on Slack in the default answer mode, with <@U…>
// (row b) too.
func textSlack(t *testing.T, api *client.Client) {
	m := &textModel{hostile: "<!channel> <!here> <!everyone> <!subteam^S0123|devs> <@ULUIGI>"}
	model := ollamatest.NewFunc(m.turn)
	defer model.Close()
	fake := newSlackFake(t)
	data := textMother(t, api, model, map[string]any{"slack": map[string]any{
		"type": "slack", "botToken": slacktest.BotToken, "appToken": slacktest.AppToken, "apiURL": fake.APIURL(),
		"admins": []string{sMario.ID}, "dm": "none",
	}}, false)
	fake.Wait(t, 15*time.Second, "mother on the socket", func() bool { return fake.OpensLocked() >= 1 })
	bot := fake.Bot().ID
	fake.Post(sGeneral, sMario.ID, "<@"+bot+"> textrow please")
	textWaitEnded(t, data, func() bool {
		fake.Lock()
		defer fake.Unlock()
		for _, msg := range fake.MessagesLocked(sGeneral) {
			if msg.User == bot && strings.Contains(msg.Text, "The chick says") && !msg.HasButton("mother_stop") {
				return true
			}
		}
		return false
	})
	var live []string
	var posts int
	for _, msg := range fake.Messages(sGeneral) {
		if msg.User != bot {
			continue
		}
		posts++
		live = append(live, slacktest.Notifies(msg)...)
		for _, d := range fake.Thread(sGeneral, msg.TS) {
			if d.User == bot && d.TS != msg.TS {
				posts++
				live = append(live, slacktest.Notifies(d)...)
			}
		}
	}
	t.Logf("FIGURE slack: %d live mentions in %d of Mother's messages", len(live), posts)
	if len(live) > 0 {
		t.Errorf("Mother's Slack messages notify %d times: %v", len(live), live)
	}
	for _, want := range []string{"&lt;!channel&gt;", "label and output", "reason", "the skill", "The chick says"} {
		if !textSlackSaw(fake, want) {
			t.Errorf("no message of Mother's shows %q: the row did not run whole", want)
		}
	}
	// Another bot's message with mass mentions and a mention of Mother.
	fake.Post(sGeneral, "", "<!channel> <@"+bot+"> textbot wake up", slacktest.AsBot("BOTHER"))
	textNoRun(t, m, "textbot")
}

// textSlackSaw reports whether any version of Mother's messages (threads
// included) showed s.
func textSlackSaw(fake *slacktest.Server, s string) bool {
	for _, msg := range fake.Messages(sGeneral) {
		all := append([]slacktest.Message{msg}, fake.Thread(sGeneral, msg.TS)...)
		for _, m := range all {
			for _, v := range append(m.Sent, m) {
				if strings.Contains(v.Text, s) || strings.Contains(v.Blocks, s) {
					return true
				}
			}
		}
	}
	return false
}

// textDiscord: row (b) on Discord, relay mode: <@id>, @everyone, @here
// and a role mention in every chick-made text, and the relayed result.
func textDiscord(t *testing.T, api *client.Client) {
	m := &textModel{hostile: "<@" + dLuigi.ID + "> @everyone @here <@&300000000000000001>"}
	model := ollamatest.NewFunc(m.turn)
	defer model.Close()
	fake := newDiscordFake(t, time.Second)
	data := textMother(t, api, model, discordConfig(fake, model)["adapters"].(map[string]any), true)
	fake.Wait(t, 15*time.Second, "mother on the gateway", func() bool { return fake.ConnectedLocked() >= 1 })
	bot := fake.Bot()
	fake.Say(dGeneral, dMario, "<@"+bot.ID+"> textrow please")
	textWaitEnded(t, data, func() bool {
		fake.Lock()
		defer fake.Unlock()
		for _, msg := range fake.MessagesLocked(dGeneral) {
			if msg.Author.ID == bot.ID && strings.Contains(msg.Content, "Result:") && !msg.HasButton("mother_stop") {
				return true
			}
		}
		return false
	})
	var pinging []string
	posts := 0
	check := func(msg discordtest.Message) {
		if msg.Author.ID != bot.ID {
			return
		}
		posts++
		var am struct {
			Parse []string `json:"parse"`
			Users []string `json:"users"`
			Roles []string `json:"roles"`
		}
		if len(msg.AllowedMentions) == 0 || json.Unmarshal(msg.AllowedMentions, &am) != nil || string(msg.AllowedMentions) == "null" {
			pinging = append(pinging, fmt.Sprintf("%.60q without allowed_mentions", msg.Content))
			return
		}
		if len(am.Parse) > 0 || len(am.Users) > 0 || len(am.Roles) > 0 {
			if strings.Contains(msg.Content, "<@") || strings.Contains(msg.Content, "@everyone") {
				pinging = append(pinging, fmt.Sprintf("%.60q allowing %s", msg.Content, msg.AllowedMentions))
			}
		}
	}
	for _, msg := range fake.Messages(dGeneral) {
		check(msg)
		for _, d := range fake.Messages(msg.ID) { // its detail thread
			check(d)
		}
	}
	t.Logf("FIGURE discord: %d of Mother's %d messages may ping", len(pinging), posts)
	for _, want := range []string{"<@" + dLuigi.ID, "label and output", "reason", "the skill", "Result:"} {
		saw := false
		for _, msg := range fake.Messages(dGeneral) {
			for _, d := range append(fake.Messages(msg.ID), msg) {
				saw = saw || strings.Contains(strings.Join(append(d.History, d.Content), "\n"), want)
			}
		}
		if !saw {
			t.Errorf("no message of Mother's shows %q: the row did not run whole", want)
		}
	}
	if len(pinging) > 0 {
		t.Errorf("Mother's Discord messages that may ping: %v", pinging)
	}
	bots := discordtest.User{ID: "900000000000000099", Username: "otherbot", Bot: true}
	fake.Say(dGeneral, bots, "@everyone <@"+bot.ID+"> textbot wake up")
	textNoRun(t, m, "textbot")
}

// textTelegram: row (b) on Telegram in the default answer mode: links to
// users by id and @username in every chick-made text, and the answer.
func textTelegram(t *testing.T, api *client.Client) {
	m := &textModel{hostile: "[hi](tg://user?id=666) @luigi"}
	model := ollamatest.NewFunc(m.turn)
	defer model.Close()
	fake := newTelegramFake(t)
	data := textMother(t, api, model, telegramConfig(fake, model)["adapters"].(map[string]any), false)
	waitFor(t, "mother to connect", tgPolling(fake, 1))
	fake.Post(tgGroup.ID, tgMario.ID, "@mother_bot textrow please")
	textWaitEnded(t, data, func() bool {
		for _, msg := range fake.BotMessages(tgGroup.ID, 0) {
			if strings.Contains(msg.Shown(), "The chick says") && !msg.Button {
				return true
			}
		}
		return false
	})
	var live []string
	msgs := fake.BotMessages(tgGroup.ID, 0)
	for _, msg := range msgs {
		live = append(live, telegramtest.NotifiesAny(msg)...)
	}
	for _, u := range fake.Uploads() {
		live = append(live, telegramtest.Notifies(u.Caption, "")...)
	}
	t.Logf("FIGURE telegram: %d notifications in %d of Mother's messages and %d uploads", len(live), len(msgs), len(fake.Uploads()))
	for _, want := range []string{"\\[hi\\]", "label and output", "reason", "the skill", "The chick says"} {
		saw := false
		for _, msg := range msgs {
			for _, v := range msg.Versions {
				saw = saw || strings.Contains(v.Text, want)
			}
		}
		if !saw {
			t.Errorf("no message of Mother's shows %q: the row did not run whole", want)
		}
	}
	if len(fake.Uploads()) != 1 {
		t.Errorf("uploads %d, want the chick's attachment", len(fake.Uploads()))
	}
	if len(live) > 0 {
		t.Errorf("Mother's Telegram messages notify: %v", live)
	}
	other := telegramtest.User{ID: 777, IsBot: true, FirstName: "Other", Username: "other_bot"}
	fake.AddUser(other)
	fake.Post(tgGroup.ID, other.ID, "@mother_bot textbot wake up")
	textNoRun(t, m, "textbot")
}
