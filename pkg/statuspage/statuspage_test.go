package statuspage

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/disk"
	"github.com/mother-chat/mother/pkg/events"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hosttools"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/fallback"
)

// The sources are Mother's parts as the page sees them; the page's own
// logic (what it shows, what it hides) is what these tests exercise, over
// a real HTTP connection. cmd/mother's browser test runs it against the
// real parts.
type adapters []chat.AdapterReport

func (a adapters) AdapterReports() []chat.AdapterReport { return a }

type chicks struct {
	list  []hatchery.Info
	hosts []hatchery.HostStatus
}

// List lists the chicks alive, or all of them, as the hatchery does.
func (c chicks) List(all bool) []hatchery.Info {
	var out []hatchery.Info
	for _, in := range c.list {
		if all || !in.State.Final() {
			out = append(out, in)
		}
	}
	return out
}

func (c chicks) HostStates() []hatchery.HostStatus     { return c.hosts }
func (b budgets) Budgets() []broker.Budget             { return b }
func (e eventList) List(string) []events.Info          { return e }
func (s toolServers) Status() []hosttools.ServerStatus { return s }

type providerHealth []fallback.Status

func (p providerHealth) Statuses() []fallback.Status { return p }

func (p providerHealth) ModelServers() []model.ServerStatus {
	return []model.ServerStatus{
		{Name: "ollama", For: []string{"mother", "tier local"}, Up: true, Latency: 12 * time.Millisecond, CheckedAt: time.Date(2026, 3, 1, 9, 2, 0, 0, time.UTC)},
		{Name: "openai:vllm", For: []string{"tier big"}, Error: "unreachable: connection refused"},
	}
}

type (
	budgets     []broker.Budget
	eventList   []events.Info
	toolServers []hosttools.ServerStatus
)

const secret = "xoxb-SECRET-token-123456"

func fixture(t *testing.T) (*Page, *httptest.Server, *clock.Fake) {
	t.Helper()
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	p := New(Options{Version: "v1.2.3", ChickImage: "mother-chick:1.2.3", StartedAt: start, Secrets: []string{secret, ""}, Clock: clk})
	created := start.Add(time.Minute)
	p.Watch(Sources{
		Adapters: adapters{
			{Name: "slack-acme", Type: "slack", Status: chat.AdapterStatus{State: chat.ConnReconnecting, Since: start, Reconnects: 2, LastError: "auth with " + secret + " refused"}},
			{Name: "discord-home", Type: "discord", Status: chat.AdapterStatus{State: chat.ConnConnected, Since: start}},
		},
		Chicks: chicks{
			list: []hatchery.Info{
				{Record: hatchery.Record{ID: "c-11111111", Tier: "local", State: hatchery.StateRunning, Host: "p40", CreatedAt: created, Goal: "the goal " + secret}, Channel: "slack-acme/C1", Usage: model.Usage{InputTokens: 1000, OutputTokens: 234}},
				{Record: hatchery.Record{ID: "c-22222222", Tier: "claude", State: hatchery.StateQueued, CreatedAt: created.Add(time.Second)}, Channel: "discord-home/7"},
			},
			hosts: []hatchery.HostStatus{{Name: "p40", Up: true, Running: 1, Capacity: 6, EngineVersion: "24.0.7", Since: start}, {Name: "spare", Capacity: 2, Tiers: []string{"local"}, Err: "tcp://" + secret + "@spare: refused"},
				{Name: "gpu", Up: true, Capacity: 2, Since: start, Incompatible: "the chick image on host gpu is 0.9.2; this Mother (0.2.0) needs 0.1.x or 0.2.x: upgrade the mother package here, or install mother-chick 0.2.x there"}},
		},
		Budgets:     budgets{{Scope: "tier claude today", Used: 120400, Limit: 500000}},
		Events:      eventList{{File: "standup.json", Type: events.Periodic, Channel: "slack-acme/C1", Schedule: "0 9 * * 1-5", Text: "the text of the event", Next: start.Add(24 * time.Hour)}, {File: "idle.json"}},
		ToolServers: toolServers{{Name: "notes", Transport: "stdio", State: hosttools.StateRunning, Since: start, Tools: []hosttools.Tool{{Qualified: "notes.search"}, {Qualified: "notes.add"}}}},
		Providers: providerHealth{
			{Name: "ollama", LastOK: start},
			{Name: "openai:vllm", Down: true, Since: start, Until: start.Add(4 * time.Minute), Failures: 2, LastError: "Post http://gpu:8000/v1 key " + secret + ": connection refused"},
		},
	})
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)
	clk.Advance(3 * time.Minute)
	return p, srv, clk
}

