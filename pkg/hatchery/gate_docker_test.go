package hatchery_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/egress"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/docker"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/wire"
)

// gateEnv is a hatchery on the local engine running isolated chicks with
// the stand-in gate (hatcherytest.StandInGate): the gate's lifecycle and
// plumbing, without Mother on the other side of it.
type gateEnv struct {
	h    *hatchery.Hatchery
	rec  *recorder
	api  *client.Client
	dir  string
	keys egress.Secret
}

type gateOpts struct {
	dir, host, network string
	gateCmd            []string
	// clock and heartbeat, when set: the hatchery's clock and
	// chicks.heartbeatInterval.
	clock     clock.Clock
	heartbeat time.Duration
	// motherAddr is the host's MotherAddress (default 127.0.0.1:1).
	motherAddr string
}

func newGateEnv(t *testing.T, o gateOpts) *gateEnv {
	t.Helper()
	image, serve := hatcherytest.StandInGate(t)
	api := hatcherytest.Docker(t)
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	if o.host == "" {
		o.host = "local"
	}
	if o.gateCmd == nil {
		o.gateCmd = serve
	}
	if o.motherAddr == "" {
		o.motherAddr = "127.0.0.1:1"
	}
	cfg := testConfig(image)
	if o.network != "" {
		cfg.Chicks.Network = o.network
	} else {
		cfg.Chicks.Network = config.NetworkIsolated
	}
	if o.heartbeat > 0 {
		cfg.Chicks.HeartbeatInterval = config.Dur(o.heartbeat)
	}
	c, err := docker.Dial(config.DockerHost{Name: o.host}, nil)
	must(t, err)
	keys := egress.NewSecret([]byte("0123456789abcdef0123456789abcdef"))
	h, err := hatchery.New(hatchery.Options{
		Config: cfg, Dir: o.dir, Command: []string{"sleep", "60"}, GateCommand: o.gateCmd, GateKeys: keys,
		StartupGrace: time.Minute, Logger: testLogger(t), CAPEM: []byte("test CA"), Clock: o.clock,
		Hosts: []hatchery.Host{{Name: o.host, Runtime: docker.New(c), Capacity: 4, MotherAddress: o.motherAddr}},
	})
	must(t, err)
	rec := newRecorder()
	h.Subscribe(rec)
	hatcherytest.RemoveOnCleanup(t, api, h.Instance)
	t.Cleanup(func() { h.Close() })
	return &gateEnv{h: h, rec: rec, api: api, dir: o.dir, keys: keys}
}

// oneGate is the instance's only gate container, running.
func (e *gateEnv) oneGate(t *testing.T) container.InspectResponse {
	t.Helper()
	gates := hatcherytest.Gates(t, e.api, e.h.Instance())
	if len(gates) != 1 {
		t.Fatalf("%d gate containers, want 1: %+v", len(gates), gates)
	}
	insp, err := e.api.ContainerInspect(t.Context(), gates[0].ID)
	must(t, err)
	return insp
}

