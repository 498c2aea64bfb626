package kubernetes_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/kubernetes"
)

// ends records the chicks that ended.
type ends struct {
	hatchery.NopObserver
	mu      sync.Mutex
	ended   map[string]hatchery.Info
	resumed map[string]bool
	ch      chan struct{}
}

func newEnds() *ends {
	return &ends{ended: map[string]hatchery.Info{}, resumed: map[string]bool{}, ch: make(chan struct{}, 1)}
}

func (e *ends) ChickEvent(hatchery.Info, agent.Event) {}
func (e *ends) ChickResumed(in hatchery.Info) {
	e.mu.Lock()
	e.resumed[in.ID] = true
	e.mu.Unlock()
}
func (e *ends) ChickEnded(in hatchery.Info) {
	e.mu.Lock()
	e.ended[in.ID] = in
	e.mu.Unlock()
	select {
	case e.ch <- struct{}{}:
	default:
	}
}

func (e *ends) wait(t *testing.T, id string, d time.Duration) hatchery.Info {
	t.Helper()
	deadline := time.After(d)
	for {
		e.mu.Lock()
		in, ok := e.ended[id]
		e.mu.Unlock()
		if ok {
			return in
		}
		select {
		case <-e.ch:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("chick %s did not end within %s", id, d)
		}
	}
}

