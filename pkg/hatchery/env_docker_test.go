package hatchery_test

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/docker"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
)

// What the Docker tests of the hatchery share: an observer that records,
// the test configuration, a hatchery on the local engine, and helpers.

// recorder is an Observer that remembers what it heard.
type recorder struct {
	mu      sync.Mutex
	ended   map[string]hatchery.Info
	resumed []string
	endedC  chan hatchery.Info
}

func newRecorder() *recorder {
	return &recorder{ended: map[string]hatchery.Info{}, endedC: make(chan hatchery.Info, 1000)}
}

func (r *recorder) ChickEvent(hatchery.Info, agent.Event)  {}
func (r *recorder) ChickFile(hatchery.Info, hatchery.File) {}
func (r *recorder) ChickResumed(in hatchery.Info) {
	r.mu.Lock()
	r.resumed = append(r.resumed, in.ID)
	r.mu.Unlock()
}
func (r *recorder) ChickEnded(in hatchery.Info) {
	r.mu.Lock()
	r.ended[in.ID] = in
	r.mu.Unlock()
	r.endedC <- in
}

func (r *recorder) wait(t *testing.T, id string, d time.Duration) hatchery.Info {
	t.Helper()
	deadline := time.After(d)
	for {
		r.mu.Lock()
		in, ok := r.ended[id]
		r.mu.Unlock()
		if ok {
			return in
		}
		select {
		case <-r.endedC:
		case <-deadline:
			t.Fatalf("chick %s did not end within %s", id, d)
		}
	}
}

func testConfig(image string) *config.Config {
	cfg := &config.Config{}
	cfg.SetDefaults("")
	cfg.Chicks.Image = image
	// On Docker's bridge, without a gate: these chicks run "sleep" from
	// the test image, which has no gate to offer (the gate tests use the
	// stand-in gate, gate_docker_test.go).
	cfg.Chicks.Network = config.NetworkBridge
	// Test chicks run "sleep" and never beat: these tests run no watchdog
	// (an interval of 0 starts none), rather than one that a long
	// interval keeps away for as long as a loaded machine lets them take.
	// The heartbeat tests set their own (heartbeat_test.go: on a fake
	// clock).
	cfg.Chicks.HeartbeatInterval = config.Dur(0)
	cfg.Chicks.KillGrace = config.Dur(time.Second)
	cfg.Chicks.Timeout = config.Dur(2 * time.Minute)
	cfg.Chicks.Resources.Memory = "256m"
	cfg.Chicks.Resources.CPUs = 0.5
	cfg.Chicks.Resources.Pids = 64
	cfg.Chicks.Resources.Tmpfs = "16m"
	cfg.Chicks.Resources.WorkspaceBytes = "64m"
	return cfg
}

type env struct {
	h    *hatchery.Hatchery
	rec  *recorder
	api  *client.Client
	dir  string
	data string
}

func newEnv(t *testing.T, cfg *config.Config, command []string, dir string) *env {
	t.Helper()
	api := hatcherytest.Docker(t)
	if dir == "" {
		dir = t.TempDir()
	}
	hostAPI, err := docker.Dial(config.DockerHost{Name: "local"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := hatchery.New(hatchery.Options{
		Config: cfg, Dir: dir, Command: command, StartupGrace: 500 * time.Millisecond, Logger: testLogger(t),
		Hosts: []hatchery.Host{{Name: "local", Runtime: docker.New(hostAPI), Capacity: cfg.Chicks.MaxConcurrent, MotherAddress: "127.0.0.1:1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	h.Subscribe(rec)
	hatcherytest.RemoveOnCleanup(t, api, h.Instance)
	t.Cleanup(func() { h.Close() })
	return &env{h: h, rec: rec, api: api, dir: dir}
}

func (e *env) channelDir(t *testing.T) string {
	t.Helper()
	if e.data == "" {
		e.data = t.TempDir()
	}
	d := filepath.Join(e.data, "channels", "cli", "local")
	for _, sub := range []string{"attachments", "scratch", "skills/greet"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func (e *env) spawn(t *testing.T, req hatchery.SpawnRequest) hatchery.Info {
	t.Helper()
	if req.Adapter == "" {
		req.Adapter, req.ChannelID = "cli", "local"
	}
	if req.Goal == "" {
		req.Goal = "test goal"
	}
	in, err := e.h.Spawn(t.Context(), req)
	if err != nil {
		t.Fatalf("Spawn: %v", err)
	}
	return in
}

func waitState(t *testing.T, h *hatchery.Hatchery, id string, want hatchery.State, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for h.State(id) != want {
		if time.Now().After(deadline) {
			t.Fatalf("chick %s state %s, want %s", id, h.State(id), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type tlogWriter struct{ t *testing.T }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func execIn(t *testing.T, api *client.Client, id string, cmd ...string) string {
	t.Helper()
	ex, err := api.ContainerExecCreate(t.Context(), id, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	att, err := api.ContainerExecAttach(t.Context(), ex.ID, container.ExecAttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer att.Close()
	b, _ := io.ReadAll(att.Reader)
	return string(b)
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
