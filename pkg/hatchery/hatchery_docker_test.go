package hatchery_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/docker/docker/api/types/container"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/docker"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/wire"
)

// TestHardenedContainer: a chick's container is confined. Its files are
// not the runtime's business: the chick fetches them from the nest
// (TestFilesList here, the nest's TestFetchFiles*, and the mother
// binary's security and skills tests, which look inside real chicks).
func TestHardenedContainer(t *testing.T) {
	t.Parallel()
	image := hatcherytest.BuildImage(t)
	cfg := testConfig(image)
	var defaults config.Config
	defaults.SetDefaults("")
	cfg.Chicks.Network = defaults.Chicks.Network // the default network mode
	e := newEnv(t, cfg, []string{"sleep", "60"}, "")
	in := e.spawn(t, hatchery.SpawnRequest{Files: hatchery.Files{ChannelDir: e.channelDir(t)}})
	waitState(t, e.h, in.ID, hatchery.StateRunning, 60*time.Second)
	got, _ := e.h.Get(in.ID)

	insp, err := e.api.ContainerInspect(t.Context(), got.ContainerID)
	if err != nil {
		t.Fatal(err)
	}
	hc := insp.HostConfig
	checks := []struct {
		name string
		ok   bool
		got  any
	}{
		{"CapDrop ALL", len(hc.CapDrop) == 1 && hc.CapDrop[0] == "ALL", hc.CapDrop},
		{"no-new-privileges", len(hc.SecurityOpt) == 1 && hc.SecurityOpt[0] == "no-new-privileges", hc.SecurityOpt},
		{"read-only root", hc.ReadonlyRootfs, hc.ReadonlyRootfs},
		{"user 65534", insp.Config.User == "65534:65534", insp.Config.User},
		{"memory 256m, plus the workspace's 64m", hc.Memory == (256+64)<<20 && hc.MemorySwap == hc.Memory, hc.Memory},
		{"cpus 0.5", hc.NanoCPUs == 5e8, hc.NanoCPUs},
		{"pids 64", hc.PidsLimit != nil && *hc.PidsLimit == 64, hc.PidsLimit},
		{"tmpfs /tmp", strings.Contains(hc.Tmpfs["/tmp"], "size=16777216"), hc.Tmpfs},
		{"tmpfs /workspace of 64m", strings.Contains(hc.Tmpfs["/workspace"], "size=67108864"), hc.Tmpfs},
		{"no volume of its own (no anonymous /workspace volume)", len(insp.Config.Volumes) == 0, insp.Config.Volumes},
		{"no network (isolated, the default)", string(hc.NetworkMode) == "none", hc.NetworkMode},
		{"networking disabled in the engine (runc's namespace, the gate's hosts file)", insp.Config.NetworkDisabled, insp.Config.NetworkDisabled},
		{"not privileged", !hc.Privileged, hc.Privileged},
		{"labels", insp.Config.Labels[hatchery.LabelChickID] == in.ID && insp.Config.Labels[hatchery.LabelChannel] == "cli/local" && insp.Config.Labels[hatchery.LabelInstance] == e.h.Instance(), insp.Config.Labels},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: got %v", c.name, c.got)
		}
	}
	for _, m := range insp.Mounts {
		if strings.Contains(m.Source, "docker.sock") || strings.Contains(m.Destination, "docker.sock") {
			t.Errorf("docker socket mounted: %+v", m)
		}
		// The one bind: the hosts file of the gate's hosts volume,
		// read-only (a chick with the engine's networking disabled).
		hostsFile := m.Destination == "/etc/hosts" && !m.RW && strings.HasSuffix(m.Source, "/"+docker.HostsVolume(e.h.Instance())+"/_data/hosts")
		if m.Type == "bind" && !hostsFile {
			t.Errorf("bind mount from the host: %+v", m)
		}
		// The other: the gate's sockets, shared by the host's chicks.
		if m.Type == "volume" && m.Name != docker.GateName(e.h.Instance()) {
			t.Errorf("a volume of the chick's own, on the engine's disk: %+v", m)
		}
	}
	for _, v := range insp.Config.Env {
		name, _, _ := strings.Cut(v, "=")
		switch name {
		case hatchery.EnvAddr, hatchery.EnvToken, hatchery.EnvChickID, "HOME", "TMPDIR", "PATH",
			wire.EnvGateProxy, wire.EnvGateKey, "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY", "no_proxy":
		default:
			t.Errorf("unexpected variable in the chick's environment: %s", name)
		}
	}

	// Writable workspace and /tmp, read-only root, as the chick user.
	out := execIn(t, e.api, got.ContainerID, "sh", "-c", "id -u; touch /workspace/w && echo ws-ok; touch /tmp/t && echo tmp-ok; touch /etc/x 2>/dev/null || echo root-ro; stat -c 'ws-owner=%u' /workspace; grep ' /workspace ' /proc/mounts; cp /bin/busybox /workspace/true && /workspace/true && echo ws-exec")
	for _, w := range []string{"65534", "ws-ok", "tmp-ok", "root-ro", "ws-owner=65534", "tmpfs /workspace tmpfs rw,nosuid,nodev", "ws-exec"} {
		if !strings.Contains(out, w) {
			t.Errorf("inside the chick: output %q lacks %q", out, w)
		}
	}

	if _, err := e.h.Stop(in.ID, hatchery.ReasonKilled, "test over", 0); err != nil {
		t.Fatal(err)
	}
	end := e.rec.wait(t, in.ID, 30*time.Second)
	if end.State != hatchery.StateKilled {
		t.Errorf("state %s, want killed", end.State)
	}
	if n := len(hatcherytest.Chicks(t, e.api, e.h.Instance())); n != 0 {
		t.Errorf("%d containers left after the chick ended", n)
	}
}

