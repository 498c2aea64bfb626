package main

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/slack/slacktest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// TestRecallScopeSlack: through the real binary and the fake Slack, the
// recall tool's scope is decided in code whatever the model asks: a
// direct message's history is found in that DM only (never from the
// group, not even for an admin), another group's history only when an
// admin asks for it by name, and a person who is no admin gets a refusal.
func TestRecallScopeSlack(t *testing.T) {
	t.Parallel()
	const random = "CRANDOM"
	fake := slacktest.New(slacktest.Options{
		Users: []slacktest.User{sMario, sLuigi},
		Channels: []slacktest.Channel{
			{ID: sGeneral, Name: "general", IsChannel: true, IsMember: true},
			{ID: random, Name: "random", IsChannel: true, IsMember: true},
			{ID: sDMMario, IsIM: true, User: sMario.ID, IsMember: true},
			{ID: sDMLuigi, IsIM: true, User: sLuigi.ID, IsMember: true},
		},
		PingInterval: time.Second,
	})
	t.Cleanup(fake.Close)

	// The model calls recall with the arguments written after "recall "
	// in the message it answers, and keeps what the tool returned.
	var mu sync.Mutex
	results := map[string]string{}
	model := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		user := r.LastUser()
		last := r.Messages[len(r.Messages)-1]
		if last.Role == "tool" {
			mu.Lock()
			results[user] = last.Content
			mu.Unlock()
			return ollamatest.Turn{Text: "Done searching."}
		}
		if _, args, ok := strings.Cut(user, "recall "); ok {
			var a map[string]any
			if err := json.Unmarshal([]byte(args), &a); err == nil {
				return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "recall", Args: a}}}
			}
		}
		return ollamatest.Turn{Text: "Noted."}
	})
	defer model.Close()
	data := t.TempDir()
	cfg := slackConfig(fake, model)
	cfg["adapters"].(map[string]any)["slack"].(map[string]any)["dm"] = "everyone"
	startDaemon(t, data, cfg)
	fake.Wait(t, 15*time.Second, "mother on the socket", func() bool { return fake.OpensLocked() == 1 })

	// The history: luigi's DM and #random each hold a "zebra" line.
	dm := fake.Post(sDMLuigi, sLuigi.ID, "my locker code hint is zebra-purple")
	fake.Wait(t, 15*time.Second, "the DM answer", func() bool { return slackAnswer(fake, sDMLuigi, dm.TS, "Noted.") != nil })
	fake.Post(random, sMario.ID, "the zebra project starts in May")
	waitFor(t, "#random's line in its log", func() bool { return len(readChannelLog(t, data, "slack", random)) >= 1 })

	ask := func(t *testing.T, channel, user, args string) string {
		t.Helper()
		text := "recall " + args
		if !strings.HasPrefix(channel, "D") {
			text = "<@UBOT> " + text
		}
		trig := fake.Post(channel, user, text)
		fake.Wait(t, 15*time.Second, "the answer to "+args, func() bool { return slackAnswer(fake, channel, trig.TS, "Done searching.") != nil })
		mu.Lock()
		defer mu.Unlock()
		for k, v := range results {
			if strings.Contains(k, args) {
				return v
			}
		}
		t.Fatalf("no tool result for %s", args)
		return ""
	}
	for _, c := range []struct {
		name, channel, user, args string
		want, not                 string
	}{
		{"own DM finds its history", sDMLuigi, sLuigi.ID, `{"query":"zebra locker"}`, "zebra-purple", ""},
		{"group does not find a DM's history", sGeneral, sMario.ID, `{"query":"zebra locker code"}`, "Nothing in the history of slack/" + sGeneral, "zebra-purple"},
		{"admin naming a DM is refused", sGeneral, sMario.ID, `{"query":"zebra","channel":"slack/` + sDMLuigi + `"}`, "I never search another person's direct messages.", "zebra-purple"},
		{"admin's DM naming another DM is refused", sDMMario, sMario.ID, `{"query":"zebra","channel":"slack/` + sDMLuigi + `"}`, "I never search another person's direct messages.", "zebra-purple"},
		{"non-admin naming another channel is refused", sGeneral, sLuigi.ID, `{"query":"zebra project","channel":"slack/` + random + `"}`, "can search other channels.", "May"},
		{"non-admin in a DM naming another channel is refused", sDMLuigi, sLuigi.ID, `{"query":"zebra project","channel":"` + random + `"}`, "can search other channels.", "May"},
		{"admin naming a group finds it", sGeneral, sMario.ID, `{"query":"zebra project start","channel":"slack/` + random + `"}`, "the zebra project starts in May", "zebra-purple"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ask(t, c.channel, c.user, c.args)
			if !strings.Contains(got, c.want) || (c.not != "" && strings.Contains(got, c.not)) {
				t.Errorf("recall %s from %s by %s = %q, want it to hold %q and not %q", c.args, c.channel, c.user, got, c.want, c.not)
			}
		})
	}
}