// newHatchery is a hatchery whose one host is the fixture's namespace; its
// chicks run command instead of the chick (they never dial Mother).
func (f *fixture) newHatchery(t *testing.T, dir string, capacity int, command ...string) (*hatchery.Hatchery, *ends) {
	t.Helper()
	cfg := &config.Config{}
	cfg.SetDefaults("")
	cfg.Chicks.Image = f.image
	cfg.Chicks.Network = config.NetworkIsolated
	// The chicks run command and never beat: no watchdog (an interval of
	// 0 starts none), rather than a long interval that keeps it away.
	cfg.Chicks.HeartbeatInterval = config.Dur(0)
	cfg.Chicks.KillGrace = config.Dur(2 * time.Second)
	cfg.Chicks.Timeout = config.Dur(10 * time.Minute)
	cfg.Chicks.QueueSize = 100
	cfg.Chicks.MaxPerChannel = capacity
	cfg.Chicks.Resources = config.Resources{Memory: "64m", CPUs: 0.1, Pids: 64, Tmpfs: "8m"}
	rt, err := kubernetes.Open(f.host, kubernetes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hatchery.New(hatchery.Options{
		Config: cfg, Dir: dir, Command: command, ProbeInterval: time.Hour, StartupGrace: 10 * time.Minute,
		Hosts: []hatchery.Host{{Name: "cluster", Runtime: rt, Capacity: capacity, MotherAddress: f.k.GatewayIP + ":7777"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnds()
	h.Subscribe(e)
	if err := h.Reconcile(t.Context()); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	return h, e
}

// waitState waits until chick id is in state want.
func waitState(t *testing.T, h *hatchery.Hatchery, id string, want hatchery.State) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for h.State(id) != want {
		if time.Now().After(deadline) {
			t.Fatalf("chick %s is %s, want %s", id, h.State(id), want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitPodRunning waits until the chick's Pod runs (its container
// started).
func (f *fixture) waitPodRunning(t *testing.T, h *hatchery.Hatchery, id string) string {
	t.Helper()
	c := f.k.Client(t)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		in, err := h.Get(id)
		if err == nil && in.ContainerID != "" {
			p, err := c.CoreV1().Pods(f.ns).Get(t.Context(), in.ContainerID, metav1.GetOptions{})
			if err == nil && p.Status.Phase == "Running" {
				return in.ContainerID
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pod of chick %s never ran", id)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestHatcherySpawnKillCycles: 50 chicks spawned and killed through the
// hatchery, five at a time, leave no Pod and no Secret.
func TestHatcherySpawnKillCycles(t *testing.T) {
	t.Parallel()
	f := setup(t)
	h, e := f.newHatchery(t, t.TempDir(), 5, "sh", "-c", "sleep 600")
	defer h.Close()
	const rounds, per = 10, 5
	for round := range rounds {
		var ids []string
		for range per {
			in, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "sleep"})
			if err != nil {
				t.Fatalf("round %d: Spawn: %v", round, err)
			}
			ids = append(ids, in.ID)
		}
		for i, id := range ids {
			// Alternate: kill some while they start, some once running.
			if i%2 == 0 {
				waitState(t, h, id, hatchery.StateRunning)
			}
			if _, err := h.Stop(id, hatchery.ReasonKilled, "killed by the test", 0); err != nil {
				t.Fatalf("Stop(%s): %v", id, err)
			}
		}
		for _, id := range ids {
			if in := e.wait(t, id, 2*time.Minute); in.State != hatchery.StateKilled {
				t.Errorf("chick %s ended %s (%s), want killed", id, in.State, in.Outcome)
			}
		}
	}
	waitEmpty(t, f)
}

// waitEmpty waits until the namespace holds no Pod and no Secret (a Pod
// deleted with a grace goes when its kubelet confirms).
func waitEmpty(t *testing.T, f *fixture) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		left := f.leftovers(t)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("left in the namespace: %v", left)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestHatcheryRestartResumesPod: Mother goes away (the hatchery closes,
// leaving the chick), a new one on the same records and cluster resumes
// the running Pod, kills it on request, and nothing is left.
func TestHatcheryRestartResumesPod(t *testing.T) {
	t.Parallel()
	f := setup(t)
	dir := t.TempDir()
	h, _ := f.newHatchery(t, dir, 2, "sh", "-c", "sleep 600")
	in, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "sleep"})
	if err != nil {
		t.Fatal(err)
	}
	pod := f.waitPodRunning(t, h, in.ID)
	if err := h.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	h2, e := f.newHatchery(t, dir, 2, "sh", "-c", "sleep 600")
	defer h2.Close()
	e.mu.Lock()
	resumed := e.resumed[in.ID]
	e.mu.Unlock()
	if !resumed || h2.State(in.ID) != hatchery.StateRunning {
		t.Fatalf("after the restart chick %s is %s (resumed %v), want running, resumed", in.ID, h2.State(in.ID), resumed)
	}
	if got, _ := h2.Get(in.ID); got.ContainerID != pod {
		t.Errorf("resumed chick's pod = %s, want %s", got.ContainerID, pod)
	}
	if _, err := h2.Stop(in.ID, hatchery.ReasonKilled, "killed by the test", 0); err != nil {
		t.Fatal(err)
	}
	if got := e.wait(t, in.ID, 2*time.Minute); got.State != hatchery.StateKilled {
		t.Errorf("chick ended %s (%s), want killed", got.State, got.Outcome)
	}
	waitEmpty(t, f)
}

// TestHatcheryPodDeletedIsLost: a chick whose Pod someone deletes ends
// lost, saying its Pod was deleted; its Secret goes too.
func TestHatcheryPodDeletedIsLost(t *testing.T) {
	t.Parallel()
	f := setup(t)
	h, e := f.newHatchery(t, t.TempDir(), 2, "sh", "-c", "sleep 600")
	defer h.Close()
	in, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "sleep"})
	if err != nil {
		t.Fatal(err)
	}
	pod := f.waitPodRunning(t, h, in.ID)
	zero := int64(0)
	if err := f.k.Client(t).CoreV1().Pods(f.ns).Delete(context.Background(), pod, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	got := e.wait(t, in.ID, 2*time.Minute)
	if got.Reason != hatchery.ReasonLost || !strings.Contains(got.Outcome, "deleted") {
		t.Errorf("chick ended %s: %q, want lost, saying its pod was deleted", got.Reason, got.Outcome)
	}
	waitEmpty(t, f)
}
