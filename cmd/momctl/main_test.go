package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/events"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hosttools"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/fallback"
	"github.com/mother-chat/mother/pkg/nest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden with the output seen")

// now is the test's wall clock; every time the fakes report is relative
// to it.
var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeChicks is the hatchery side AdminService reads, holding a few chicks
// in memory. The nest.Chicks methods only ChickService calls are left to
// the embedded nil interface: calling one panics.
type fakeChicks struct {
	nest.Chicks
	mu    sync.Mutex
	infos []hatchery.Info
	logs  map[string]string
	hosts []hatchery.HostStatus
	// events are the chicks' stored events (FollowEvents replays them).
	events map[string][]hatchery.StoredEvent
}

func (f *fakeChicks) find(id string) (*hatchery.Info, error) {
	for i := range f.infos {
		if f.infos[i].ID == id {
			return &f.infos[i], nil
		}
	}
	return nil, hatchery.ErrUnknownChick
}

func (f *fakeChicks) List(all bool) []hatchery.Info {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []hatchery.Info
	for _, in := range f.infos {
		if all || !in.State.Final() {
			out = append(out, in)
		}
	}
	return out
}

func (f *fakeChicks) Get(id string) (hatchery.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, err := f.find(id)
	if err != nil {
		return hatchery.Info{}, err
	}
	return *in, nil
}

// Stop ends a queued chick at once and a running one as killed, like the
// hatchery does once the chick has gone.
func (f *fakeChicks) Stop(id string, reason hatchery.Reason, outcome string, grace time.Duration) (hatchery.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, err := f.find(id)
	if err != nil {
		return "", err
	}
	switch {
	case in.State.Final():
		return in.State, nil
	case in.State == hatchery.StateQueued:
		in.State, in.Reason, in.Outcome = hatchery.StateKilled, reason, "never started: "+outcome
		return in.State, nil
	}
	in.State, in.Reason, in.Outcome = hatchery.StateKilled, reason, fmt.Sprintf("%s (grace %s)", outcome, grace)
	return hatchery.StateStopping, nil
}

func (f *fakeChicks) Ended(id string) (<-chan struct{}, error) {
	if _, err := f.Get(id); err != nil {
		return nil, err
	}
	ch := make(chan struct{})
	close(ch)
	return ch, nil
}

func (f *fakeChicks) Logs(_ context.Context, id string, _ bool, w io.Writer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.find(id); err != nil {
		return err
	}
	out, ok := f.logs[id]
	if !ok {
		return errors.New("its container has been removed")
	}
	// Two writes: the stream carries them as two messages.
	half := len(out) / 2
	if _, err := io.WriteString(w, out[:half]); err != nil {
		return err
	}
	_, err := io.WriteString(w, out[half:])
	return err
}

func (f *fakeChicks) Hosts(context.Context) []hatchery.HostStatus { return f.hosts }