// waitGateRunning waits until the instance's only gate runs.
func (e *gateEnv) waitGateRunning(t *testing.T) container.InspectResponse {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		gates := hatcherytest.Gates(t, e.api, e.h.Instance())
		if len(gates) > 1 {
			t.Fatalf("%d gate containers, want 1", len(gates))
		}
		if len(gates) == 1 && gates[0].State == "running" {
			insp, err := e.api.ContainerInspect(t.Context(), gates[0].ID)
			must(t, err)
			return insp
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gate does not run: %+v", gates)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func gateVolumes(t *testing.T, api *client.Client, instance string) []*volume.Volume {
	t.Helper()
	list, err := api.VolumeList(t.Context(), volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", hatchery.LabelGate+"="+instance))})
	must(t, err)
	return list.Volumes
}

func TestIsolatedChicksShareOneHardenedGate(t *testing.T) {
	t.Parallel()
	e := newGateEnv(t, gateOpts{})
	// Two chicks at once (two channels), no gate yet: one gate is made.
	var ids []string
	for _, ch := range []string{"a", "b"} {
		in, err := e.h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: ch, Goal: "x", Files: hatchery.Files{ChannelDir: t.TempDir()}})
		must(t, err)
		ids = append(ids, in.ID)
	}
	for _, id := range ids {
		waitState(t, e.h, id, hatchery.StateRunning, time.Minute)
	}

	// One gate, made once, hardened like a chick.
	g := e.oneGate(t)
	inst := e.h.Instance()
	hc := g.HostConfig
	checks := []struct {
		name string
		ok   bool
		got  any
	}{
		{"name", g.Name == "/"+docker.GateName(inst), g.Name},
		{"CapDrop ALL", slices.Equal(hc.CapDrop, []string{"ALL"}), hc.CapDrop},
		{"no-new-privileges", slices.Equal(hc.SecurityOpt, []string{"no-new-privileges"}), hc.SecurityOpt},
		{"read-only root", hc.ReadonlyRootfs, hc.ReadonlyRootfs},
		{"user 65534", g.Config.User == "65534:65534", g.Config.User},
		{"host network", hc.NetworkMode == "host", hc.NetworkMode},
		{"restart unless-stopped", hc.RestartPolicy.Name == container.RestartPolicyUnlessStopped, hc.RestartPolicy},
		{"memory 64m", hc.Memory == 64<<20 && hc.MemorySwap == 64<<20, hc.Memory},
		{"pids 128", hc.PidsLimit != nil && *hc.PidsLimit == 128, hc.PidsLimit},
		{"not privileged", !hc.Privileged, hc.Privileged},
		{"no ports", len(hc.PortBindings) == 0, hc.PortBindings},
		{"labels", g.Config.Labels[hatchery.LabelGate] == inst && g.Config.Labels[hatchery.LabelInstance] == inst &&
			g.Config.Labels[hatchery.LabelGateHost] == "local" && g.Config.Labels[hatchery.LabelGateSpec] != "", g.Config.Labels},
		{"volumes mounted read-write: the gate's at the gate dir, the hosts file's at its dir", len(g.Mounts) == 2 &&
			slices.ContainsFunc(g.Mounts, func(m container.MountPoint) bool {
				return m.Name == docker.GateName(inst) && m.Destination == wire.GateDir && m.RW
			}) &&
			slices.ContainsFunc(g.Mounts, func(m container.MountPoint) bool {
				return m.Name == docker.HostsVolume(inst) && m.Destination == wire.GateHostsDir && m.RW
			}), g.Mounts},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("gate %s: got %v", c.name, c.got)
		}
	}
	env := map[string]string{}
	for _, kv := range g.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	for k, want := range map[string]string{
		hatchery.EnvAddr:  "127.0.0.1:1",
		hatchery.EnvCA:    "test CA",
		wire.EnvGateHost:  "local",
		wire.EnvGateToken: e.keys.GateToken(inst, "local"),
		wire.EnvGateDir:   wire.GateDir,
		// chicks.gate's defaults, and the Go runtime's limit 3/4 of the
		// container's 64 MiB.
		wire.EnvGateLimits:  "nest=4 proxy=32 pending=64 conns=512 preface=5s",
		"GOMEMLIMIT":        strconv.Itoa(48 << 20),
		hatchery.EnvToken:   "",
		hatchery.EnvChickID: "",
	} {
		if env[k] != want {
			t.Errorf("gate env %s = %q, want %q", k, env[k], want)
		}
	}
	vols := gateVolumes(t, e.api, inst)
	slices.SortFunc(vols, func(a, b *volume.Volume) int { return strings.Compare(a.Name, b.Name) })
	if len(vols) != 2 || vols[0].Name != docker.GateName(inst) || vols[0].Options["type"] != "tmpfs" || !strings.Contains(vols[0].Options["o"], "uid=65534") ||
		vols[1].Name != docker.HostsVolume(inst) || len(vols[1].Options) != 0 {
		t.Errorf("gate volumes %+v, want a tmpfs owned by the chick user and a plain one for the hosts file", vols)
	}

	// Each isolated chick: no network, the gate volume read-only, pointed
	// at the gate.
	for _, id := range ids {
		got, _ := e.h.Get(id)
		insp, err := e.api.ContainerInspect(t.Context(), got.ContainerID)
		must(t, err)
		if insp.HostConfig.NetworkMode != "none" {
			t.Errorf("chick network %q, want none", insp.HostConfig.NetworkMode)
		}
		var gateMount bool
		for _, m := range insp.Mounts {
			if m.Destination == wire.GateDir {
				gateMount = m.Name == docker.GateName(inst) && !m.RW
			}
		}
		if !gateMount {
			t.Errorf("chick mounts %+v: want the gate volume read-only at %s", insp.Mounts, wire.GateDir)
		}
		// Its networking disabled in the engine, the hosts volume's file
		// read-only at /etc/hosts.
		hosts := slices.ContainsFunc(insp.Mounts, func(m container.MountPoint) bool {
			return m.Type == "bind" && m.Destination == "/etc/hosts" && !m.RW && strings.HasSuffix(m.Source, "/"+docker.HostsVolume(inst)+"/_data/hosts")
		})
		if !insp.Config.NetworkDisabled || !hosts {
			t.Errorf("chick NetworkDisabled %v, mounts %+v: want networking disabled and the hosts volume's file read-only at /etc/hosts", insp.Config.NetworkDisabled, insp.Mounts)
		}
		env := map[string]string{}
		for _, kv := range insp.Config.Env {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		for k, want := range map[string]string{
			hatchery.EnvAddr:  "unix:///run/mother-gate/nest.sock",
			wire.EnvGateProxy: "/run/mother-gate/proxy.sock",
			wire.EnvGateKey:   e.keys.ChickKey(inst, "local", id),
			"HTTP_PROXY":      "http://127.0.0.1:3128", "HTTPS_PROXY": "http://127.0.0.1:3128",
			"http_proxy": "http://127.0.0.1:3128", "https_proxy": "http://127.0.0.1:3128",
			"NO_PROXY": "localhost,127.0.0.1", "no_proxy": "localhost,127.0.0.1",
			hatchery.EnvChickID: id, hatchery.EnvCA: "test CA",
			wire.EnvGateToken: "",
		} {
			if env[k] != want {
				t.Errorf("chick %s env %s = %q, want %q", id, k, env[k], want)
			}
		}
		// Through the read-only mount the chick reaches the gate's socket,
		// and nothing else: its only interface is loopback, and it cannot
		// write in the gate's directory.
		out := execIn(t, e.api, got.ContainerID, "sh", "-c", "standin-gate dial /run/mother-gate/nest.sock; touch /run/mother-gate/x 2>/dev/null || echo gate-dir-ro")
		if !strings.Contains(out, "gate local") || !strings.Contains(out, "gate-dir-ro") {
			t.Errorf("inside the chick: %q; want the gate's answer and a read-only gate directory", out)
		}
		var ifaces []string
		for _, line := range strings.Split(execIn(t, e.api, got.ContainerID, "cat", "/proc/net/dev"), "\n") {
			if name, _, ok := strings.Cut(line, ":"); ok {
				ifaces = append(ifaces, strings.TrimSpace(name))
			}
		}
		if !slices.Equal(ifaces, []string{"lo"}) {
			t.Errorf("isolated chick's interfaces %q, want only lo", ifaces)
		}
	}
	if n := len(hatcherytest.Gates(t, e.api, inst)); n != 1 {
		t.Errorf("%d gates after two chicks, want 1", n)
	}
	for _, id := range ids {
		_, _ = e.h.Stop(id, hatchery.ReasonKilled, "test over", 0)
		e.rec.wait(t, id, time.Minute)
	}
	if left := hatcherytest.Chicks(t, e.api, inst); len(left) != 0 {
		t.Errorf("%d chick containers left", len(left))
	}
	if n := len(hatcherytest.Gates(t, e.api, inst)); n != 1 {
		t.Errorf("%d gates after the chicks ended, want 1 (it stays for the next)", n)
	}
}

