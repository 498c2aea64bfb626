package main

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/telegram/telegramtest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

var (
	tgGroup = telegramtest.Chat{ID: -1009876543210, Type: "supergroup", Title: "Family"}
	tgMario = telegramtest.User{ID: 555, FirstName: "Mario", Username: "mario"}
	tgLuigi = telegramtest.User{ID: 666, FirstName: "Luigi", Username: "luigi"}
)

const tgGroupID = "-1009876543210"

func newTelegramFake(t *testing.T) *telegramtest.Server {
	fake := telegramtest.New()
	t.Cleanup(fake.Close)
	fake.AddChat(tgGroup)
	fake.AddChat(telegramtest.Chat{ID: tgMario.ID, Type: "private"})
	fake.AddUser(tgMario)
	fake.AddUser(tgLuigi)
	return fake
}

func telegramConfig(fake *telegramtest.Server, model *ollamatest.Server) map[string]any {
	return map[string]any{
		"adapters": map[string]any{"telegram": map[string]any{
			"type": "telegram", "botToken": telegramtest.BotToken, "apiURL": fake.APIURL(),
			"admins": []string{"555"}, "dm": "none",
		}},
		"model":     map[string]any{"provider": "ollama", "id": "tiny"},
		"providers": map[string]any{"ollama": map[string]any{"url": model.URL}},
	}
}

// tgAnswer returns Mother's final (buttonless) message in the group that
// answers message trigger and shows want.
func tgAnswer(fake *telegramtest.Server, trigger int, want string) *telegramtest.Message {
	for _, m := range fake.BotMessages(tgGroup.ID, 0) {
		if m.ReplyTo == trigger && !m.Button && strings.Contains(m.Shown(), want) {
			return &m
		}
	}
	return nil
}

// tgPolling reports whether the n-th start of Mother has fetched what was
// pending (getUpdates answered after the n-th getMe): later messages are
// live, not late.
func tgPolling(fake *telegramtest.Server, n int) func() bool {
	return func() bool {
		starts := 0
		for _, r := range fake.Requests() {
			switch {
			case r.Method == "getMe":
				starts++
			case r.Method == "getUpdates" && r.Status == 200 && starts >= n:
				return true
			}
		}
		return false
	}
}

func TestTelegramEndToEnd(t *testing.T) {
	t.Parallel()
	model := scriptedModel()
	defer model.Close()
	fake := newTelegramFake(t)
	data := t.TempDir()
	startDaemon(t, data, telegramConfig(fake, model))
	waitFor(t, "mother to connect", tgPolling(fake, 1))

	t.Run("group mention answered with the tool details as replies", func(t *testing.T) {
		fake.Post(tgGroup.ID, tgLuigi.ID, "just chatting")
		trig := fake.Post(tgGroup.ID, tgMario.ID, "@mother_bot how many files are there?")
		var main *telegramtest.Message
		waitFor(t, "the answer", func() bool { main = tgAnswer(fake, trig, "There are"); return main != nil })
		if want := "There are *two* files, @\u200bmario."; main.Shown() != want || main.Parse != "MarkdownV2" {
			t.Errorf("answer = %q (%s), want %q in MarkdownV2 (the model's @mario broken: inert)", main.Shown(), main.Parse, want)
		}
		if main.Edits == 0 {
			t.Errorf("the answer did not replace a working message")
		}
		var details []string
		for _, m := range fake.BotMessages(tgGroup.ID, 0) {
			if m.ReplyTo == main.ID {
				details = append(details, m.Shown())
			}
		}
		if d := strings.Join(details, "\n"); !strings.Contains(d, "bash") || !strings.Contains(d, "tokens in") {
			t.Errorf("details = %q, want the tool call and the usage as replies to the answer", details)
		}
		if fake.ChatActions(tgGroup.ID) == 0 {
			t.Errorf("no typing action while Mother worked")
		}
		if sys := model.Requests()[0].System(); !strings.Contains(sys, "@mario (Mario)") || !strings.Contains(sys, tgGroupID) {
			t.Errorf("system prompt lacks the users and the group:\n%s", sys)
		}
		waitFor(t, "the answer in log.jsonl", func() bool { return len(readChannelLog(t, data, "telegram", tgGroupID)) >= 3 })
		var texts []string
		for _, m := range readChannelLog(t, data, "telegram", tgGroupID) {
			texts = append(texts, m.Text)
		}
		if want := "just chatting|@mother_bot how many files are there?|There are **two** files, @mario."; strings.Join(texts, "|") != want {
			t.Errorf("log.jsonl = %q, want %q", texts, want)
		}
	})

	t.Run("/ask is answered, chatter is not", func(t *testing.T) {
		trig := fake.Post(tgGroup.ID, tgMario.ID, "/ask hello there")
		waitFor(t, "the answer to /ask", func() bool { return tgAnswer(fake, trig, "Hello, @\u200bmario!") != nil })
	})

	t.Run("stop button aborts the run", func(t *testing.T) {
		trig := fake.Post(tgGroup.ID, tgMario.ID, "@mother_bot do something slow")
		var working int
		waitFor(t, "the working message with its Stop button", func() bool {
			for _, m := range fake.BotMessages(tgGroup.ID, 0) {
				if m.ReplyTo == trig && m.Button {
					working = m.ID
					return true
				}
			}
			return false
		})
		fake.Click(tgGroup.ID, working, tgLuigi.ID, "mother:stop")
		fake.Click(tgGroup.ID, working, tgMario.ID, "mother:stop")
		waitFor(t, "the run to end as stopped", func() bool { return tgAnswer(fake, trig, "Stopped.") != nil })
		answers := strings.Join(fake.Answers(), "\n")
		if !strings.Contains(answers, "Only whoever asked") || !strings.Contains(answers, "Stopping") {
			t.Errorf("callback answers = %q, want Luigi refused and Mario's stop acknowledged", answers)
		}
	})
}