// FollowEvents replays the stored events; with follow, a chick still
// alive then waits for ctx (this fake stores nothing new).
func (f *fakeChicks) FollowEvents(ctx context.Context, id string, follow bool, fn func(hatchery.StoredEvent) error) error {
	in, err := f.Get(id)
	if err != nil {
		return err
	}
	f.mu.Lock()
	evs := f.events[id]
	f.mu.Unlock()
	for _, e := range evs {
		if err := fn(e); err != nil {
			return err
		}
	}
	if follow && !in.State.Final() {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

// runEvents are the events of a chick's whole run.
func runEvents() []hatchery.StoredEvent {
	at := func(s int) time.Time { return now.Add(-time.Hour + time.Duration(s)*time.Second) }
	evs := []agent.Event{
		{Type: agent.EventMessageStart, Time: at(0)},
		{Type: agent.EventMessageDelta, Time: at(1), Text: "Let me "},
		{Type: agent.EventMessageEnd, Time: at(2), Text: "Let me look\nat the repository.", Usage: model.Usage{InputTokens: 812, OutputTokens: 40}},
		{Type: agent.EventToolStart, Time: at(3), ToolCallID: "t1", ToolName: "bash", Label: "run the tests", Args: []byte(`{"command":"go test ./..."}`)},
		{Type: agent.EventToolEnd, Time: at(30), ToolCallID: "t1", ToolName: "bash", Duration: 26800 * time.Millisecond, Result: "ok  \texample.com/x\t3.1s\n"},
		{Type: agent.EventToolStart, Time: at(31), ToolCallID: "t2", ToolName: "read", Label: "missing file", Args: []byte(`{"path":"nope.txt"}`)},
		{Type: agent.EventToolEnd, Time: at(31), ToolCallID: "t2", ToolName: "read", IsError: true, Result: "open nope.txt: no such file or directory"},
		{Type: agent.EventRetry, Time: at(32), Attempt: 2, Duration: 2 * time.Second, Err: "model overloaded"},
		{Type: agent.EventCompactionStart, Time: at(40), Text: "context at 90%"},
		{Type: agent.EventCompactionEnd, Time: at(41), Text: "summary of the work so far"},
		{Type: agent.EventRunEnd, Time: at(60), StopReason: agent.StopDone, Usage: model.Usage{InputTokens: 5210, OutputTokens: 930}},
	}
	out := make([]hatchery.StoredEvent, len(evs))
	for i, e := range evs {
		out[i] = hatchery.StoredEvent{Seq: uint64(i + 1), Event: e}
	}
	return out
}

// fakeModels is the broker's budgets; Generate is ChickService's.
type fakeModels struct {
	nest.Models
	budgets   []broker.Budget
	providers []fallback.Status
	usage     map[string]broker.Usage
}

func (f fakeModels) Budgets() []broker.Budget { return f.budgets }

// Usage answers with the report kept for by, asked for days days.
func (f fakeModels) Usage(days int, by string) (broker.Usage, error) {
	u, ok := f.usage[by]
	if !ok {
		u = broker.Usage{By: by, Total: broker.UsageRow{Key: "total"}}
	}
	u.From, u.To = now.AddDate(0, 0, 1-days).Format("2006-01-02"), now.Format("2006-01-02")
	return u, nil
}

func (f fakeModels) ProviderStatuses() []fallback.Status { return f.providers }

type fakeEvents []events.Info

func (f fakeEvents) List(string) []events.Info { return f }

type fakeAdapters []chat.AdapterReport

func (f fakeAdapters) AdapterReports() []chat.AdapterReport { return f }

type fakeRoles struct {
	roles    []chat.RoleAssignment
	refusals []chat.Refusal
}

func (f fakeRoles) RoleAssignments() []chat.RoleAssignment { return f.roles }
func (f fakeRoles) RecentRefusals() []chat.Refusal         { return f.refusals }

type fakeServers []hosttools.ServerStatus

func (f fakeServers) Status() []hosttools.ServerStatus { return f }

// world is what the fake Mother knows.
type world struct {
	chicks   *fakeChicks
	models   fakeModels
	events   fakeEvents
	adapters fakeAdapters
	servers  fakeServers
	roles    fakeRoles
}

func chick(id, channel, tier string, state hatchery.State, age time.Duration, in, out int64) hatchery.Info {
	i := hatchery.Info{Channel: channel, Usage: model.Usage{InputTokens: in, OutputTokens: out}}
	i.ID, i.Tier, i.State, i.CreatedAt, i.Goal = id, tier, state, now.Add(-age), "goal of "+id
	return i
}

// busy is a Mother with some of everything.
func busy() world {
	running := chick("c-run", "slack-acme/C1", "local", hatchery.StateRunning, 3*time.Minute+7*time.Second, 1200, 34)
	running.Host, running.ContainerID = "local", "0123456789ab"
	done := chick("c-done", "discord/42", "cloud", hatchery.StateDone, 50*time.Hour, 9000, 1000)
	done.Outcome = "finished: wrote report.md"
	return world{
		chicks: &fakeChicks{
			infos: []hatchery.Info{
				running,
				chick("c-queue", "slack-acme/C1", "cloud", hatchery.StateQueued, 12*time.Second, 0, 0),
				done,
			},
			logs:   map[string]string{"c-run": "chick starting\nstep 1: read the repository\n", "c-queue": ""},
			events: map[string][]hatchery.StoredEvent{"c-done": runEvents(), "c-run": runEvents()[:5]},
			hosts: []hatchery.HostStatus{
				{Name: "local", Up: true, Running: 1, Capacity: 4, EngineVersion: "28.1.1", Since: now.Add(-2 * time.Hour)},
				{Name: "gpu", Up: false, Capacity: 2, Tiers: []string{"cloud", "big"}, Since: now.Add(-90 * time.Second), Err: "Cannot connect to the Docker daemon"},
				{Name: "p40", Up: true, Capacity: 2, EngineVersion: "28.1.1", Since: now.Add(-time.Hour),
					Incompatible: "the chick image on host p40 is 0.9.2; this Mother (0.2.0) needs 0.1.x or 0.2.x: upgrade the mother package here, or install mother-chick 0.2.x there"},
			},
		},
		models: fakeModels{budgets: []broker.Budget{
			{Scope: "tier cloud today", Kind: "tier", Name: "cloud", Used: 12000, Limit: 100000, UsedMicroUSD: 420_000, LimitMicroUSD: 5_000_000},
			{Scope: "Mother's own calls today", Kind: "mother", Used: 30000, UsedMicroUSD: 95_000},
			{Scope: "channel slack-acme/C1 today", Kind: "channel", Name: "slack-acme/C1", Used: 1234},
		}, usage: map[string]broker.Usage{
			"day": {By: "day", Rows: []broker.UsageRow{
				{Key: "2026-02-28", Calls: 40, InputTokens: 800000, OutputTokens: 20000, CostMicroUSD: 1_234_567},
				{Key: "2026-03-01", Calls: 3, InputTokens: 9000, OutputTokens: 300, CostMicroUSD: 4_200},
			}, Total: broker.UsageRow{Key: "total", Calls: 43, InputTokens: 809000, OutputTokens: 20300, CostMicroUSD: 1_238_767}},
			"tier": {By: "tier", Rows: []broker.UsageRow{
				{Key: "cloud", Calls: 30, InputTokens: 600000, OutputTokens: 15000, CostMicroUSD: 1_100_000},
				{Key: broker.MotherKey, Calls: 10, InputTokens: 200000, OutputTokens: 5000, CostMicroUSD: 138_767},
				{Key: "local", Calls: 3, InputTokens: 9000, OutputTokens: 300},
			}, Total: broker.UsageRow{Key: "total", Calls: 43, InputTokens: 809000, OutputTokens: 20300, CostMicroUSD: 1_238_767}},
		}, providers: []fallback.Status{
			{Name: "ollama", LastOK: now.Add(-time.Minute)},
			{Name: "openai:vllm", Down: true, Since: now.Add(-20 * time.Second), Until: now.Add(40 * time.Second), Failures: 2,
				LastError: "openai:vllm/Qwen/Qwen3-14B: model provider unreachable: dial tcp 127.0.0.1:8000: connect: connection refused"},
		}},
		events: fakeEvents{
			{File: "standup.json", Type: events.Periodic, Channel: "slack-acme/C1", Schedule: "0 9 * * 1-5", Timezone: "Europe/Rome", Next: time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC), Text: "standup notes", State: "scheduled"},
			{File: "remind.json", Type: events.OneShot, Channel: "discord/42", Next: now.Add(30 * time.Minute), Text: "remind Mario", State: "scheduled"},
			{File: "broken.json", Type: events.Periodic, Schedule: "not cron", State: "invalid", Error: "bad schedule"},
		},
		adapters: fakeAdapters{
			{Name: "discord", Type: "discord", Status: chat.AdapterStatus{State: chat.ConnConnected, Since: now.Add(-2 * time.Hour), Reconnects: 1, LastError: "gateway closed"}},
			{Name: "slack-acme", Type: "slack", Status: chat.AdapterStatus{State: chat.ConnReconnecting, Since: now.Add(-20 * time.Second), Reconnects: 3, LastError: "websocket: close 1006"}},
		},
		roles: fakeRoles{
			roles: []chat.RoleAssignment{
				{Adapter: "discord", Role: "guest", Who: []string{"everyone"}, May: []string{"talk"}},
				{Adapter: "discord", Role: "admin", Who: []string{"100000000000000001"}, May: []string{"*"}},
				{Adapter: "discord", Role: "ops", Who: []string{"role:500000000000000001"}, May: []string{"talk", "chicks:hard", "access.approve"}},
				{Adapter: "discord", Channel: "42", Role: "muted", Who: []string{"everyone"}, May: []string{}},
			},
			refusals: []chat.Refusal{{Time: now.Add(-3 * time.Minute), Adapter: "discord", Channel: "42", User: "100000000000000004", Perm: "chicks:hard", Sentence: "Only members of ops can start chicks on the hard tier."}},
		},
		servers: fakeServers{
			{Name: "files", Transport: "stdio", State: hosttools.StateRunning, Since: now.Add(-2 * time.Hour), Tools: []hosttools.Tool{
				{Qualified: "files.read", Description: "Read a file.\nMore detail here.", Schema: []byte(`{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"]}`)},
				{Qualified: "files.list", Schema: []byte(`{"type":"object"}`)},
			}},
			{Name: "web", Transport: "http", State: hosttools.StateRetrying, Error: "connection refused", Restarts: 2, Since: now.Add(-5 * time.Minute), NextAttempt: now.Add(40 * time.Second)},
			{Name: "off", Transport: "stdio", State: hosttools.StateDisabled, Since: now.Add(-2 * time.Hour)},
		},
	}
}

// empty is a Mother with nothing to show.
func empty() world { return world{chicks: &fakeChicks{}} }

// serve runs a real AdminService for w on a unix socket in dir and returns
// the socket's path.
func serve(t *testing.T, dir string, w world) string {
	t.Helper()
	path := filepath.Join(dir, "mother.sock")
	lis, err := nest.ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	n := nest.New(nest.Options{Chicks: w.chicks, Models: w.models, Version: "1.4.0", StartedAt: now.Add(-26*time.Hour - 5*time.Minute),
		ChickImage: "mother-chick:1.4.0", ToolServers: w.servers})
	n.SetEvents(w.events)
	n.SetAdapters(w.adapters)
	n.SetRoles(w.roles)
	done := make(chan error, 1)
	go func() { done <- n.ServeAdmin(lis) }()
	t.Cleanup(func() {
		n.Stop()
		// ErrServerStopped: Stop came before the server started.
		if err := <-done; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("ServeAdmin: %v", err)
		}
	})
	return path
}