func TestKilledGateIsStartedAgain(t *testing.T) {
	t.Parallel()
	e := newGateEnv(t, gateOpts{})
	must(t, e.h.Reconcile(t.Context()))
	g := e.waitGateRunning(t)
	if err := e.api.ContainerKill(t.Context(), g.ID, "KILL"); err != nil {
		t.Fatal(err)
	}
	// Docker does not restart a container killed through its API, even
	// with unless-stopped: Mother does.
	deadline := time.Now().Add(time.Minute)
	for {
		insp, err := e.api.ContainerInspect(t.Context(), g.ID)
		must(t, err)
		if insp.State.Running && insp.State.StartedAt != g.State.StartedAt {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed gate was not started again: %+v", insp.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.oneGate(t)
	var restarts int
	for _, s := range e.h.HostStates() {
		restarts += s.GateRestarts
	}
	if restarts != 1 {
		t.Errorf("gate restarts %d, want 1", restarts)
	}
	// A chick started now goes through it.
	in, err := e.h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "x", Files: hatchery.Files{ChannelDir: t.TempDir()}})
	must(t, err)
	waitState(t, e.h, in.ID, hatchery.StateRunning, time.Minute)
	got, _ := e.h.Get(in.ID)
	if out := execIn(t, e.api, got.ContainerID, "standin-gate", "dial", "/run/mother-gate/nest.sock"); !strings.Contains(out, "gate local") {
		t.Errorf("chick after the gate's restart: %q", out)
	}
	_, _ = e.h.Stop(in.ID, hatchery.ReasonKilled, "test over", 0)
	e.rec.wait(t, in.ID, time.Minute)
}

