package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/adapters/discord/discordtest"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/metrics"
	"github.com/mother-chat/mother/pkg/metrics/metricstest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// What an operator sees, end to end with the real binaries: the mother
// daemon on a wire-level Discord fake, a chick in a real container, an
// event, a gateway drop; then momctl status and events ls, the metrics
// scraped from /metrics, /healthz, and the JSON log at info level, which
// must hold neither the message body nor any token.
func TestOperateDaemonMetricsStatusAndLogs(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	const (
		body       = "quokka-7F3A9-body"       // in the user's message, the goal, the answers
		discordTok = "discord-tok-OPERATE-77Q" // Mother's bot token
		anthropic  = "sk-ant-api03-OPERATE-55Z"
	)
	fake := discordtest.New(discordtest.Options{
		Channels: []discordtest.Channel{{ID: dGeneral, Type: discordtest.TypeText, Name: "general"}},
		Members:  []discordtest.User{dMario},
		Token:    discordTok,
	})
	t.Cleanup(fake.Close)
	model := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		switch r.Model {
		case motherModel:
			if strings.Contains(r.LastUser(), "[EVENT:") {
				return ollamatest.Turn{Text: "Event handled.", PromptTokens: 11, OutputTokens: 7}
			}
			if !hasToolResult(r) {
				return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "spawn_chick", Args: map[string]any{"label": "delegating", "goal": "Crunch " + body + " in the shell."}}}, PromptTokens: 11, OutputTokens: 7}
			}
			return ollamatest.Turn{Text: "On it: " + body + ".", PromptTokens: 11, OutputTokens: 7}
		case chickModel:
			if len(toolResults(r)) == 0 {
				return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "bash", Args: map[string]any{"label": "crunch", "command": "echo crunched"}}}, PromptTokens: 40, OutputTokens: 30}
			}
			return ollamatest.Turn{Text: "Chick done with " + body + ".", PromptTokens: 40, OutputTokens: 30}
		}
		return ollamatest.Turn{Status: 404, Error: "unknown model " + r.Model}
	})
	defer model.Close()

	data := t.TempDir()
	metricsAddr := freePort(t)
	cfg := map[string]any{
		"adapters": map[string]any{"discord": map[string]any{
			"type": "discord", "botToken": discordTok, "apiURL": fake.URL, "guildId": fake.GuildID(), "admins": []string{dMario.ID},
		}},
		"model":     map[string]any{"provider": "ollama", "id": motherModel},
		"providers": map[string]any{"ollama": map[string]any{"url": model.URL}, "anthropic": map[string]any{"apiKey": anthropic}},
		"chicks": map[string]any{
			"image": hatcherytest.Image, "defaultTier": "local",
			"tiers": map[string]any{"local": map[string]any{"provider": "ollama", "model": chickModel, "description": "the test tier",
				"price": map[string]any{"inputPerMTok": 2, "outputPerMTok": 10}}},
			"heartbeatInterval": "500ms", "killGrace": "2s", "timeout": "3m",
			"resources": map[string]any{"memory": "256m", "cpus": 1, "pids": 128, "tmpfs": "32m"},
			"results":   "relay", // the runs and posts counted below are the message's and the chick's
		},
		// A call reserves its prompt's bytes plus the output limit
		// (about 16,000 tokens here) before it is sent: the cap leaves
		// room for that, and the status shows the settled 140.
		"budgets": map[string]any{"tierDailyTokens": map[string]any{"local": 20000}},
		"log":     map[string]any{"format": "json", "level": "info"},
		"metrics": map[string]any{"listen": metricsAddr},
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(filepath.Join(data, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	evDir := filepath.Join(data, "workspace", "events")
	os.MkdirAll(evDir, 0o700)
	os.WriteFile(filepath.Join(evDir, "newyear.json"), []byte(`{"type":"periodic","channelId":"discord/`+dGeneral+`","text":"happy new year","schedule":"0 0 1 1 *","timezone":"UTC"}`), 0o600)
	hatcherytest.RemoveOnCleanup(t, api, func() string { return hatcherytest.InstanceFile(filepath.Join(data, "chicks")) })

	d := &daemon{stderr: &lockedBuffer{}, done: make(chan error, 1)}
	d.cmd = exec.Command(motherBin, data) // log level and format from config.json
	d.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "MOTHER_GRPC_LISTEN=127.0.0.1:0", "ANTHROPIC_API_KEY=" + anthropic}
	d.cmd.Stdout, d.cmd.Stderr = d.stderr, d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	noRaceAtEnd(t, "mother", d.stderr.String)
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		d.stop(t)
		if t.Failed() {
			t.Logf("mother's log:\n%s", d.stderr.String())
		}
	})
	fake.Wait(t, 30*time.Second, "mother on the gateway", func() bool { return fake.ConnectedLocked() == 1 })
	bot := fake.Bot()

	// A mention: Mother delegates to a chick, answers, and the chick's
	// result is posted when it ends.
	fake.Say(dGeneral, dMario, "<@"+bot.ID+"> please crunch "+body)
	fake.Wait(t, 2*time.Minute, "the chick's result", func() bool { return botSaid(fake, dGeneral, "Chick done with "+body) })
	fake.Wait(t, 30*time.Second, "Mother's own answer", func() bool { return botSaid(fake, dGeneral, "On it: "+body) })
	// An immediate event.
	os.WriteFile(filepath.Join(evDir, "ping.json"), []byte(`{"type":"immediate","channelId":"discord/`+dGeneral+`","text":"check the backups"}`), 0o600)
	fake.Wait(t, 30*time.Second, "the event's answer", func() bool { return botSaid(fake, dGeneral, "Event handled.") })
	// The gateway drops; the adapter reconnects.
	fake.DropConnections()
	fake.Wait(t, 30*time.Second, "a new gateway session", func() bool { return fake.ConnectedLocked() == 1 && fake.SessionsLocked() >= 2 })

	// momctl status: versions, the adapter and its reconnect, the host,
	// today's budget, the next event.
	var st struct {
		Version, Momctl, ChickImage string
		Adapters                    []struct {
			Name, Type, State string
			Reconnects        int64
		}
		Hosts []struct {
			Name              string
			Up                bool
			Running, Capacity int32
			EngineVersion     string
		}
		Budgets []struct {
			Scope       string
			Used, Limit int64
		}
		NextEvents []struct{ File, Type, Channel string }
		Chicks     []json.RawMessage
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, code := momctl(t, data, "status", "--json")
		if code != 0 {
			t.Fatalf("momctl status --json: exit %d: %s", code, out)
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("momctl status --json: %v\n%s", err, out)
		}
		if len(st.Adapters) == 1 && st.Adapters[0].Reconnects == 1 && st.Adapters[0].State == "connected" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("momctl status never showed discord connected after 1 reconnect:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st.Version != "dev" || st.Momctl != "dev" || st.ChickImage != hatcherytest.Image {
		t.Errorf("status versions: mother %q, momctl %q, image %q", st.Version, st.Momctl, st.ChickImage)
	}
	if a := st.Adapters[0]; a.Name != "discord" || a.Type != "discord" {
		t.Errorf("status adapter %+v", a)
	}
	if len(st.Hosts) != 1 || !st.Hosts[0].Up || st.Hosts[0].Running != 0 || st.Hosts[0].EngineVersion == "" {
		t.Errorf("status hosts %+v, want local up, idle, with its engine version", st.Hosts)
	}
	if len(st.Chicks) != 0 {
		t.Errorf("status lists %d live chicks, want 0", len(st.Chicks))
	}
	// The tier's day holds the chick's settled 140 tokens and the report
	// Mother's model read about it, charged to the chick (issue 42).
	tierUsed := 140 + reportTokens(t, data, "")
	budgetOK := false
	for _, b := range st.Budgets {
		if b.Scope == "tier local today" && b.Used == tierUsed && b.Limit == 20000 {
			budgetOK = true
		}
	}
	if !budgetOK {
		t.Errorf("status budgets %+v, want tier local today: %d of 20000", st.Budgets, tierUsed)
	}
	if len(st.NextEvents) != 1 || st.NextEvents[0].File != "newyear.json" {
		t.Errorf("status next events %+v, want newyear.json", st.NextEvents)
	}
	text, code := momctl(t, data, "status")
	for _, re := range []string{`(?m)^Mother dev, up \S+ \(momctl dev, chick image ` + regexp.QuoteMeta(hatcherytest.Image) + `\)$`, `(?m)^  discord\s+discord\s+connected for \S+\s+1 reconnects$`, `(?m)^  local\s+up for \S+\s+0/6 chicks`, fmt.Sprintf(`tier local today: %d tokens \(of 20000, %d left\)`, tierUsed, 20000-tierUsed), `newyear\.json \(periodic, discord/` + dGeneral} {
		if code != 0 || !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("momctl status does not match %s:\n%s", re, text)
		}
	}
	evs, code := momctl(t, data, "events", "ls")
	if code != 0 || !strings.Contains(evs, "newyear.json") || !strings.Contains(evs, "0 0 1 1 *") {
		t.Errorf("momctl events ls (exit %d):\n%s", code, evs)
	}

	// The metrics.
	base := "http://" + metricsAddr
	var s metricstest.Scrape
	deadline = time.Now().Add(30 * time.Second)
	for {
		s = metricstest.Get(t, base+"/metrics")
		if v, _ := s.Value("mother_adapter_reconnects_total", "adapter", "discord"); v == 1 {
			if v, _ := s.Value("mother_runs_total", "kind", "event"); v == 1 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never caught up:\n%s", s.Raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	want := []struct {
		name   string
		labels []string
		v      float64
	}{
		{"mother_messages_in_total", []string{"adapter", "discord"}, 1},
		{"mother_messages_out_total", []string{"adapter", "discord"}, 3}, // Mother's answer, the chick's result, the event's answer
		{"mother_runs_total", []string{"adapter", "discord", "kind", "message", "stop", "done"}, 1},
		{"mother_runs_total", []string{"adapter", "discord", "kind", "event", "stop", "done"}, 1},
		{"mother_run_duration_seconds", []string{"kind", "message"}, 1},
		{"mother_model_tokens_total", []string{"direction", "input"}, 33},
		{"mother_model_tokens_total", []string{"direction", "output"}, 21},
		{"mother_queue_depth", []string{"adapter", "discord"}, 0},
		{"mother_chicks_spawned_total", []string{"tier", "local"}, 1},
		{"mother_chicks_finished_total", []string{"tier", "local", "outcome", "done"}, 1},
		{"mother_chicks", []string{"state", "running"}, 0},
		{"mother_chick_spawn_seconds", []string{"host", "local"}, 1},
		{"mother_chick_duration_seconds", []string{"tier", "local"}, 1},
		{"mother_chick_model_calls_total", []string{"tier", "local", "result", "ok"}, 2},
		{"mother_chick_model_tokens_total", []string{"tier", "local", "direction", "input"}, 80},
		{"mother_chick_model_tokens_total", []string{"tier", "local", "direction", "output"}, 60},
		{"mother_budget_used_tokens", []string{"kind", "tier", "name", "local"}, float64(tierUsed)},
		{"mother_budget_remaining_tokens", []string{"kind", "tier", "name", "local"}, float64(20000 - tierUsed)},
		{"mother_events_fired_total", []string{"type", "immediate"}, 1},
		{"mother_adapter_connected", []string{"adapter", "discord"}, 1},
		{"mother_adapter_reconnects_total", []string{"adapter", "discord"}, 1},
		{"mother_docker_host_up", []string{"host", "local"}, 1},
		{"mother_docker_host_chicks", []string{"host", "local"}, 0},
		{"mother_healthy", nil, 1},
	}
	for _, w := range want {
		if got, ok := s.Value(w.name, w.labels...); !ok || got != w.v {
			t.Errorf("%s%v = %v (present %v), want %v\n%s", w.name, w.labels, got, ok, w.v, s.Series(w.name))
		}
	}
	// 80 input tokens at $2/M and 60 output at $10/M.
	if got, _ := s.Value("mother_chick_model_cost_usd_total", "tier", "local"); math.Abs(got-0.00076) > 1e-9 {
		t.Errorf("chick cost = %v, want 0.00076", got)
	}
	if sec := s.HistogramSum("mother_chick_spawn_seconds", "host", "local"); sec <= 0 || sec > 120 {
		t.Errorf("spawn latency %vs", sec)
	}
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	var h metrics.Health
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if resp.StatusCode != 200 || h.Status != "ok" || h.Version != "dev" || len(h.AdaptersDown)+len(h.HostsDown) != 0 {
		t.Errorf("/healthz: %d %+v", resp.StatusCode, h)
	}

	// The log: JSON lines at info, each with exactly one component, and
	// neither the message body nor a token anywhere in it.
	d.stop(t)
	logText := d.stderr.String()
	components := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(logText))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	lines := 0
	for sc.Scan() {
		line := sc.Text()
		lines++
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("log line is not JSON: %q", line)
			continue
		}
		if n := strings.Count(line, `"component":`); n != 1 {
			t.Errorf("log line has %d component fields: %s", n, line)
		}
		if k := duplicateKey(line); k != "" {
			t.Errorf("log line has the key %q twice: %s", k, line)
		}
		c, _ := rec["component"].(string)
		components[c] = true
		if lv, _ := rec["level"].(string); lv == "DEBUG" {
			t.Errorf("debug line at info level: %s", line)
		}
	}
	for _, secret := range []string{body, discordTok, anthropic, "crunched"} {
		if strings.Contains(logText, secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
	for _, c := range []string{"daemon", "mother", "events", "nest", "hatchery", "discord", "metrics"} {
		if !components[c] {
			t.Errorf("no log line of component %s (the check above would prove nothing); components seen: %v", c, components)
		}
	}
	if lines < 10 {
		t.Errorf("only %d log lines", lines)
	}
}

// duplicateKey returns a key that occurs twice in the top-level object of
// a JSON log line ("" if none).
func duplicateKey(line string) string {
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		k, _ := tok.(string)
		if seen[k] {
			return k
		}
		seen[k] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return ""
		}
	}
	return ""
}

// botSaid reports whether Mother posted a message containing s in channel
// (the fake locked by Wait).
func botSaid(fake *discordtest.Server, channel, s string) bool {
	for _, m := range fake.MessagesLocked(channel) {
		if m.Author.ID == fake.Bot().ID && !m.Deleted && strings.Contains(m.Content, s) {
			return true
		}
	}
	return false
}
