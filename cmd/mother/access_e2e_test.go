package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/slack/slacktest"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/mother"
)

// chickRecords reads the hatchery's records (the last line per chick).
func chickRecords(t *testing.T, data string) map[string]hatchery.Record {
	t.Helper()
	out := map[string]hatchery.Record{}
	b, err := os.ReadFile(filepath.Join(data, "chicks", "chicks.jsonl"))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		var r hatchery.Record
		if json.Unmarshal([]byte(line), &r) == nil && r.ID != "" {
			out[r.ID] = r
		}
	}
	return out
}

// chickByGoal returns the record of the chick whose goal holds s.
func chickByGoal(t *testing.T, data, s string) (hatchery.Record, bool) {
	for _, r := range chickRecords(t, data) {
		if strings.Contains(r.Goal, s) {
			return r, true
		}
	}
	return hatchery.Record{}, false
}

// TestAccessControlScripted drives the real binary through the fake Slack
// with a script of DMs, mentions, a message from another bot and "stop
// all" from an admin (mario), a user allowed to DM (luigi) and a user who
// is not (wario), with real chicks running, and checks exactly who was
// answered, who was refused, which messages reached the model, and whose
// chicks each "stop all" cancelled.
func TestAccessControlScripted(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	wario := slacktest.User{ID: "UWARIO", Name: "wario"}
	const dmWario = "DWARIO"
	fake := slacktest.New(slacktest.Options{
		Users: []slacktest.User{sMario, sLuigi, wario},
		Channels: []slacktest.Channel{
			{ID: sGeneral, Name: "general", IsChannel: true, IsMember: true},
			{ID: sDMMario, IsIM: true, User: sMario.ID, IsMember: true},
			{ID: sDMLuigi, IsIM: true, User: sLuigi.ID, IsMember: true},
			{ID: dmWario, IsIM: true, User: wario.ID, IsMember: true},
		},
		PingInterval: time.Second,
	})
	t.Cleanup(fake.Close)

	var mu sync.Mutex
	var triggers []string // what each of Mother's runs answered
	model := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if r.Model == chickModel {
			return ollamatest.Turn{Text: "never", Delay: 5 * time.Minute} // works until cancelled
		}
		user := r.LastUser()
		if r.Messages[len(r.Messages)-1].Role == "tool" {
			return ollamatest.Turn{Text: "Started."}
		}
		mu.Lock()
		triggers = append(triggers, user)
		mu.Unlock()
		if _, goal, ok := strings.Cut(user, "job for "); ok {
			return motherTurn("job for " + goal)
		}
		return ollamatest.Turn{Text: "answered: " + user}
	})
	defer model.Close()

	data, _ := chickData(t, api, nil)
	var cfg map[string]any
	b, _ := os.ReadFile(filepath.Join(data, "config.json"))
	json.Unmarshal(b, &cfg)
	cfg["chicks"].(map[string]any)["maxPerChannel"] = 4
	cfg["chicks"].(map[string]any)["tiers"] = map[string]any{"local": map[string]any{"provider": "ollama", "model": chickModel}}
	cfg["adapters"] = map[string]any{"slack": map[string]any{
		"type": "slack", "botToken": slacktest.BotToken, "appToken": slacktest.AppToken, "apiURL": fake.APIURL(),
		"admins": []string{sMario.ID}, "dm": []string{sLuigi.ID},
	}}
	cfg["model"] = map[string]any{"provider": "ollama", "id": "tiny"}
	cfg["providers"] = map[string]any{"ollama": map[string]any{"url": model.URL}}
	startDaemon(t, data, cfg)
	fake.Wait(t, 15*time.Second, "mother on the socket", func() bool { return fake.OpensLocked() >= 1 })
	bot := fake.Bot().ID
	mention := "<@" + bot + "> "

	// botPosts are Mother's top-level messages in channel.
	botPosts := func(channel string) []string {
		var out []string
		for _, m := range fake.MessagesLocked(channel) {
			if m.User == bot && m.ThreadTS == "" && !m.HasButton("mother_stop") {
				out = append(out, m.Text)
			}
		}
		return out
	}
	waitPost := func(channel, want string) {
		t.Helper()
		fake.Wait(t, 30*time.Second, want+" in "+channel, func() bool {
			for _, p := range botPosts(channel) {
				if strings.Contains(p, want) {
					return true
				}
			}
			return false
		})
	}
	waitChick := func(goal string, final bool) hatchery.Record {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for {
			r, ok := chickByGoal(t, data, goal)
			if ok && (r.State == hatchery.StateRunning && !final || r.State.Final() && final) {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("chick %q: %+v (found %v), want final=%v", goal, r, ok, final)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// 1-3: DMs. The refused user gets the one-line refusal; the admin and
	// the allowed user are answered.
	fake.Post(dmWario, wario.ID, "hello from wario in a DM")
	waitPost(dmWario, mother.DMRefusal)
	fake.Post(sDMLuigi, sLuigi.ID, "hello from luigi in a DM")
	waitPost(sDMLuigi, "answered:")
	fake.Post(sDMMario, sMario.ID, "hello from mario in a DM")
	waitPost(sDMMario, "answered:")
	// 4-6: in a channel everyone may talk to Mother; chatter without a
	// mention and another bot's mention are not answered.
	fake.Post(sGeneral, wario.ID, "just talking among ourselves")
	fake.SendEvent(map[string]any{"type": "message", "subtype": "bot_message", "bot_id": "BOTHER", "username": "otherbot",
		"text": mention + "bot says hi", "ts": "1900000000.000001", "channel": sGeneral, "channel_type": "channel"})
	fake.Post(sGeneral, wario.ID, mention+"hello from wario in general")
	waitPost(sGeneral, "hello from wario in general")
	// 7: wario and luigi each start a chick.
	fake.Post(sGeneral, wario.ID, mention+"job for wario")
	w := waitChick("job for wario", false)
	fake.Post(sGeneral, sLuigi.ID, mention+"job for luigi")
	l := waitChick("job for luigi", false)
	if w.StartedBy != wario.ID || l.StartedBy != sLuigi.ID {
		t.Errorf("chicks started by %q and %q, want %s and %s", w.StartedBy, l.StartedBy, wario.ID, sLuigi.ID)
	}
	// 8: "stop all" in a refused DM is refused like any DM from wario.
	fake.Post(dmWario, wario.ID, "stop all")
	fake.Wait(t, 30*time.Second, "a second refusal", func() bool { return len(botPosts(dmWario)) == 2 })
	// 9: wario's "stop all" cancels his own chick only.
	fake.Post(sGeneral, wario.ID, mention+"stop all")
	waitPost(sGeneral, "Cancelled 1 of your chick(s); an admin can cancel the others.")
	if r := waitChick("job for wario", true); r.Reason != hatchery.ReasonKilled || !strings.Contains(r.Outcome, "stop all") {
		t.Errorf("wario's chick ended %s (%s), want killed by stop all", r.Reason, r.Outcome)
	}
	if r, _ := chickByGoal(t, data, "job for luigi"); r.State.Final() {
		t.Errorf("luigi's chick ended on wario's stop all: %+v", r)
	}
	// 10: the admin's "stop all" cancels everyone's.
	fake.Post(sGeneral, sMario.ID, mention+"stop all")
	waitPost(sGeneral, "Cancelled 1 chick(s).")
	if r := waitChick("job for luigi", true); r.Reason != hatchery.ReasonKilled {
		t.Errorf("luigi's chick ended %s (%s), want killed by the admin's stop all", r.Reason, r.Outcome)
	}

	// Exactly these messages started a run of Mother's model.
	mu.Lock()
	got := append([]string(nil), triggers...)
	mu.Unlock()
	want := []string{"hello from luigi in a DM", "hello from mario in a DM", "hello from wario in general", "job for wario", "job for luigi"}
	var matched []string
	for _, tr := range got {
		found := ""
		for _, w := range want {
			if strings.Contains(tr, w) {
				found = w
			}
		}
		if found == "" {
			t.Errorf("a run answered %q, which should not have been answered", tr)
			continue
		}
		matched = append(matched, found)
	}
	sort.Strings(matched)
	sort.Strings(want)
	if strings.Join(matched, "|") != strings.Join(want, "|") {
		t.Errorf("runs answered %q, want exactly %q", matched, want)
	}
	// The refused DMs never reached the model, not even as context.
	for _, r := range model.Requests() {
		for _, m := range r.Messages {
			if strings.Contains(m.Content, "hello from wario in a DM") {
				t.Errorf("a refused DM reached the model")
			}
		}
	}
	// Who got what: wario's DM only refusals; one answer each in the
	// other DMs; no answer to the chatter or to the other bot.
	fake.Lock()
	defer fake.Unlock()
	if p := botPosts(dmWario); len(p) != 2 || p[0] != mother.DMRefusal || p[1] != mother.DMRefusal {
		t.Errorf("wario's DM got %q, want two refusals", p)
	}
	for _, ch := range []string{sDMLuigi, sDMMario} {
		if p := botPosts(ch); len(p) != 1 {
			t.Errorf("%s got %d answers %q, want 1", ch, len(p), p)
		}
	}
	for _, p := range botPosts(sGeneral) {
		if strings.Contains(p, "just talking") || strings.Contains(p, "bot says hi") {
			t.Errorf("answered what was not addressed to Mother: %q", p)
		}
	}
}