// TestGateRestartIsNotAHang: while its gate is down a chick cannot reach
// Mother, and once the gate runs again it needs a moment to reconnect:
// the watchdog does not take that silence for a hang (the gate's restart
// gives its chicks the startup grace again); silence beyond that grace
// still is one.
func TestGateRestartIsNotAHang(t *testing.T) {
	t.Parallel()
	fc := clock.NewFake(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	e := newGateEnv(t, gateOpts{clock: fc, heartbeat: 200 * time.Millisecond}) // hung: 600ms silent
	must(t, e.h.Reconcile(t.Context()))                                        // starts the watchdog
	in, err := e.h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "x", Files: hatchery.Files{ChannelDir: t.TempDir()}})
	must(t, err)
	waitState(t, e.h, in.ID, hatchery.StateRunning, time.Minute)
	e.h.Touch(in.ID) // it joined and speaks: from now on 600ms of silence is a hang
	got, _ := e.h.Get(in.ID)
	chickInsp, err := e.api.ContainerInspect(t.Context(), got.ContainerID)
	must(t, err)

	g := e.oneGate(t)
	if err := e.api.ContainerKill(t.Context(), g.ID, "KILL"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for restarts := 0; restarts == 0; {
		for _, s := range e.h.HostStates() {
			restarts += s.GateRestarts
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed gate was not started again")
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.waitGateRunning(t)
	fc.Advance(30 * time.Second) // silent 50 intervals, within the minute's grace
	if st := e.h.State(in.ID); st != hatchery.StateRunning {
		t.Fatalf("the chick was stopped (%s) while it reconnects through a restarted gate", st)
	}
	fc.Advance(31 * time.Second) // the grace is over: silence is a hang again
	if end := e.rec.wait(t, in.ID, time.Minute); end.Reason != hatchery.ReasonHung {
		t.Errorf("ended %s (%s), want hung once the reconnect grace ran out", end.Reason, end.Outcome)
	}
	// Reaped like any other: the container is gone, and so is every
	// volume it mounted but the gate's own two (a chick has none of its
	// own: its /workspace is a tmpfs).
	for deadline := time.Now().Add(time.Minute); len(hatcherytest.Containers(t, e.api, hatchery.LabelChickID, in.ID)) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the chick's container was not removed")
		}
	}
	for _, m := range chickInsp.Mounts {
		if m.Type != "volume" || m.Name == docker.GateName(e.h.Instance()) {
			continue
		}
		t.Errorf("the chick mounted a volume of its own: %+v", m)
		if _, err := e.api.VolumeInspect(t.Context(), m.Name); err == nil {
			t.Errorf("the chick's volume %s outlived it", m.Name)
		}
	}
	if _, ok := chickInsp.HostConfig.Tmpfs[hatchery.Workspace]; !ok {
		t.Errorf("the chick's /workspace is not a tmpfs: %v", chickInsp.HostConfig.Tmpfs)
	}
}

func TestGateOutlivesAMotherRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e1 := newGateEnv(t, gateOpts{dir: dir})
	must(t, e1.h.Reconcile(t.Context()))
	g1 := e1.waitGateRunning(t)
	in, err := e1.h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "x", Files: hatchery.Files{ChannelDir: t.TempDir()}})
	must(t, err)
	waitState(t, e1.h, in.ID, hatchery.StateRunning, time.Minute)
	must(t, e1.h.Close())

	// The next Mother (same data, same secret) keeps the gate as it is:
	// same container, not restarted, still one.
	e2 := newGateEnv(t, gateOpts{dir: dir})
	if e2.h.Instance() != e1.h.Instance() {
		t.Fatalf("instance %s after restart, want %s", e2.h.Instance(), e1.h.Instance())
	}
	must(t, e2.h.Reconcile(t.Context()))
	g2 := e2.oneGate(t)
	if g2.ID != g1.ID || g2.State.StartedAt != g1.State.StartedAt || !g2.State.Running {
		t.Errorf("gate after a Mother restart: %s started %s (running %v), want %s started %s", g2.ID, g2.State.StartedAt, g2.State.Running, g1.ID, g1.State.StartedAt)
	}
	// Chicks are not mistaken for gates or gates for strays: the chick
	// was resumed, the gate kept.
	if st := e2.h.State(in.ID); st != hatchery.StateRunning {
		t.Errorf("chick %s after restart, want running (resumed)", st)
	}
	must(t, e2.h.Close())

	// A Mother whose gate spec differs (here its command; an upgrade's
	// new image does the same) keeps the gate while the chick uses it:
	// replacing it would pull it from under the chick.
	_, serve := hatcherytest.StandInGate(t)
	e3 := newGateEnv(t, gateOpts{dir: dir, gateCmd: append(slices.Clone(serve), "v2")})
	must(t, e3.h.Reconcile(t.Context()))
	g3 := e3.oneGate(t)
	if g3.ID != g1.ID || g3.State.StartedAt != g1.State.StartedAt || !g3.State.Running {
		t.Errorf("gate after a spec change with a chick running: %s started %s (running %v), want the old one %s kept", g3.ID, g3.State.StartedAt, g3.State.Running, g1.ID)
	}
	if st := e3.h.State(in.ID); st != hatchery.StateRunning {
		t.Errorf("chick %s after an upgrade, want running", st)
	}
	// A second chick meanwhile is served by the kept gate.
	in2, err := e3.h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "y", Files: hatchery.Files{ChannelDir: t.TempDir()}})
	must(t, err)
	waitState(t, e3.h, in2.ID, hatchery.StateRunning, time.Minute)
	if g := e3.oneGate(t); g.ID != g1.ID {
		t.Errorf("gate %s after a spawn, want the kept %s", g.ID, g1.ID)
	}

	// One chick ends: the other still uses the gate, so it stays.
	_, _ = e3.h.Stop(in.ID, hatchery.ReasonKilled, "test over", 0)
	e3.rec.wait(t, in.ID, time.Minute)
	if g := e3.oneGate(t); g.ID != g1.ID {
		t.Errorf("gate %s with a chick still running, want the kept %s", g.ID, g1.ID)
	}
	// The last one ends: the gate is replaced by one of the new spec.
	_, _ = e3.h.Stop(in2.ID, hatchery.ReasonKilled, "test over", 0)
	e3.rec.wait(t, in2.ID, time.Minute)
	waitFor(t, "the gate replaced once idle", func() bool {
		gates := hatcherytest.Gates(t, e3.api, e3.h.Instance())
		return len(gates) == 1 && gates[0].ID != g1.ID && gates[0].State == "running"
	})
	if g := e3.oneGate(t); !slices.Contains(g.Config.Cmd, "v2") {
		t.Errorf("gate after the chicks ended runs %v, want the new command", g.Config.Cmd)
	}
	if v := gateVolumes(t, e3.api, e3.h.Instance()); len(v) != 2 {
		t.Errorf("%d gate volumes, want 2 (the gate's, the hosts file's)", len(v))
	}
}