// TestWorkspaceIsBounded: a chick's process that writes far past
// chicks.resources.workspaceBytes gets ENOSPC at the limit, holds no more
// than the limit, and stays alive (the memory limit makes room for the
// tmpfs: the chick's own 48m would be exhausted by the 64m workspace);
// the engine's disk does not grow by the write.
func TestWorkspaceIsBounded(t *testing.T) {
	t.Parallel()
	image := hatcherytest.BuildImage(t)
	cfg := testConfig(image)
	cfg.Chicks.Resources.Memory = "48m"
	cfg.Chicks.Resources.WorkspaceBytes = "64m"
	const limit, attempt = 64 << 20, 512 << 20
	e := newEnv(t, cfg, []string{"sleep", "120"}, "")
	info, err := e.api.Info(t.Context())
	must(t, err)
	diskUsed := func() int64 {
		var st syscall.Statfs_t
		if err := syscall.Statfs(info.DockerRootDir, &st); err != nil {
			t.Fatalf("statfs %s: %v", info.DockerRootDir, err)
		}
		return int64(st.Blocks-st.Bfree) * st.Bsize
	}
	in := e.spawn(t, hatchery.SpawnRequest{Files: hatchery.Files{ChannelDir: e.channelDir(t)}})
	waitState(t, e.h, in.ID, hatchery.StateRunning, 60*time.Second)
	got, _ := e.h.Get(in.ID)
	before := diskUsed()
	out := execIn(t, e.api, got.ContainerID, "sh", "-c",
		"dd if=/dev/zero of=/workspace/fill bs=1M count=512 2>&1; echo dd-exit=$?; sync; stat -c 'size=%s' /workspace/fill; echo more > /workspace/more 2>&1 || echo second-write-refused; echo alive")
	after := diskUsed()
	t.Logf("inside the chick:\n%s\nengine's disk (%s) used: %d before, %d after", out, info.DockerRootDir, before, after)
	if !strings.Contains(out, "No space left on device") || strings.Contains(out, "dd-exit=0") {
		t.Errorf("a write of %d bytes into a %d-byte workspace did not fail with ENOSPC:\n%s", attempt, limit, out)
	}
	m := regexp.MustCompile(`size=(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no size of the written file:\n%s", out)
	}
	if n, _ := strconv.ParseInt(m[1], 10, 64); n > limit || n < limit/2 {
		t.Errorf("%d bytes written, want up to the limit %d (and most of it: the write did happen)", n, limit)
	}
	if !strings.Contains(out, "second-write-refused") || !strings.Contains(out, "alive") {
		t.Errorf("the full workspace took a second write, or the chick's shell died (OOM):\n%s", out)
	}
	// Other tests share this disk: the bound is loose, but a workspace on
	// the engine's disk would have grown it by the whole attempt.
	if grew := after - before; grew > attempt/4 {
		t.Errorf("the engine's disk grew by %d bytes under a %d-byte workspace (a write of %d)", grew, limit, attempt)
	}
	insp, err := e.api.ContainerInspect(t.Context(), got.ContainerID)
	must(t, err)
	if !insp.State.Running || insp.State.OOMKilled {
		t.Errorf("the chick's container after filling its workspace: %+v", insp.State)
	}
	if _, err := e.h.Stop(in.ID, hatchery.ReasonKilled, "test over", 0); err != nil {
		t.Fatal(err)
	}
	e.rec.wait(t, in.ID, 30*time.Second)
}

func TestHungChickIsKilled(t *testing.T) {
	t.Parallel()
	image := hatcherytest.BuildImage(t)
	cfg := testConfig(image)
	cfg.Chicks.HeartbeatInterval = config.Dur(200 * time.Millisecond)
	e := newEnv(t, cfg, []string{"sleep", "60"}, "")
	must(t, e.h.Reconcile(t.Context())) // starts the watchdog
	in := e.spawn(t, hatchery.SpawnRequest{Files: hatchery.Files{ChannelDir: e.channelDir(t)}})
	end := e.rec.wait(t, in.ID, 60*time.Second)
	if end.Reason != hatchery.ReasonHung || !strings.Contains(end.Outcome, "no heartbeat") {
		t.Errorf("ended %s (%s), want hung with no heartbeat", end.Reason, end.Outcome)
	}
	if n := len(hatcherytest.Chicks(t, e.api, e.h.Instance())); n != 0 {
		t.Errorf("%d containers left after the hung chick was killed", n)
	}
}

func TestCrashedChick(t *testing.T) {
	t.Parallel()
	image := hatcherytest.BuildImage(t)
	cfg := testConfig(image)
	cfg.Chicks.KeepFor = config.Dur(3 * time.Second)
	e := newEnv(t, cfg, []string{"sh", "-c", "echo about to crash >&2; exit 3"}, "")
	in := e.spawn(t, hatchery.SpawnRequest{Files: hatchery.Files{ChannelDir: e.channelDir(t)}})
	end := e.rec.wait(t, in.ID, 60*time.Second)
	if end.Reason != hatchery.ReasonCrashed || !strings.Contains(end.Outcome, "code 3") {
		t.Errorf("ended %s (%s), want crashed with code 3", end.Reason, end.Outcome)
	}
	if end.State != hatchery.StateFailed {
		t.Errorf("state %s, want failed", end.State)
	}
	// Kept for inspection: the logs are still there.
	var logs strings.Builder
	if err := e.h.Logs(t.Context(), in.ID, false, &logs); err != nil {
		t.Fatalf("Logs: %v", err)
	}
	if !strings.Contains(logs.String(), "about to crash") {
		t.Errorf("logs = %q, want the chick's output", logs.String())
	}
	list := hatcherytest.Containers(t, e.api, hatchery.LabelChickID, in.ID)
	if len(list) != 1 || list[0].State == "running" {
		t.Errorf("kept container: %+v, want one, stopped", list)
	}
	// ...until chicks.keepFor has passed.
	deadline := time.Now().Add(30 * time.Second)
	for len(hatcherytest.Containers(t, e.api, hatchery.LabelChickID, in.ID)) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("kept container not removed after keepFor")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := e.h.Logs(t.Context(), in.ID, false, io.Discard); err == nil || !strings.Contains(err.Error(), "keepFor") {
		t.Errorf("logs of a removed chick: %v, want a hint about chicks.keepFor", err)
	}
}

func TestMissingImageIsExplained(t *testing.T) {
	t.Parallel()
	cfg := testConfig("mother-chick:no-such-image")
	e := newEnv(t, cfg, nil, "")
	in := e.spawn(t, hatchery.SpawnRequest{Files: hatchery.Files{ChannelDir: e.channelDir(t)}})
	end := e.rec.wait(t, in.ID, 30*time.Second)
	if end.Reason != hatchery.ReasonNoStart || !strings.Contains(end.Outcome, "make image") {
		t.Errorf("ended %s: %s; want no_start with a make image hint", end.Reason, end.Outcome)
	}
}

func TestPlacementByFreeCapacity(t *testing.T) {
	t.Parallel()
	image := hatcherytest.BuildImage(t)
	cfg := testConfig(image)
	// Both hosts are the local engine, which has room for one gate per
	// Mother: these chicks go on the default bridge, without a gate (placement is the point).
	cfg.Chicks.Network = config.NetworkBridge
	api := hatcherytest.Docker(t)
	var hosts []hatchery.Host
	for _, name := range []string{"gpu1", "gpu2"} {
		c, err := docker.Dial(config.DockerHost{Name: name}, nil)
		must(t, err)
		hosts = append(hosts, hatchery.Host{Name: name, Runtime: docker.New(c), Capacity: 1, MotherAddress: "127.0.0.1:1"})
	}
	h, err := hatchery.New(hatchery.Options{Config: cfg, Dir: t.TempDir(), Command: []string{"sleep", "60"}, Hosts: hosts, Logger: testLogger(t)})
	must(t, err)
	rec := newRecorder()
	h.Subscribe(rec)
	hatcherytest.RemoveOnCleanup(t, api, h.Instance)
	t.Cleanup(func() { h.Close() })
	var ids []string
	for _, ch := range []string{"a", "b", "c"} {
		in, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: ch, Goal: "x"})
		must(t, err)
		ids = append(ids, in.ID)
	}
	a, _ := h.Get(ids[0])
	b, _ := h.Get(ids[1])
	c, _ := h.Get(ids[2])
	if a.Host == b.Host || a.Host == "" || b.Host == "" {
		t.Errorf("hosts %q and %q: want one chick on each", a.Host, b.Host)
	}
	if c.State != hatchery.StateQueued {
		t.Errorf("third chick %s, want queued (both hosts full)", c.State)
	}
	for _, id := range ids[:2] {
		waitState(t, h, id, hatchery.StateRunning, time.Minute)
	}
	for _, id := range ids {
		_, _ = h.Stop(id, hatchery.ReasonKilled, "test over", 0)
		rec.wait(t, id, 60*time.Second)
	}
}

func TestQueueAndCaps(t *testing.T) {
	t.Parallel()
	image := hatcherytest.BuildImage(t)
	cfg := testConfig(image)
	cfg.Chicks.MaxConcurrent = 2
	cfg.Chicks.MaxPerChannel = 1
	cfg.Chicks.QueueSize = 1
	e := newEnv(t, cfg, []string{"sleep", "60"}, "")
	dir := e.channelDir(t)
	a := e.spawn(t, hatchery.SpawnRequest{Files: hatchery.Files{ChannelDir: dir}})
	b := e.spawn(t, hatchery.SpawnRequest{Files: hatchery.Files{ChannelDir: dir}})
	if a.State != hatchery.StateStarting || b.State != hatchery.StateQueued {
		t.Fatalf("states %s, %s: want starting, queued (one per channel)", a.State, b.State)
	}
	_, err := e.h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "x", Files: hatchery.Files{ChannelDir: dir}})
	if !errors.Is(err, hatchery.ErrQueueFull) {
		t.Fatalf("third spawn: %v, want ErrQueueFull", err)
	}
	c := e.spawn(t, hatchery.SpawnRequest{ChannelID: "other", Adapter: "cli", Files: hatchery.Files{ChannelDir: dir}})
	if c.State != hatchery.StateStarting {
		t.Fatalf("other channel: %s, want starting", c.State)
	}
	_, err = e.h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "third", Goal: "x", Tier: "nope"})
	if !errors.Is(err, hatchery.ErrUnknownTier) {
		t.Fatalf("unknown tier: %v", err)
	}
	// Ending a finishes its slot; b starts.
	if _, err := e.h.Stop(a.ID, hatchery.ReasonKilled, "done with it", 0); err != nil {
		t.Fatal(err)
	}
	e.rec.wait(t, a.ID, 30*time.Second)
	waitState(t, e.h, b.ID, hatchery.StateRunning, 60*time.Second)
	// Repeat-safe: stopping twice, and stopping an ended chick.
	for i := 0; i < 2; i++ {
		if _, err := e.h.Stop(b.ID, hatchery.ReasonKilled, "bye", 0); err != nil {
			t.Fatal(err)
		}
	}
	e.rec.wait(t, b.ID, 30*time.Second)
	if st, err := e.h.Stop(b.ID, hatchery.ReasonKilled, "again", 0); err != nil || st != hatchery.StateKilled {
		t.Errorf("stop of an ended chick: %s, %v", st, err)
	}
	_, _ = e.h.Stop(c.ID, hatchery.ReasonKilled, "bye", 0)
	e.rec.wait(t, c.ID, 30*time.Second)
}

func TestSpawnKillCyclesLeaveNothing(t *testing.T) {
	t.Parallel()
	image := hatcherytest.BuildImage(t)
	cfg := testConfig(image)
	cfg.Chicks.MaxConcurrent = 10
	cfg.Chicks.MaxPerChannel = 10
	cfg.Chicks.QueueSize = 100
	e := newEnv(t, cfg, []string{"sleep", "60"}, "")
	dir := e.channelDir(t)
	const workers, cycles = 5, 20
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < cycles; i++ {
				in, err := e.h.Spawn(context.Background(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "cycle", Files: hatchery.Files{ChannelDir: dir}})
				if err != nil {
					t.Errorf("spawn: %v", err)
					return
				}
				// Alternate: kill at once (often while starting) and after
				// it runs.
				if i%2 == 1 {
					deadline := time.Now().Add(30 * time.Second)
					for e.h.State(in.ID) == hatchery.StateStarting && time.Now().Before(deadline) {
						time.Sleep(10 * time.Millisecond)
					}
				}
				if _, err := e.h.Stop(in.ID, hatchery.ReasonKilled, "cycle", 0); err != nil {
					t.Errorf("stop: %v", err)
					return
				}
				ended, _ := e.h.Ended(in.ID)
				select {
				case <-ended:
				case <-time.After(60 * time.Second):
					t.Errorf("chick %s did not end", in.ID)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := len(e.h.List(true)); n != workers*cycles {
		t.Errorf("%d chicks remembered, want %d", n, workers*cycles)
	}
	if left := hatcherytest.Chicks(t, e.api, e.h.Instance()); len(left) != 0 {
		for _, c := range left {
			id := c.Labels[hatchery.LabelChickID]
			in, _ := e.h.Get(id)
			t.Logf("left: %s %s %s: record %s %s removed=%v", c.ID[:12], c.State, id, in.State, in.Outcome, in.Removed)
		}
		t.Errorf("%d containers left after %d spawn and kill cycles", len(left), workers*cycles)
	}
}

func TestReconcileAfterRestart(t *testing.T) {
	t.Parallel()
	image := hatcherytest.BuildImage(t)
	cfg := testConfig(image)
	dir := t.TempDir()
	e := newEnv(t, cfg, []string{"sleep", "60"}, dir)
	chDir := e.channelDir(t)
	running := e.spawn(t, hatchery.SpawnRequest{Files: hatchery.Files{ChannelDir: chDir}})
	doomed := e.spawn(t, hatchery.SpawnRequest{ChannelID: "other", Adapter: "cli", Files: hatchery.Files{ChannelDir: chDir}})
	waitState(t, e.h, running.ID, hatchery.StateRunning, 60*time.Second)
	waitState(t, e.h, doomed.ID, hatchery.StateRunning, 60*time.Second)
	dc, _ := e.h.Get(doomed.ID)
	// Mother goes away without a word (Close leaves chicks alone)...
	must(t, e.h.Close())
	// ...one chick's container dies meanwhile, and a stray appears.
	must(t, e.api.ContainerKill(t.Context(), dc.ContainerID, "KILL"))
	stray, err := e.api.ContainerCreate(t.Context(), &container.Config{Image: image, Cmd: []string{"sleep", "60"}, Entrypoint: []string{}, Labels: map[string]string{hatchery.LabelInstance: e.h.Instance(), hatchery.LabelChickID: "c-stray"}}, nil, nil, nil, "")
	must(t, err)

	e2 := newEnv(t, cfg, []string{"sleep", "60"}, dir)
	if e2.h.Instance() != e.h.Instance() {
		t.Fatalf("instance changed across restart: %s -> %s", e.h.Instance(), e2.h.Instance())
	}
	must(t, e2.h.Reconcile(t.Context()))
	end := e2.rec.wait(t, doomed.ID, 30*time.Second)
	if end.Reason != hatchery.ReasonLost {
		t.Errorf("dead chick ended %s (%s), want lost", end.Reason, end.Outcome)
	}
	if got := e2.h.State(running.ID); got != hatchery.StateRunning {
		t.Errorf("running chick after restart: %s, want running (resumed)", got)
	}
	e2.rec.mu.Lock()
	resumed := append([]string(nil), e2.rec.resumed...)
	e2.rec.mu.Unlock()
	if len(resumed) != 1 || resumed[0] != running.ID {
		t.Errorf("resumed %v, want [%s]", resumed, running.ID)
	}
	if _, err := e2.api.ContainerInspect(t.Context(), stray.ID); !cerrdefs.IsNotFound(err) {
		t.Errorf("stray container not reaped: %v", err)
	}
	_, _ = e2.h.Stop(running.ID, hatchery.ReasonKilled, "test over", 0)
	e2.rec.wait(t, running.ID, 30*time.Second)
	if left := hatcherytest.Chicks(t, e2.api, e2.h.Instance()); len(left) != 0 {
		t.Errorf("%d containers left", len(left))
	}
}

// TestReconcileStartsNeverStartedChick: Mother SIGKILLed between creating
// a chick's container and starting it leaves a "created" container and a
// record in starting. The container never ran, so after the restart the
// chick is started afresh instead of being reported lost.
func TestReconcileStartsNeverStartedChick(t *testing.T) {
	t.Parallel()
	image := hatcherytest.BuildImage(t)
	cfg := testConfig(image)
	dir := t.TempDir()
	e := newEnv(t, cfg, []string{"sleep", "60"}, dir)
	in := e.spawn(t, hatchery.SpawnRequest{Files: hatchery.Files{ChannelDir: e.channelDir(t)}})
	waitState(t, e.h, in.ID, hatchery.StateRunning, 60*time.Second)
	rec, _ := e.h.Get(in.ID)
	must(t, e.h.Close())

	// What the kill leaves: a container created and never started, under
	// the chick's name and labels, and a record still in starting.
	must(t, e.api.ContainerRemove(t.Context(), rec.ContainerID, container.RemoveOptions{Force: true}))
	created, err := e.api.ContainerCreate(t.Context(), &container.Config{
		Image: image, Cmd: []string{"sleep", "60"}, Entrypoint: []string{},
		Labels: map[string]string{hatchery.LabelInstance: e.h.Instance(), hatchery.LabelChickID: in.ID},
	}, nil, nil, nil, "mother-chick-"+in.ID+"-"+e.h.Instance())
	must(t, err)
	r := rec.Record
	r.State, r.ContainerID = hatchery.StateStarting, created.ID
	line, err := json.Marshal(r)
	must(t, err)
	f, err := os.OpenFile(filepath.Join(dir, "chicks.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.Write(append(line, '\n'))
	must(t, err)
	must(t, f.Close())

	e2 := newEnv(t, cfg, []string{"sleep", "60"}, dir)
	must(t, e2.h.Reconcile(t.Context()))
	waitState(t, e2.h, in.ID, hatchery.StateRunning, 60*time.Second)
	now, _ := e2.h.Get(in.ID)
	if now.ContainerID == "" || now.ContainerID == created.ID {
		t.Errorf("chick runs in container %q, want a new one (the created one was %s)", now.ContainerID, short(created.ID))
	}
	if _, err := e2.api.ContainerInspect(t.Context(), created.ID); !cerrdefs.IsNotFound(err) {
		t.Errorf("the never-started container was not removed: %v", err)
	}
	e2.rec.mu.Lock()
	_, ended := e2.rec.ended[in.ID]
	e2.rec.mu.Unlock()
	if ended {
		t.Errorf("chick reported ended after the restart, want it started again")
	}
	_, _ = e2.h.Stop(in.ID, hatchery.ReasonKilled, "test over", 0)
	e2.rec.wait(t, in.ID, 30*time.Second)
	if left := hatcherytest.Chicks(t, e2.api, e2.h.Instance()); len(left) != 0 {
		t.Errorf("%d containers left", len(left))
	}
}

// TestUnreportedEndIsAnnouncedAgain: a chick whose end was stored but
// never reported (Mother died between the two) is announced again by the
// next Reconcile, and only until Reported is called.
func TestUnreportedEndIsAnnouncedAgain(t *testing.T) {
	t.Parallel()
	image := hatcherytest.BuildImage(t)
	cfg := testConfig(image)
	dir := t.TempDir()
	e := newEnv(t, cfg, []string{"sleep", "60"}, dir)
	in := e.spawn(t, hatchery.SpawnRequest{Files: hatchery.Files{ChannelDir: e.channelDir(t)}})
	waitState(t, e.h, in.ID, hatchery.StateRunning, 60*time.Second)
	_, _ = e.h.Stop(in.ID, hatchery.ReasonKilled, "killed by the test", 0)
	end := e.rec.wait(t, in.ID, 30*time.Second)
	if !end.Unreported {
		t.Errorf("ended chick not marked unreported")
	}
	must(t, e.h.Close()) // the observer never called Reported: as if Mother died

	e2 := newEnv(t, cfg, []string{"sleep", "60"}, dir)
	must(t, e2.h.Reconcile(t.Context()))
	again := e2.rec.wait(t, in.ID, 10*time.Second)
	if again.State != hatchery.StateKilled || again.Outcome != "killed by the test" {
		t.Errorf("announced again as %s (%s), want killed (killed by the test)", again.State, again.Outcome)
	}
	e2.h.Reported(in.ID)
	must(t, e2.h.Close())

	e3 := newEnv(t, cfg, []string{"sleep", "60"}, dir)
	must(t, e3.h.Reconcile(t.Context()))
	time.Sleep(200 * time.Millisecond) // announcements are synchronous in Reconcile; allow stragglers
	e3.rec.mu.Lock()
	_, announced := e3.rec.ended[in.ID]
	e3.rec.mu.Unlock()
	if announced {
		t.Errorf("a reported end was announced again")
	}
	if got, _ := e3.h.Get(in.ID); got.Unreported {
		t.Errorf("record still unreported after Reported")
	}
}

func TestWallClockTimeout(t *testing.T) {
	t.Parallel()
	image := hatcherytest.BuildImage(t)
	cfg := testConfig(image)
	cfg.Chicks.Timeout = config.Dur(time.Second)
	e := newEnv(t, cfg, []string{"sleep", "60"}, "")
	in := e.spawn(t, hatchery.SpawnRequest{Files: hatchery.Files{ChannelDir: e.channelDir(t)}})
	end := e.rec.wait(t, in.ID, 60*time.Second)
	if end.Reason != hatchery.ReasonTimeout || end.Outcome != "timed out after 1s" || end.State != hatchery.StateFailed {
		t.Errorf("ended %s/%s (%s), want failed by timeout", end.State, end.Reason, end.Outcome)
	}
	if n := len(hatcherytest.Chicks(t, e.api, e.h.Instance())); n != 0 {
		t.Errorf("%d containers left after the timeout", n)
	}
}
