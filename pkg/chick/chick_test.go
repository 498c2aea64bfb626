package chick_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/chick"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/docker"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/ollama"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/nest"
	"github.com/mother-chat/mother/pkg/tools"
	"github.com/mother-chat/mother/pkg/wire"
)

// mother is one incarnation of Mother's chick side: hatchery, broker and
// nest on a fixed address, over one data directory.
type mother struct {
	h   *hatchery.Hatchery
	b   *broker.Broker
	srv *nest.Server
	obs *events
	ca  []byte
}

type events struct {
	mu     sync.Mutex
	events []agent.Event
	ended  chan hatchery.Info
}

func (e *events) ChickEvent(_ hatchery.Info, ev agent.Event) {
	e.mu.Lock()
	e.events = append(e.events, ev)
	e.mu.Unlock()
}
func (e *events) ChickFile(hatchery.Info, hatchery.File) {}
func (e *events) ChickResumed(hatchery.Info)             {}
func (e *events) ChickEnded(in hatchery.Info)            { e.ended <- in }

func startMother(t *testing.T, cfg *config.Config, dir, addr string, fake *ollamatest.Server) *mother {
	t.Helper()
	api, err := docker.Dial(config.DockerHost{Name: "local"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := broker.New(broker.Options{Config: cfg, Dir: dir, Providers: func(string) (model.Provider, error) { return ollama.New(fake.URL, nil) }})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hatchery.New(hatchery.Options{Config: cfg, Dir: dir, Command: []string{"sleep", "120"}, Meter: b,
		Hosts: []hatchery.Host{{Name: "local", Runtime: docker.New(api), Capacity: 2, MotherAddress: addr}}})
	if err != nil {
		t.Fatal(err)
	}
	obs := &events{ended: make(chan hatchery.Info, 10)}
	h.Subscribe(obs)
	if err := h.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	tl, err := nest.LoadTLS(filepath.Join(dir, "tls"), nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := nest.New(nest.Options{Chicks: h, Models: b, KillGrace: time.Second, TLS: tl.Creds})
	var lis net.Listener
	for i := 0; ; i++ { // the old listener's port may take a moment to free
		lis, err = net.Listen("tcp", addr)
		if err == nil || i == 50 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeChicks(lis)
	return &mother{h: h, b: b, srv: srv, obs: obs, ca: tl.CAPEM}
}

func (m *mother) stop() {
	m.srv.Stop()
	m.h.Close()
	m.b.Close()
}

// TestChickRidesOutAMotherRestart runs the real chick runtime (with the
// real tools, in a temp workspace) against Mother's nest, restarts Mother
// in the middle of a model call, and checks that the chick reconnects,
// resends what was not acknowledged, finishes, and that Mother stored
// every event exactly once.
func TestChickRidesOutAMotherRestart(t *testing.T) {
	t.Parallel()
	dockerAPI := hatcherytest.Docker(t)
	image := hatcherytest.BuildImage(t)
	cfg := &config.Config{}
	cfg.SetDefaults("")
	cfg.Chicks.Image = image
	cfg.Chicks.Tiers["local"] = config.Tier{Provider: "ollama", Model: "chick-m"}
	cfg.Chicks.HeartbeatInterval = config.Dur(200 * time.Millisecond)
	cfg.Chicks.KillGrace = config.Dur(time.Second)
	cfg.Chicks.Resources.Memory = "128m"
	dir := t.TempDir()
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()

	var mu sync.Mutex
	calls := 0
	blocked := make(chan struct{})
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		switch n {
		case 1:
			return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "bash", Args: map[string]any{"label": "greet", "command": "echo hello from the workspace > note.txt && cat note.txt MEMORY.md && echo changed by the chick > MEMORY.md"}}}}
		case 2:
			close(blocked)
			return ollamatest.Turn{Text: "never seen", Delay: 10 * time.Minute} // until Mother goes away
		}
		return ollamatest.Turn{Text: "Done after the restart: " + lastTool(r)}
	})
	defer fake.Close()

	m1 := startMother(t, cfg, dir, addr, fake)
	hatcherytest.RemoveOnCleanup(t, dockerAPI, m1.h.Instance)
	chDir := filepath.Join(t.TempDir(), "chan")
	os.MkdirAll(chDir, 0o700)
	// Fetched at start, changed by the chick before the restart: the
	// restart must not bring Mother's copy back.
	if err := os.WriteFile(filepath.Join(chDir, "MEMORY.md"), []byte("from Mother\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := m1.h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "greet, then think", Files: hatchery.Files{ChannelDir: chDir}})
	if err != nil {
		t.Fatal(err)
	}
	for m1.h.State(in.ID) != hatchery.StateRunning {
		time.Sleep(20 * time.Millisecond)
	}
	got, _ := m1.h.Get(in.ID)
	insp, err := dockerAPI.ContainerInspect(t.Context(), got.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	var token string
	for _, e := range insp.Config.Env {
		if v, ok := strings.CutPrefix(e, hatchery.EnvToken+"="); ok {
			token = v
		}
	}

	// This test process plays the chick the container would run.
	ws := t.TempDir()
	done := make(chan error, 1)
	go func() {
		done <- chick.Run(context.Background(), chick.Options{
			Addr: addr, Token: token, ChickID: in.ID, Workspace: ws, CAPEM: m1.ca,
			MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, ReconnectFor: time.Minute,
			Tools: func(root string, attach func(string, string) error) ([]agent.Tool, error) {
				return tools.Chick(root, attach)
			},
		})
	}()
	select {
	case <-blocked:
	case err := <-done:
		t.Fatalf("chick ended early: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the chick never made its second model call")
	}
	m1.stop()
	m2 := startMother(t, cfg, dir, addr, fake)
	defer m2.stop()

	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("chick.Run: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the chick did not finish after the restart")
	}
	var end hatchery.Info
	select {
	case end = <-m2.obs.ended:
	case <-time.After(time.Minute):
		t.Fatal("Mother did not end the chick")
	}
	if end.Reason != hatchery.ReasonDone || end.Result == nil || !strings.Contains(end.Result.Text, "Done after the restart: hello from the workspace") {
		t.Errorf("end: %s, result %+v", end.Reason, end.Result)
	}
	if end.Result == nil || !strings.Contains(end.Result.Text, "from Mother") {
		t.Errorf("the chick did not read the MEMORY.md it fetched: %+v", end.Result)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "MEMORY.md")); string(b) != "changed by the chick\n" {
		t.Errorf("MEMORY.md in the workspace after the restart = %q, %v: want the chick's change kept", b, err)
	}
	// Every event once, gapless, across both Mothers.
	b, err := os.ReadFile(filepath.Join(dir, in.ID, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var v struct {
			Seq   uint64      `json:"seq"`
			Event agent.Event `json:"event"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, v.Seq)
		types = append(types, string(v.Event.Type))
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("stored sequence %v: want 1..%d once each", seqs, len(seqs))
		}
	}
	joined := strings.Join(types, ",")
	for _, want := range []string{"tool_start", "tool_end", "message_end", "run_end"} {
		if !strings.Contains(joined, want) {
			t.Errorf("stored events %s lack %s", joined, want)
		}
	}
	if types[len(types)-1] != "run_end" {
		t.Errorf("last stored event %s, want run_end", types[len(types)-1])
	}
	m2.obs.mu.Lock()
	n2 := len(m2.obs.events)
	m2.obs.mu.Unlock()
	if n2 == 0 {
		t.Error("the restarted Mother heard none of the chick's events")
	}
}

func lastTool(r ollamatest.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "tool" {
			return strings.TrimSpace(r.Messages[i].Content)
		}
	}
	return ""
}

// TestUndeliveredOutputIsNamed: an output file Mother refuses (over the
// size limit) does not vanish silently: the chick's result names it and
// says why, beside the files that did arrive (found by the soak).
func TestUndeliveredOutputIsNamed(t *testing.T) {
	t.Parallel()
	dockerAPI := hatcherytest.Docker(t)
	image := hatcherytest.BuildImage(t)
	cfg := &config.Config{}
	cfg.SetDefaults("")
	cfg.Chicks.Image = image
	cfg.Chicks.Tiers["local"] = config.Tier{Provider: "ollama", Model: "chick-m"}
	cfg.Chicks.KillGrace = config.Dur(time.Second) // the container only sleeps: end it soon after the result
	cfg.Chicks.Resources.Memory = "128m"
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	fake := ollamatest.New(ollamatest.Turn{Text: "Here are the files."})
	defer fake.Close()
	m := startMother(t, cfg, t.TempDir(), addr, fake)
	defer m.stop()
	hatcherytest.RemoveOnCleanup(t, dockerAPI, m.h.Instance)
	chDir := filepath.Join(t.TempDir(), "chan")
	os.MkdirAll(chDir, 0o700)
	in, err := m.h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "make files", Files: hatchery.Files{ChannelDir: chDir}})
	if err != nil {
		t.Fatal(err)
	}
	for m.h.State(in.ID) != hatchery.StateRunning {
		time.Sleep(20 * time.Millisecond)
	}
	got, _ := m.h.Get(in.ID)
	insp, err := dockerAPI.ContainerInspect(t.Context(), got.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	var token string
	for _, e := range insp.Config.Env {
		if v, ok := strings.CutPrefix(e, hatchery.EnvToken+"="); ok {
			token = v
		}
	}
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, wire.OutputsDir), 0o700)
	os.WriteFile(filepath.Join(ws, wire.OutputsDir, "small.txt"), []byte("small"), 0o600)
	big, err := os.Create(filepath.Join(ws, wire.OutputsDir, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	big.Truncate(hatchery.MaxFileBytes + 1) // sparse: cheap to make, real to send
	big.Close()
	if err := chick.Run(t.Context(), chick.Options{Addr: addr, Token: token, ChickID: in.ID, Workspace: ws, CAPEM: m.ca}); err != nil {
		t.Fatalf("chick.Run: %v", err)
	}
	var end hatchery.Info
	select {
	case end = <-m.obs.ended:
	case <-time.After(time.Minute):
		t.Fatal("Mother did not end the chick")
	}
	if end.Result == nil || !strings.Contains(end.Result.Text, "Here are the files.") ||
		!strings.Contains(end.Result.Text, "Not delivered: outputs/big.bin (") || !strings.Contains(end.Result.Text, "larger than") {
		t.Errorf("result %+v: want the answer and outputs/big.bin named as not delivered, with the reason", end.Result)
	}
	if len(end.Result.OutputFiles) != 1 || !strings.HasSuffix(end.Result.OutputFiles[0], "outputs/small.txt") {
		t.Errorf("output files %v, want the small one stored", end.Result.OutputFiles)
	}
}
