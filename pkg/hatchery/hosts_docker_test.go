package hatchery_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/docker"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func hostOf(t *testing.T, h *hatchery.Hatchery, id string) string {
	t.Helper()
	in, err := h.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	return in.Host
}

func hostState(h *hatchery.Hatchery, name string) hatchery.HostStatus {
	for _, s := range h.HostStates() {
		if s.Name == name {
			return s
		}
	}
	return hatchery.HostStatus{}
}

// containersOf lists the containers of chick id on one engine.
func containersOf(t *testing.T, api *client.Client, id string) []container.Summary {
	t.Helper()
	return hatcherytest.Containers(t, api, hatchery.LabelChickID, id)
}

// TestTwoEngines runs chicks on two real Docker engines: the local one on
// its unix socket (capacity 1, tiers local and big) and a second dockerd
// reached over TCP with TLS client certificates from gen-docker-tls.sh
// (capacity 2, tier local only). It checks placement by free capacity and
// tier, that a host that goes down is skipped (a start that fails there
// is queued again and runs on the other host), reported and logged, that
// the periodic probe notices it going and coming back, and that when it is
// back its strays are reaped and it takes chicks again.
func TestTwoEngines(t *testing.T) {
	t.Parallel()
	image := hatcherytest.BuildImage(t)
	api := hatcherytest.Docker(t)
	eng := hatcherytest.SecondEngine(t, image)
	api2 := eng.Client()

	cfg := testConfig(image)
	cfg.Chicks.Tiers["big"] = config.Tier{Provider: "ollama", Model: "big-m"}
	cfg.Chicks.MaxPerChannel = 10
	cfg.Chicks.Hosts = []config.DockerHost{
		{Name: "gpu1", Address: "unix:///var/run/docker.sock", Capacity: 1, Tiers: []string{"local", "big"}},
		{Name: "gpu2", Address: eng.Address, TLSCA: eng.CA, TLSCert: eng.Cert, TLSKey: eng.Key, Capacity: 2, Tiers: []string{"local"}},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	var logs syncBuffer
	// No Hosts in the options: the hatchery dials config's hosts itself,
	// the second one with its TLS certificates.
	h, err := hatchery.New(hatchery.Options{
		Config: cfg, Dir: t.TempDir(), Dial: docker.Open, Command: []string{"sleep", "60"}, StartupGrace: time.Minute,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), ProbeInterval: time.Hour,
	})
	must(t, err)
	rec := newRecorder()
	h.Subscribe(rec)
	hatcherytest.RemoveOnCleanup(t, api, h.Instance)
	hatcherytest.RemoveOnCleanup(t, api2, h.Instance)
	t.Cleanup(func() { h.Close() })
	must(t, h.Reconcile(t.Context()))
	for _, s := range h.Hosts(t.Context()) {
		if !s.Up || s.EngineVersion == "" {
			t.Errorf("host %s: %+v, want up with its engine version", s.Name, s)
		}
	}

	spawn := func(tier string) hatchery.Info {
		t.Helper()
		in, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "x", Tier: tier})
		must(t, err)
		return in
	}
	stop := func(ids ...string) {
		t.Helper()
		for _, id := range ids {
			_, _ = h.Stop(id, hatchery.ReasonKilled, "test", 0)
		}
		for _, id := range ids {
			rec.wait(t, id, time.Minute)
		}
	}

	// Placement: most free capacity among the hosts serving the tier.
	a := spawn("local") // gpu2 (2 free) over gpu1 (1 free)
	b := spawn("big")   // only gpu1 serves big
	c := spawn("local") // gpu2 (1 free); gpu1 is full
	d := spawn("local") // both full: queued
	e := spawn("big")   // queued
	for _, x := range []struct {
		in   hatchery.Info
		host string
	}{{a, "gpu2"}, {b, "gpu1"}, {c, "gpu2"}} {
		waitState(t, h, x.in.ID, hatchery.StateRunning, time.Minute)
		if got := hostOf(t, h, x.in.ID); got != x.host {
			t.Errorf("chick %s (tier %s) on %s, want %s", x.in.ID, x.in.Tier, got, x.host)
		}
	}
	if d.State != hatchery.StateQueued || e.State != hatchery.StateQueued {
		t.Fatalf("with every slot taken: %s, %s, want queued", d.State, e.State)
	}
	// The containers are where the records say.
	if len(containersOf(t, api2, a.ID)) != 1 || len(containersOf(t, api, b.ID)) != 1 || len(containersOf(t, api, a.ID)) != 0 {
		t.Errorf("containers not on the engines the records name")
	}
	// gpu1 frees up: the first queued chick that fits goes there (d, a
	// local one); e (big) waits for gpu1 again.
	stop(b.ID)
	waitState(t, h, d.ID, hatchery.StateRunning, time.Minute)
	if got := hostOf(t, h, d.ID); got != "gpu1" {
		t.Errorf("d on %s, want gpu1", got)
	}
	if h.State(e.ID) != hatchery.StateQueued {
		t.Errorf("e (big) %s, want still queued: gpu2 does not serve big", h.State(e.ID))
	}
	stop(d.ID)
	waitState(t, h, e.ID, hatchery.StateRunning, time.Minute)
	if got := hostOf(t, h, e.ID); got != "gpu1" {
		t.Errorf("e on %s, want gpu1", got)
	}
	stop(a.ID, c.ID, e.ID)

	// A second hatchery watches the same hosts with a short probe.
	watcher, err := hatchery.New(hatchery.Options{Config: cfg, Dir: t.TempDir(), Dial: docker.Open, Logger: testLogger(t), ProbeInterval: 100 * time.Millisecond})
	must(t, err)
	hatcherytest.RemoveOnCleanup(t, api, watcher.Instance)
	hatcherytest.RemoveOnCleanup(t, api2, watcher.Instance)
	t.Cleanup(func() { watcher.Close() })
	must(t, watcher.Reconcile(t.Context()))

	// A stray on gpu2 (a container of this Mother's that no chick owns),
	// left while the host goes down.
	stray, err := api2.ContainerCreate(t.Context(), &container.Config{Image: image, Cmd: []string{"sleep", "60"}, Labels: map[string]string{
		hatchery.LabelInstance: h.Instance(), hatchery.LabelChickID: "c-stray"}}, nil, nil, nil, "")
	must(t, err)

	// gpu2 goes away. The first hatchery has not noticed (its probe is an
	// hour off): the next local chick is placed on gpu2, whose engine
	// does not answer, is queued again and runs on gpu1.
	eng.Stop()
	f := spawn("local")
	waitState(t, h, f.ID, hatchery.StateRunning, time.Minute)
	if got := hostOf(t, h, f.ID); got != "gpu1" {
		t.Errorf("f on %s, want gpu1 (gpu2 is down)", got)
	}
	if len(containersOf(t, api, f.ID)) != 1 {
		t.Errorf("f has no container on the local engine")
	}
	s2 := hostState(h, "gpu2")
	if s2.Up || s2.Err == "" || s2.Since.IsZero() {
		t.Errorf("gpu2 after a failed start: %+v, want down with the error", s2)
	}
	for _, want := range []string{"Docker host is down", "host=gpu2", "queued again"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	}
	// While gpu2 is down, the next local chick waits although gpu2 has
	// free capacity.
	g := spawn("local")
	if g.State != hatchery.StateQueued {
		t.Errorf("g %s, want queued (gpu1 full, gpu2 down)", g.State)
	}
	// The watcher's probe noticed on its own.
	waitFor(t, "the probe to see gpu2 down", func() bool { return !hostState(watcher, "gpu2").Up })
	if !hostState(watcher, "gpu1").Up {
		t.Error("the probe sees gpu1 down")
	}

	// gpu2 is back: a status check (h.Hosts) or the probe finds it; its
	// stray is reaped and g goes there.
	eng.Start()
	waitFor(t, "the probe to see gpu2 up again", func() bool { return hostState(watcher, "gpu2").Up })
	if s := h.Hosts(t.Context()); len(s) != 2 || !s[1].Up {
		t.Fatalf("hosts after the restart: %+v", s)
	}
	waitState(t, h, g.ID, hatchery.StateRunning, time.Minute)
	if got := hostOf(t, h, g.ID); got != "gpu2" {
		t.Errorf("g on %s, want gpu2", got)
	}
	waitFor(t, "the stray to be reaped", func() bool {
		_, err := api2.ContainerInspect(context.Background(), stray.ID)
		return cerrdefs.IsNotFound(err)
	})
	if !strings.Contains(logs.String(), "Docker host answers again") {
		t.Errorf("the log does not say gpu2 is back:\n%s", logs.String())
	}
	stop(f.ID, g.ID)
	for _, c := range []*client.Client{api, api2} {
		if left := hatcherytest.Chicks(t, c, h.Instance()); len(left) != 0 {
			t.Errorf("%d containers left", len(left))
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHostStopsAnswering: the engine under two running chicks dies (its
// containers live on: live-restore). Mother loses track of them without
// ending them (a chick talks to Mother, not to Docker) and marks the host
// down. One chick is killed meanwhile: it cannot be reached through
// Docker, so it is ended at once and its container is reaped when the
// host is back. The other is watched again when the host answers, and
// ends normally.
func TestHostStopsAnswering(t *testing.T) {
	t.Parallel()
	image := hatcherytest.BuildImage(t)
	eng := hatcherytest.SecondEngine(t, image, hatcherytest.LiveRestore())
	api2 := eng.Client()
	cfg := testConfig(image)
	cfg.Chicks.MaxPerChannel = 10
	cfg.Chicks.Hosts = []config.DockerHost{{Name: "gpu2", Address: eng.Address, TLSCA: eng.CA, TLSCert: eng.Cert, TLSKey: eng.Key, Capacity: 2}}
	var logs syncBuffer
	h, err := hatchery.New(hatchery.Options{
		Config: cfg, Dir: t.TempDir(), Dial: docker.Open, Command: []string{"sleep", "120"}, StartupGrace: 5 * time.Minute,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), ProbeInterval: time.Hour,
	})
	must(t, err)
	rec := newRecorder()
	h.Subscribe(rec)
	hatcherytest.RemoveOnCleanup(t, api2, h.Instance)
	t.Cleanup(func() { h.Close() })
	must(t, h.Reconcile(t.Context()))
	var ids []string
	for range 2 {
		in, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "x"})
		must(t, err)
		waitState(t, h, in.ID, hatchery.StateRunning, time.Minute)
		ids = append(ids, in.ID)
	}
	a, b := ids[0], ids[1]
	ca, _ := h.Get(a)

	eng.Kill()
	waitFor(t, "gpu2 to be marked down by the lost container watch", func() bool { return !hostState(h, "gpu2").Up })
	for _, id := range ids {
		if st := h.State(id); st != hatchery.StateRunning {
			t.Errorf("chick %s %s after its host stopped answering, want still running", id, st)
		}
	}
	// Killing a chick whose host does not answer ends it now.
	if _, err := h.Stop(a, hatchery.ReasonKilled, "killed by the operator", 0); err != nil {
		t.Fatal(err)
	}
	end := rec.wait(t, a, 30*time.Second)
	if end.Reason != hatchery.ReasonKilled || end.Removed {
		t.Errorf("a ended %s (removed %v), want killed, its container not yet removed", end.Reason, end.Removed)
	}

	eng.Start()
	if s := h.Hosts(t.Context()); !s[0].Up {
		t.Fatalf("gpu2 after the restart: %+v", s[0])
	}
	waitFor(t, "a's container to be reaped", func() bool {
		_, err := api2.ContainerInspect(context.Background(), ca.ContainerID)
		return cerrdefs.IsNotFound(err)
	})
	waitFor(t, "b to be watched again", func() bool { return strings.Contains(logs.String(), "watching it again") })
	if st := h.State(b); st != hatchery.StateRunning {
		t.Fatalf("b %s, want running", st)
	}
	// b's exit is seen again: it ends like any chick.
	if _, err := h.Stop(b, hatchery.ReasonKilled, "done with it", 0); err != nil {
		t.Fatal(err)
	}
	if end := rec.wait(t, b, time.Minute); end.Reason != hatchery.ReasonKilled || !end.Removed {
		t.Errorf("b ended %s (removed %v), want killed and removed", end.Reason, end.Removed)
	}
	if left := hatcherytest.Chicks(t, api2, h.Instance()); len(left) != 0 {
		t.Errorf("%d containers left", len(left))
	}
}