func TestCommands(t *testing.T) {
	tests := []struct {
		name string
		args []string
		// world is the Mother answering (nil: no socket at all).
		world func() world
		// socket, when set, prepares the socket path instead of a Mother.
		socket func(t *testing.T, path string)
		code   int
	}{
		{name: "chicks-ls", args: []string{"chicks", "ls"}, world: busy},
		{name: "chicks-ls-all", args: []string{"chicks", "list", "--all"}, world: busy},
		{name: "chicks-ls-json", args: []string{"chicks", "ls", "--all", "--json"}, world: busy},
		{name: "chicks-ls-empty", args: []string{"chicks", "ls"}, world: empty},
		{name: "chicks-ls-bad-flag", args: []string{"chicks", "ls", "--bogus"}, world: busy, code: 2},
		{name: "chicks-kill", args: []string{"chicks", "kill", "--grace", "5s", "c-run", "c-queue", "c-done", "c-nope"}, world: busy, code: 1},
		{name: "chicks-kill-no-id", args: []string{"chicks", "kill"}, world: busy, code: 2},
		{name: "chicks-logs", args: []string{"chicks", "logs", "c-run"}, world: busy},
		{name: "chicks-logs-unknown", args: []string{"chicks", "logs", "c-nope"}, world: busy, code: 1},
		{name: "chicks-logs-removed", args: []string{"chicks", "logs", "c-done"}, world: busy, code: 1},
		{name: "chicks-logs-two-ids", args: []string{"chicks", "logs", "c-run", "c-done"}, world: busy, code: 2},
		{name: "chicks-tail", args: []string{"chicks", "tail", "c-done"}, world: busy},
		{name: "chicks-tail-json", args: []string{"chicks", "tail", "--json", "c-done"}, world: busy},
		{name: "chicks-tail-no-follow-deltas", args: []string{"chicks", "tail", "--no-follow", "--deltas", "c-run"}, world: busy},
		{name: "chicks-tail-unknown", args: []string{"chicks", "tail", "c-nope"}, world: busy, code: 1},
		{name: "chicks-tail-no-id", args: []string{"chicks", "tail"}, world: busy, code: 2},
		{name: "chicks-watch-once", args: []string{"chicks", "watch", "--count", "1"}, world: busy},
		{name: "chicks-watch-json", args: []string{"chicks", "watch", "--json", "--all", "--count", "1"}, world: busy},
		{name: "chicks-watch-bad-interval", args: []string{"chicks", "watch", "--interval", "0s"}, world: busy, code: 2},
		{name: "chicks-ls-ids", args: []string{"chicks", "ls", "-q", "--all"}, world: busy},
		{name: "status", args: []string{"status"}, world: busy},
		{name: "status-json", args: []string{"status", "--json"}, world: busy},
		{name: "status-empty", args: []string{"status"}, world: empty},
		{name: "events-ls", args: []string{"events", "ls"}, world: busy},
		{name: "events-alone", args: []string{"events"}, world: busy},
		{name: "events-ls-json", args: []string{"events", "list", "--json"}, world: busy},
		{name: "events-ls-empty", args: []string{"events", "ls"}, world: empty},
		{name: "tools-ls", args: []string{"tools", "ls"}, world: busy},
		{name: "tools-ls-json", args: []string{"tools", "ls", "--json"}, world: busy},
		{name: "tools-ls-empty", args: []string{"tools", "ls"}, world: empty},
		{name: "roles", args: []string{"roles"}, world: busy},
		{name: "roles-json", args: []string{"roles", "--json"}, world: busy},
		{name: "roles-empty", args: []string{"roles"}, world: empty},
		{name: "usage", args: []string{"usage"}, world: busy},
		{name: "usage-by-tier", args: []string{"usage", "--days", "14", "--by", "tier"}, world: busy},
		{name: "usage-json", args: []string{"usage", "--by", "tier", "--json"}, world: busy},
		{name: "usage-empty", args: []string{"usage", "--by", "model"}, world: empty},
		{name: "usage-bad-by", args: []string{"usage", "--by", "colour"}, world: busy, code: 2},
		{name: "version", args: []string{"--version"}},
		{name: "help-flag", args: []string{"--help"}},
		{name: "help-word", args: []string{"help"}},
		{name: "help-chicks", args: []string{"chicks", "--help"}},
		{name: "help-chicks-ls", args: []string{"chicks", "ls", "-h"}},
		{name: "bad-root-flag", args: []string{"--bogus"}, code: 2},
		{name: "no-command", args: nil, code: 2},
		{name: "unknown-command", args: []string{"chicks", "hatch"}, world: busy, code: 2},
		{name: "no-socket", args: []string{"status"}, code: 1},
		{name: "not-a-socket", args: []string{"chicks", "ls"}, code: 1, socket: func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "stale-socket", args: []string{"chicks", "ls"}, code: 1, socket: func(t *testing.T, path string) {
			lis, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			lis.(*net.UnixListener).SetUnlinkOnClose(false)
			lis.Close()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "mother.sock")
			switch {
			case tc.world != nil:
				path = serve(t, dir, tc.world())
			case tc.socket != nil:
				tc.socket(t, path)
			}
			var stdout, stderr bytes.Buffer
			c := &cli{stdout: &stdout, stderr: &stderr, clock: clock.NewFake(now), loc: time.UTC, version: "1.4.1"}
			code := run(t.Context(), append([]string{"--socket", path}, tc.args...), c, func(string) string { return "" })
			if code != tc.code {
				t.Errorf("momctl %s: exit %d, want %d; stderr:\n%s", strings.Join(tc.args, " "), code, tc.code, stderr.String())
			}
			got := fmt.Sprintf("-- stdout --\n%s-- stderr --\n%s", stdout.String(), strings.ReplaceAll(stderr.String(), path, "SOCKET"))
			golden(t, filepath.Join("testdata", tc.name+".golden"), got)
		})
	}
}

// TestSocketFromEnvironment: without --socket, $MOTHER_SOCKET names the
// socket, and without either it is data/mother.sock.
func TestSocketFromEnvironment(t *testing.T) {
	path := serve(t, t.TempDir(), empty())
	var stdout, stderr bytes.Buffer
	c := &cli{stdout: &stdout, stderr: &stderr, clock: clock.NewFake(now), loc: time.UTC, version: "1.4.1"}
	env := func(k string) string {
		if k == "MOTHER_SOCKET" {
			return path
		}
		return ""
	}
	if code := run(t.Context(), []string{"chicks", "ls"}, c, env); code != 0 || stdout.String() != "no chicks\n" {
		t.Errorf("MOTHER_SOCKET: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	t.Chdir(t.TempDir())
	if code := run(t.Context(), []string{"chicks", "ls"}, c, func(string) string { return "" }); code != 1 || !strings.Contains(stderr.String(), "no admin socket at "+DefaultSocket+":") {
		t.Errorf("no socket set: exit %d, stderr %q, want the default %s named", code, stderr.String(), DefaultSocket)
	}
}

// golden compares got with the file at path, or rewrites it with -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}