func get(t *testing.T, url string) (string, http.Header) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	return string(b), resp.Header
}

func TestPageShowsEverythingButSecrets(t *testing.T) {
	t.Parallel()
	p, srv, _ := fixture(t)
	p.ChickEvent(hatchery.Info{Record: hatchery.Record{ID: "c-11111111"}}, agent.Event{Type: agent.EventToolStart, ToolName: "bash", Label: "listing " + secret, Args: json.RawMessage(`{"command":"cat /etc/ARGS-NOT-SHOWN"}`), Time: time.Date(2026, 3, 1, 9, 2, 30, 0, time.UTC)})
	p.ChickEvent(hatchery.Info{Record: hatchery.Record{ID: "c-11111111"}}, agent.Event{Type: agent.EventMessageDelta, Text: "DELTA-NOT-SHOWN"})
	html, hdr := get(t, srv.URL+"/status")
	for _, want := range []string{
		"Mother <span id=\"version\">v1.2.3</span>", `data-adapter="slack-acme" class="state-reconnecting"`, "auth with [redacted] refused",
		`data-chick="c-11111111" class="state-running"`, "<td>slack-acme/C1</td><td>local</td><td>p40</td><td class=\"num\">1,234</td><td>2m00s</td>",
		"tool bash: listing [redacted]", "(30s ago)", `data-chick="c-22222222" class="state-queued"`, "2 alive, 1 queued",
		`data-host="p40" class="state-up"`, "1/6", `data-host="spare" class="state-down"`, "tcp://[redacted]@spare: refused",
		`<tr data-host="gpu" class="state-incompatible"><td>gpu</td><td class="state">incompatible</td>`,
		"<td>the chick image on host gpu is 0.9.2; this Mother (0.2.0) needs 0.1.x or 0.2.x: upgrade the mother package here, or install mother-chick 0.2.x there</td></tr>",
		"tier claude today", "120,400", "500,000", "379,600", `data-event="standup.json"`, "2026-03-02 09:00:00 UTC", "0 9 * * 1-5",
		`data-tools="notes"`, "notes.add, notes.search", `src="status.js"`,
		`data-provider="ollama" class="state-up"`, `data-provider="openai:vllm" class="state-down"`, "down, skipped for 1m00s more", "key [redacted]: connection refused",
		`<tr data-model-server="ollama" class="state-up"><td>ollama</td><td>mother, tier local</td><td class="state">up</td><td class="num">12 ms</td><td>1m00s ago</td>`,
		`<tr data-model-server="openai:vllm" class="state-down"><td>openai:vllm</td><td>tier big</td><td class="state">down</td>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("/status lacks %q:\n%s", want, html)
		}
	}
	for _, not := range []string{secret, "ARGS-NOT-SHOWN", "DELTA-NOT-SHOWN", "the goal", "the text of the event", "idle.json"} {
		if strings.Contains(html, not) {
			t.Errorf("/status shows %q", not)
		}
	}
	if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || hdr.Get("Cache-Control") != "no-store" {
		t.Errorf("headers: %v", hdr)
	}

	js, _ := get(t, srv.URL+"/status.json")
	var snap Snapshot
	if err := json.Unmarshal([]byte(js), &snap); err != nil {
		t.Fatal(err)
	}
	if len(snap.Chicks) != 2 || snap.Chicks[0].ID != "c-11111111" || snap.Chicks[0].LastEvent == nil || snap.Chicks[0].Tokens != 1234 || snap.Queued != 1 ||
		len(snap.Hosts) != 3 || snap.Hosts[1].State != "down" || snap.Hosts[2].State != "incompatible" || !strings.HasPrefix(snap.Hosts[2].Incompatible, "the chick image on host gpu is 0.9.2;") ||
		len(snap.NextEvents) != 1 || len(snap.ToolServers) != 1 || snap.Adapters[0].Name != "discord-home" ||
		len(snap.Providers) != 2 || snap.Providers[1].State != "down" || snap.Providers[1].Failures != 2 {
		t.Errorf("/status.json = %s", js)
	}
	if strings.Contains(js, secret) || strings.Contains(js, "ARGS-NOT-SHOWN") || strings.Contains(js, "the goal") {
		t.Errorf("/status.json shows a secret or a body:\n%s", js)
	}

	live, _ := get(t, srv.URL+"/status/live")
	if strings.Contains(live, "<html") || !strings.Contains(live, `data-chick="c-11111111"`) {
		t.Errorf("/status/live is not the live part alone:\n%s", live)
	}
	if script, _ := get(t, srv.URL+"/status.js"); !strings.Contains(script, "status/live") {
		t.Errorf("/status.js:\n%s", script)
	}
}

// TestLastEventGoesWithTheChick: a chick's last event is kept until it
// ends; a chick that never sent one shows none.
func TestLastEventGoesWithTheChick(t *testing.T) {
	t.Parallel()
	p, _, _ := fixture(t)
	in := hatchery.Info{Record: hatchery.Record{ID: "c-11111111"}}
	p.ChickEvent(in, agent.Event{Type: agent.EventRunEnd, StopReason: agent.StopDone})
	if c := p.Snapshot().Chicks[0]; c.LastEvent == nil || c.LastEvent.What != "run ended: done" {
		t.Fatalf("last event = %+v, want run ended: done", c.LastEvent)
	}
	if c := p.Snapshot().Chicks[1]; c.LastEvent != nil {
		t.Errorf("a chick without events shows %+v", c.LastEvent)
	}
	p.ChickEnded(in)
	if len(p.last) != 0 {
		t.Errorf("an ended chick's last event is kept: %v", p.last)
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ev   agent.Event
		want string
	}{
		{agent.Event{Type: agent.EventMessageStart}, "waiting for its model"},
		{agent.Event{Type: agent.EventThinking}, "thinking"},
		{agent.Event{Type: agent.EventMessageDelta, Text: "x"}, ""},
		{agent.Event{Type: agent.EventMessageEnd, Text: "the answer", Usage: model.Usage{InputTokens: 10, OutputTokens: 5}}, "message (15 tokens)"},
		{agent.Event{Type: agent.EventToolStart, ToolName: "bash", Label: "run\nthe   tests", Args: json.RawMessage(`{"command":"x"}`)}, "tool bash: run the tests"},
		{agent.Event{Type: agent.EventToolEnd, ToolName: "bash", IsError: true, Result: "boom"}, "tool bash failed"},
		{agent.Event{Type: agent.EventRetry, Attempt: 2}, "model call retry 2"},
		{agent.Event{Type: agent.EventToolStart, ToolName: "read", Label: strings.Repeat("é", 200)}, "tool read: " + strings.Repeat("é", maxWhat-len("tool read: ")-1) + "…"},
	}
	for _, tt := range tests {
		if got := describe(tt.ev); got != tt.want {
			t.Errorf("describe(%+v) = %q, want %q", tt.ev, got, tt.want)
		}
	}
}

// replaying is a Chicks source that also replays stored events, as the
// hatchery does.
type replaying struct {
	chicks
	stored []hatchery.StoredEvent
}

func (r replaying) FollowEvents(_ context.Context, _ string, _ bool, f func(hatchery.StoredEvent) error) error {
	for _, e := range r.stored {
		if err := f(e); err != nil {
			return err
		}
	}
	return nil
}

// TestResumedChickShowsItsStoredLastEvent: after a Mother restart, a
// chick she takes over shows the last event it had stored.
func TestResumedChickShowsItsStoredLastEvent(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 9, 1, 0, 0, time.UTC)
	p := New(Options{Clock: clock.NewFake(at)})
	in := hatchery.Info{Record: hatchery.Record{ID: "c-1", State: hatchery.StateRunning, CreatedAt: at}}
	p.Watch(Sources{Chicks: replaying{chicks: chicks{list: []hatchery.Info{in}}, stored: []hatchery.StoredEvent{
		{Seq: 1, Event: agent.Event{Type: agent.EventToolStart, ToolName: "bash", Label: "build", Time: at}},
		{Seq: 2, Event: agent.Event{Type: agent.EventMessageDelta, Text: "x", Time: at}},
	}}})
	p.ChickResumed(in)
	deadline := time.Now().Add(time.Minute)
	for {
		if c := p.Snapshot().Chicks[0]; c.LastEvent != nil {
			if c.LastEvent.What != "tool bash: build" || !c.LastEvent.At.Equal(at) {
				t.Errorf("last event = %+v, want the stored tool start", c.LastEvent)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the resumed chick never showed its stored last event")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 20_000_000: "20,000,000", -1234567: "-1,234,567"} {
		if got := Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

type diskState struct{ st disk.Status }

func (d *diskState) Status() disk.Status { return d.st }

// TestDiskShown: a full disk is shown with why and since when, the last
// probe's failure, and no secret; a disk that is fine says so.
func TestDiskShown(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	p := New(Options{Version: "v1", StartedAt: start, Secrets: []string{secret}, Clock: clk})
	d := &diskState{st: disk.Status{Condition: disk.Full, Reason: "write /data/" + secret + "/log.jsonl: no space left on device", Since: start, Probe: "probe: no space left on device"}}
	p.Watch(Sources{Disk: d})
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)
	clk.Advance(90 * time.Second)
	html, _ := get(t, srv.URL+"/status")
	for _, want := range []string{`<section id="disk" class="state-full">`, `<span class="state">full</span> for 1m30s: disk full: write /data/[redacted]/log.jsonl: no space left on device`, "last probe: probe: no space left on device"} {
		if !strings.Contains(html, want) {
			t.Errorf("/status lacks %q:\n%s", want, html)
		}
	}
	if strings.Contains(html, secret) {
		t.Errorf("/status shows the secret")
	}
	js, _ := get(t, srv.URL+"/status.json")
	var snap Snapshot
	if err := json.Unmarshal([]byte(js), &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Disk == nil || snap.Disk.State != "full" || !strings.HasPrefix(snap.Disk.Error, "disk full: ") || snap.Disk.Since == nil {
		t.Errorf("status.json disk: %+v", snap.Disk)
	}
	d.st = disk.Status{Condition: disk.OK}
	html, _ = get(t, srv.URL+"/status")
	if !strings.Contains(html, `<section id="disk" class="state-ok">`) || strings.Contains(html, "no space left") {
		t.Errorf("/status with the disk fine again:\n%s", html)
	}
}

// evil is what a hostile chick writes: a window title ended by BEL, a
// clear screen, a clipboard write ended by ST, a C1 CSI and DEL.
const evil = "\x1b]0;pwned\x07\x1b[2J\x1b]52;c;cm0gLXJmIH4K\x1b\\\u009b31m\x7f"

// TestControlsShown: what a chick wrote (its last event's label, its
// outcome) and what it may cause (an error) reaches the page, its live
// part and /status.json (read by curl on a terminal) with its control
// characters shown, none sent.
func TestControlsShown(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	p := New(Options{Version: "v1", StartedAt: start, Clock: clk})
	p.Watch(Sources{
		Adapters: adapters{{Name: "cli", Type: "cli", Status: chat.AdapterStatus{State: chat.ConnDown, LastError: "lost " + evil}}},
		Chicks: chicks{
			list: []hatchery.Info{
				{Record: hatchery.Record{ID: "c-1", Tier: "local", State: hatchery.StateRunning, CreatedAt: start}, Channel: "cli/local"},
				{Record: hatchery.Record{ID: "c-2", Tier: "local", State: hatchery.StateFailed, CreatedAt: start, EndedAt: start.Add(time.Minute), Outcome: "outcome " + evil}, Channel: "cli/local"},
			},
			hosts: []hatchery.HostStatus{{Name: "local", Capacity: 2, Err: "engine " + evil}},
		},
		ToolServers: toolServers{{Name: "notes", Transport: "stdio", State: hosttools.StateRetrying, Error: "tool " + evil}},
		Providers:   providerHealth{{Name: "ollama", Down: true, Failures: 1, LastError: "model " + evil}},
	})
	p.ChickEvent(hatchery.Info{Record: hatchery.Record{ID: "c-1"}}, agent.Event{Type: agent.EventToolStart, ToolName: "bash", Label: "label " + evil, Time: start})
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)
	for _, path := range []string{"/status", "/status/live", "/status.json"} {
		body, _ := get(t, srv.URL+path)
		n := 0
		for _, r := range body {
			if r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r <= 0x9f {
				n++
			}
		}
		if n > 0 {
			t.Errorf("GET %s: %d control characters (%d ESC, %d BEL):\n%q", path, n, strings.Count(body, "\x1b"), strings.Count(body, "\x07"), body)
		}
		for _, w := range []string{"label", "outcome", "lost", "engine", "tool", "model"} {
			if !strings.Contains(body, w+" ^[]0;pwned^G^[[2J") {
				t.Errorf("GET %s does not show %q:\n%s", path, w+" ^[]0;pwned^G^[[2J", body)
			}
		}
	}
}
