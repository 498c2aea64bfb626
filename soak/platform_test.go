//go:build soak

package soak

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/discord/discordtest"
	"github.com/mother-chat/mother/pkg/adapters/slack/slacktest"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// platform is what the scenario needs of a fake platform.
type platform struct {
	name     string
	adapter  map[string]any
	channel  string
	connects func() int
	drop     func()
	// say posts a message mentioning Mother; offline ones are stored but
	// not delivered (they were posted while the connection was down).
	say func(text string, offline bool) string
	// answers are Mother's final top-level answers (texts) in the channel.
	answers func() []string
}

// midReplyModel is Mother's model: a run that reads a file, then answers
// slowly, so the connection can be dropped in the middle of it.
func midReplyModel() *ollamatest.Server {
	return ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		user := r.LastUser()
		switch {
		case lastIsTool(r):
			return ollamatest.Turn{Text: "The long answer to the first question.", Delay: 3 * time.Second}
		case strings.Contains(user, "first question"):
			return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "read", Args: map[string]any{"label": "reading my memory", "path": "MEMORY.md"}}}, Delay: time.Second}
		case strings.Contains(user, "asked while you were away"):
			return ollamatest.Turn{Text: "The answer to what was asked while I was away."}
		}
		return ollamatest.Turn{Text: "Something else."}
	})
}

// TestSoakPlatformDropMidReply: the platform connection (Discord's
// gateway, Slack's socket) drops while Mother is in the middle of a reply,
// and a message is posted while it is down. The reply completes once, the
// connection comes back, the missed message is fetched and answered once,
// and the log holds every message once.
func TestSoakPlatformDropMidReply(t *testing.T) {
	docker(t) // the daemon runs the chick machinery too
	for _, mk := range []func(t *testing.T) platform{discordPlatform, slackPlatform} {
		pl := mk(t)
		t.Run(pl.name, func(t *testing.T) {
			model := midReplyModel()
			defer model.Close()
			data := newData(t, nil, map[string]any{
				"adapters":  map[string]any{pl.name: pl.adapter},
				"model":     map[string]any{"provider": "ollama", "id": motherModel},
				"providers": map[string]any{"ollama": map[string]any{"url": model.URL}},
				"grpc":      map[string]any{"listen": freeAddr(t)},
			})
			p := startMother(t, data, false)
			waitCond(t, "Mother connected", 30*time.Second, func() bool { return pl.connects() >= 1 })
			first := pl.connects()
			start := time.Now()
			pl.say("first question, please", false)
			time.Sleep(1500 * time.Millisecond) // the run is between its tool call and its slow answer
			pl.drop()
			dropped := time.Now()
			pl.say("a question asked while you were away", true)
			waitCond(t, "the reconnection", time.Minute, func() bool { return pl.connects() > first })
			reconnect := time.Since(dropped)
			waitCond(t, "both answers", 2*time.Minute, func() bool {
				a := strings.Join(pl.answers(), "|")
				return strings.Contains(a, "The long answer to the first question.") && strings.Contains(a, "The answer to what was asked while I was away.")
			})
			elapsed := time.Since(start)
			time.Sleep(2 * time.Second) // would a duplicate follow?
			counts := map[string]int{}
			for _, a := range pl.answers() {
				counts[a]++
			}
			for a, n := range counts {
				if n != 1 {
					t.Errorf("answer %q posted %d times", a, n)
				}
			}
			if code := p.stop(t, time.Minute); code != 0 {
				t.Errorf("exit %d", code)
			}
			// The log: each message once.
			b, _ := os.ReadFile(filepath.Join(data, "workspace", "channels", pl.name, pl.channel, "log.jsonl"))
			ids := map[string]int{}
			var texts []string
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				var m chat.ChannelMessage
				if json.Unmarshal([]byte(line), &m) == nil {
					ids[m.ID]++
					texts = append(texts, m.Text)
				}
			}
			for id, n := range ids {
				if n != 1 {
					t.Errorf("message %s logged %d times", id, n)
				}
			}
			joined := strings.Join(texts, "|")
			for _, want := range []string{"first question", "asked while you were away", "The long answer", "The answer to what was asked"} {
				if !strings.Contains(joined, want) {
					t.Errorf("log.jsonl lacks %q: %q", want, texts)
				}
			}
			checkStore(t, data)
			figure(t, "connection dropped mid-reply: reconnected in %s; the reply in flight completed once; the message posted during the outage was fetched and answered once; both answered %s after the first message; log.jsonl holds %d messages, each once",
				reconnect.Round(time.Millisecond), elapsed.Round(time.Millisecond), len(ids))
		})
	}
}

func waitCond(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func discordPlatform(t *testing.T) platform {
	mario := discordtest.User{ID: "100000000000000001", Username: "mario"}
	const general = "700000000000000001"
	fake := discordtest.New(discordtest.Options{
		Channels: []discordtest.Channel{{ID: general, Type: discordtest.TypeText, Name: "general"}},
		Members:  []discordtest.User{mario},
	})
	t.Cleanup(fake.Close)
	bot := fake.Bot().ID
	return platform{
		name:     "discord",
		adapter:  map[string]any{"type": "discord", "botToken": "test-token", "apiURL": fake.URL, "guildId": fake.GuildID()},
		channel:  general,
		connects: fake.Sessions,
		drop:     fake.DropConnections,
		say: func(text string, offline bool) string {
			var opts []discordtest.SayOption
			if offline {
				opts = append(opts, discordtest.Offline())
			}
			return fake.Say(general, mario, "<@"+bot+"> "+text, opts...).ID
		},
		answers: func() []string {
			var out []string
			for _, m := range fake.Messages(general) {
				if m.Author.ID == bot && !m.HasButton("mother:stop") && !strings.Contains(m.Content, "Working") && !strings.HasPrefix(m.Content, "→") {
					out = append(out, m.Content)
				}
			}
			return out
		},
	}
}

func slackPlatform(t *testing.T) platform {
	mario := slacktest.User{ID: "UMARIO", Name: "mario"}
	const general = "CGENERAL"
	fake := slacktest.New(slacktest.Options{
		Users:        []slacktest.User{mario},
		Channels:     []slacktest.Channel{{ID: general, Name: "general", IsChannel: true, IsMember: true}},
		PingInterval: time.Second,
	})
	t.Cleanup(fake.Close)
	bot := fake.Bot().ID
	return platform{
		name:     "slack",
		adapter:  map[string]any{"type": "slack", "botToken": slacktest.BotToken, "appToken": slacktest.AppToken, "apiURL": fake.APIURL()},
		channel:  general,
		connects: fake.Opens,
		drop:     fake.DropConnections,
		say: func(text string, offline bool) string {
			var opts []slacktest.PostOption
			if offline {
				opts = append(opts, slacktest.Offline())
			}
			return fake.Post(general, mario.ID, "<@"+bot+"> "+text, opts...).TS
		},
		answers: func() []string {
			var out []string
			for _, m := range fake.Messages(general) {
				if m.User == bot && m.ThreadTS == "" && !m.HasButton("mother_stop") && !strings.Contains(m.Text, "Working") && !strings.HasPrefix(m.Text, "→") {
					out = append(out, m.Text)
				}
			}
			return out
		},
	}
}