func TestTelegramRestartNeitherLosesNorRepeats(t *testing.T) {
	t.Parallel()
	model := scriptedModel()
	defer model.Close()
	fake := newTelegramFake(t)
	data := t.TempDir()
	cfg := telegramConfig(fake, model)

	d := startDaemon(t, data, cfg)
	waitFor(t, "mother to connect", tgPolling(fake, 1))
	first := fake.Post(tgGroup.ID, tgMario.ID, "@mother_bot hello")
	waitFor(t, "the first answer", func() bool { return tgAnswer(fake, first, "Hello") != nil })
	d.stop(t)

	// Telegram offers every update again, as if Mother had died before
	// confirming them; meanwhile two messages arrive.
	fake.Unconfirm(0)
	fake.Post(tgGroup.ID, tgLuigi.ID, "she is offline")
	missed := fake.Post(tgGroup.ID, tgMario.ID, "@mother_bot are you there?")

	startDaemon(t, data, cfg)
	waitFor(t, "the late answer", func() bool { return tgAnswer(fake, missed, "(Late answer") != nil })
	waitFor(t, "the late answer in log.jsonl", func() bool { return len(readChannelLog(t, data, "telegram", tgGroupID)) >= 5 })
	time.Sleep(500 * time.Millisecond) // a repeated answer would come now
	var texts []string
	for _, m := range readChannelLog(t, data, "telegram", tgGroupID) {
		texts = append(texts, m.Text)
	}
	if got := strings.Join(texts, "|"); strings.Count(got, "@mother_bot hello") != 1 || !strings.Contains(got, "she is offline|@mother_bot are you there?|(Late answer") {
		t.Errorf("log.jsonl = %q, want the first message once, then the missed ones in order and the late answer", texts)
	}
	n := 0
	for _, m := range fake.BotMessages(tgGroup.ID, 0) {
		if m.ReplyTo == first {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the first message got %d answers, want 1", n)
	}
}

func TestTelegramCheckConfig(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	const token = "not-a-telegram-token-secret"
	write := func(cfg string) {
		if err := os.WriteFile(filepath.Join(data, "config.json"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"adapters": {"tg": {"type": "telegram", "botToken": "` + token + `", "webhookURL": "https://bot.example/hook", "apiURL": "ftp://x"}}}`)
	r := runMother(t, "", nil, "--check-config", data)
	for _, want := range []string{"adapters.tg.botToken: a Telegram bot token looks like", "adapters.tg.apiURL", "adapters.tg.webhookListen: missing", "adapters.tg.webhookSecret: missing"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if r.code != 2 || strings.Contains(r.stderr, token) {
		t.Errorf("exit %d (want 2), or the token shows:\n%s", r.code, r.stderr)
	}
	write(`{"adapters": {"tg": {"type": "telegram"}}}`)
	r = runMother(t, "", []string{"TELEGRAM_BOT_TOKEN=123:abc"}, "--check-config", data)
	if r.code != 0 || !strings.Contains(r.stdout, "configuration OK") {
		t.Errorf("token from TELEGRAM_BOT_TOKEN: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestTelegramWebhookEndToEnd(t *testing.T) {
	t.Parallel()
	model := scriptedModel()
	defer model.Close()
	fake := newTelegramFake(t)
	data := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := telegramConfig(fake, model)
	tg := cfg["adapters"].(map[string]any)["telegram"].(map[string]any)
	tg["webhookURL"], tg["webhookListen"], tg["webhookSecret"] = "http://"+addr+"/telegram", addr, "e2e_secret"
	startDaemon(t, data, cfg)
	waitFor(t, "the webhook to be registered", func() bool { url, secret := fake.Webhook(); return url != "" && secret == "e2e_secret" })
	resp, err := http.Post("http://"+addr+"/telegram", "application/json", strings.NewReader(`{"update_id": 1, "message": {"message_id": 99, "date": 1, "chat": {"id": 555, "type": "private"}, "from": {"id": 555}, "text": "forged"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("an update without the secret: HTTP %d, want 403", resp.StatusCode)
	}
	trig := fake.Post(tgGroup.ID, tgMario.ID, "@mother_bot hello through the hook")
	waitFor(t, "the answer", func() bool { return tgAnswer(fake, trig, "Hello") != nil })
	for _, m := range readChannelLog(t, data, "telegram", "555") {
		if strings.Contains(m.Text, "forged") {
			t.Errorf("the forged update was logged")
		}
	}
}