// TestGateThatCannotServeIsReplacedAtOnce: a gate kept for running chicks
// must still reach their Mother; one whose Mother address changed is
// replaced at once, chicks or not (keeping it would help no one).
func TestGateThatCannotServeIsReplacedAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e1 := newGateEnv(t, gateOpts{dir: dir})
	must(t, e1.h.Reconcile(t.Context()))
	g1 := e1.waitGateRunning(t)
	in, err := e1.h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "x", Files: hatchery.Files{ChannelDir: t.TempDir()}})
	must(t, err)
	waitState(t, e1.h, in.ID, hatchery.StateRunning, time.Minute)
	must(t, e1.h.Close())

	e2 := newGateEnv(t, gateOpts{dir: dir, motherAddr: "127.0.0.1:2"})
	must(t, e2.h.Reconcile(t.Context()))
	g2 := e2.oneGate(t)
	if g2.ID == g1.ID || !g2.State.Running || !slices.Contains(g2.Config.Env, hatchery.EnvAddr+"=127.0.0.1:2") {
		t.Errorf("gate after Mother's address changed: %s running %v env %v; want a new one reaching 127.0.0.1:2", g2.ID, g2.State.Running, g2.Config.Env)
	}
	_, _ = e2.h.Stop(in.ID, hatchery.ReasonKilled, "test over", 0)
	e2.rec.wait(t, in.ID, time.Minute)
}

