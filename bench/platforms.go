package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/discord/discordtest"
	"github.com/mother-chat/mother/pkg/adapters/slack/slacktest"
	"github.com/mother-chat/mother/pkg/adapters/telegram/telegramtest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// platforms measures Mother's memory with every platform adapter connected
// to local fakes speaking the real protocols, idle and after messages
// spread across 150 channels (50 Discord, 50 Slack, 50 Telegram groups).
func platforms(bin, tmp string, quick bool) {
	model := ollamatest.NewFunc(func(ollamatest.Request) ollamatest.Turn { return ollamatest.Turn{Text: "ok"} })
	defer model.Close()
	model.ForgetRequests()
	mario := discordtest.User{ID: "100000000000000001", Username: "mario"}
	var dch []discordtest.Channel
	for i := range 50 {
		dch = append(dch, discordtest.Channel{ID: fmt.Sprintf("7000000000000%05d", i), Type: discordtest.TypeText, Name: fmt.Sprintf("d%02d", i)})
	}
	dfake := discordtest.New(discordtest.Options{Channels: dch, Members: []discordtest.User{mario}})
	defer dfake.Close()
	smario := slacktest.User{ID: "U0MARIO", Name: "mario"}
	var sch []slacktest.Channel
	for i := range 50 {
		sch = append(sch, slacktest.Channel{ID: fmt.Sprintf("C%05d", i), Name: fmt.Sprintf("s%02d", i), IsChannel: true, IsMember: true})
	}
	sfake := slacktest.New(slacktest.Options{Users: []slacktest.User{smario}, Channels: sch, PingInterval: 5 * time.Second})
	defer sfake.Close()
	tfake := telegramtest.New()
	defer tfake.Close()
	tmario := telegramtest.User{ID: 555, FirstName: "Mario", Username: "mario"}
	tfake.AddUser(tmario)
	var tch []telegramtest.Chat
	for i := range 50 {
		c := telegramtest.Chat{ID: -1000000000000 - int64(i), Type: "supergroup", Title: fmt.Sprintf("t%02d", i)}
		tfake.AddChat(c)
		tch = append(tch, c)
	}

	data := filepath.Join(tmp, "platforms")
	check(os.MkdirAll(data, 0o700))
	cfg, _ := json.Marshal(map[string]any{
		"adapters": map[string]any{
			"discord":  map[string]any{"type": "discord", "botToken": "test-token", "apiURL": dfake.URL, "guildId": dfake.GuildID()},
			"slack":    map[string]any{"type": "slack", "botToken": slacktest.BotToken, "appToken": slacktest.AppToken, "apiURL": sfake.APIURL()},
			"telegram": map[string]any{"type": "telegram", "botToken": telegramtest.BotToken, "apiURL": tfake.APIURL()},
		},
		"model":     map[string]any{"provider": "ollama", "id": "tiny"},
		"providers": map[string]any{"ollama": map[string]any{"url": model.URL}},
	})
	check(os.WriteFile(filepath.Join(data, "config.json"), cfg, 0o600))
	sock := filepath.Join(data, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	check(err)
	defer conn.Close()
	cmd := exec.Command(bin, data)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "NOTIFY_SOCKET=" + sock}
	check(cmd.Start())
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	buf := make([]byte, 256)
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		n, err := conn.Read(buf)
		check(err)
		if strings.HasPrefix(string(buf[:n]), "READY=1") {
			break
		}
	}
	waitUntil("every platform connected", 30*time.Second, func() bool {
		return dfake.Connected() == 1 && sfake.Opens() >= 1 && telegramPolling(tfake)
	})
	time.Sleep(3 * time.Second)
	idle := memOf(cmd.Process.Pid)
	resetPeak(cmd.Process.Pid) // the peak over the messages, not the start-up's

	n := 1000
	if quick {
		n = 200
	}
	start := time.Now()
	for i := range n {
		switch i % 3 {
		case 0:
			dfake.Say(dch[(i/3)%50].ID, mario, fmt.Sprintf("<@%s> question %d", dfake.Bot().ID, i))
		case 1:
			sfake.Post(sch[(i/3)%50].ID, smario.ID, fmt.Sprintf("<@%s> question %d", sfake.Bot().ID, i))
		default:
			tfake.Post(tch[(i/3)%50].ID, tmario.ID, fmt.Sprintf("@%s question %d", telegramtest.Bot.Username, i))
		}
	}
	waitUntil("every answer", 10*time.Minute, func() bool { return answered(dfake, sfake, dch, sch)+telegramAnswered(tfake, tch) >= n })
	elapsed := time.Since(start)
	after := memOf(cmd.Process.Pid)
	time.Sleep(4 * time.Second)
	idleAgain := memOf(cmd.Process.Pid)
	summary.peakPlatforms = after.peak
	fmt.Printf("## Footprint with Discord, Slack and Telegram connected (local fakes, real client libraries)\n\n")
	fmt.Printf("| state | RSS | of which anonymous |\n|---|---|---|\n")
	fmt.Printf("| idle, all adapters connected (Discord, Slack, Telegram; peak RSS during start-up %.1f MB) | %s |\n", mb(idle.peak), idle)
	fmt.Printf("| right after %d messages answered across 150 channels in %.1f s (peak RSS over the messages %.1f MB) | %s |\n", n, elapsed.Seconds(), mb(after.peak), after)
	fmt.Printf("| idle again, 4 s later | %s |\n\n", idleAgain)
}

// answered counts Mother's final answers in every channel.
func answered(d *discordtest.Server, s *slacktest.Server, dch []discordtest.Channel, sch []slacktest.Channel) int {
	n := 0
	for _, c := range dch {
		for _, m := range d.Messages(c.ID) {
			if m.Author.ID == d.Bot().ID && m.Content == "ok" {
				n++
			}
		}
	}
	for _, c := range sch {
		for _, m := range s.Messages(c.ID) {
			if m.User == s.Bot().ID && m.ThreadTS == "" && m.Text == "ok" {
				n++
			}
		}
	}
	return n
}

// telegramPolling reports whether Mother has polled the fake Bot API.
func telegramPolling(t *telegramtest.Server) bool {
	for _, r := range t.Requests() {
		if r.Method == "getUpdates" && r.Status == 200 {
			return true
		}
	}
	return false
}

// telegramAnswered counts Mother's final answers in the Telegram groups.
func telegramAnswered(t *telegramtest.Server, chats []telegramtest.Chat) int {
	n := 0
	for _, c := range chats {
		for _, m := range t.BotMessages(c.ID, 0) {
			if !m.Button && m.Shown() == "ok" {
				n++
			}
		}
	}
	return n
}

func waitUntil(what string, timeout time.Duration, cond func() bool) {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			check(fmt.Errorf("timed out waiting for %s", what))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