func TestGateRemovedWhenNoLongerNeeded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e1 := newGateEnv(t, gateOpts{dir: dir, host: "gpu1"})
	must(t, e1.h.Reconcile(t.Context()))
	e1.waitGateRunning(t)
	must(t, e1.h.Close())
	inst := e1.h.Instance()
	// A clean stop with no chick to come back to takes the gate and its
	// volume with it.
	if gates := hatcherytest.Gates(t, e1.api, inst); len(gates) != 0 {
		t.Errorf("%d gates left after a clean stop with no chick", len(gates))
	}
	if v := gateVolumes(t, e1.api, inst); len(v) != 0 {
		t.Errorf("%d gate volumes left after a clean stop with no chick", len(v))
	}

	// gpu1's gate as a Mother killed while gpu1 was configured left it.
	image, serve := hatcherytest.StandInGate(t)
	c, err := docker.Dial(config.DockerHost{Name: "gpu1"}, nil)
	must(t, err)
	if _, err := docker.New(c).EnsureGate(t.Context(), hatchery.GateSpec{Instance: inst, HostName: "gpu1", Image: image, Command: serve, MotherAddress: "127.0.0.1:1", CAPEM: "test CA", Token: "t", Resources: hatchery.GateResources, Hardening: testConfig(image).Chicks.Hardening}); err != nil {
		t.Fatal(err)
	}

	// gpu1 is no longer configured; gpu2 (the same engine) is: gpu1's gate
	// goes, gpu2 gets its own, and there is still one gate and its two volumes.
	e2 := newGateEnv(t, gateOpts{dir: dir, host: "gpu2"})
	must(t, e2.h.Reconcile(t.Context()))
	g := e2.oneGate(t)
	if g.Config.Labels[hatchery.LabelGateHost] != "gpu2" || !g.State.Running {
		t.Errorf("gate of %q (running %v), want gpu2's", g.Config.Labels[hatchery.LabelGateHost], g.State.Running)
	}
	if v := gateVolumes(t, e2.api, inst); len(v) != 2 {
		t.Errorf("%d gate volumes, want 2 (the gate's, the hosts file's)", len(v))
	}
	must(t, e2.h.Close())

	// Chicks on the host's network need no gate: it goes, with its volume.
	e3 := newGateEnv(t, gateOpts{dir: dir, host: "gpu2", network: config.NetworkHost})
	must(t, e3.h.Reconcile(t.Context()))
	if gates := hatcherytest.Gates(t, e3.api, inst); len(gates) != 0 {
		t.Errorf("%d gates left after the network mode changed to host", len(gates))
	}
	if v := gateVolumes(t, e3.api, inst); len(v) != 0 {
		t.Errorf("%d gate volumes left after the network mode changed to host", len(v))
	}
}

// TestTwoHostsOnOneEngineSayWhy: two configured hosts that are the same
// engine cannot each have a gate (one per engine and Mother); the second
// one's chick does not start, and says why.
func TestTwoHostsOnOneEngineSayWhy(t *testing.T) {
	t.Parallel()
	image, serve := hatcherytest.StandInGate(t)
	api := hatcherytest.Docker(t)
	cfg := testConfig(image)
	cfg.Chicks.Network = config.NetworkIsolated
	var hosts []hatchery.Host
	for _, name := range []string{"gpu1", "gpu2"} {
		c, err := docker.Dial(config.DockerHost{Name: name}, nil)
		must(t, err)
		hosts = append(hosts, hatchery.Host{Name: name, Runtime: docker.New(c), Capacity: 1, MotherAddress: "127.0.0.1:1"})
	}
	h, err := hatchery.New(hatchery.Options{Config: cfg, Dir: t.TempDir(), Command: []string{"sleep", "60"}, GateCommand: serve, Hosts: hosts, Logger: testLogger(t)})
	must(t, err)
	rec := newRecorder()
	h.Subscribe(rec)
	hatcherytest.RemoveOnCleanup(t, api, h.Instance)
	t.Cleanup(func() { h.Close() })
	a, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "a", Goal: "x"})
	must(t, err)
	waitState(t, h, a.ID, hatchery.StateRunning, time.Minute)
	b, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "b", Goal: "x"})
	must(t, err)
	end := rec.wait(t, b.ID, time.Minute)
	first, _ := h.Get(a.ID)
	if end.Reason != hatchery.ReasonNoStart || end.Host == first.Host || !strings.Contains(end.Outcome, `already runs the gate of host "`+first.Host+`"`) || !strings.Contains(end.Outcome, "same engine") {
		t.Errorf("second host's chick ended %s: %q; want no_start naming the other host's gate", end.Reason, end.Outcome)
	}
	if n := len(hatcherytest.Gates(t, api, h.Instance())); n != 1 {
		t.Errorf("%d gates, want the first host's only", n)
	}
	_, _ = h.Stop(a.ID, hatchery.ReasonKilled, "test over", 0)
	rec.wait(t, a.ID, time.Minute)
}
