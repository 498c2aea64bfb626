package hatchery_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/docker"
	"github.com/mother-chat/mother/pkg/hatchery/docker/enginetest"
)

// fakeHatchery is a hatchery whose one host is a fake engine, driven by
// the real Docker driver and client: the supervisor's answers to engine
// errors, without an engine.
//
// Its chicks are on Docker's bridge, without a gate: these tests are about the chick's
// own container; fakeIsolatedHatchery's go through the gate first.
func fakeHatchery(t *testing.T, e *enginetest.Engine, dockerTimeout time.Duration) (*hatchery.Hatchery, *recorder) {
	t.Helper()
	return fakeHatcheryWith(t, e, dockerTimeout, config.NetworkBridge)
}

// fakeIsolatedHatchery is fakeHatchery with isolated chicks.
func fakeIsolatedHatchery(t *testing.T, e *enginetest.Engine, dockerTimeout time.Duration) (*hatchery.Hatchery, *recorder) {
	t.Helper()
	return fakeHatcheryWith(t, e, dockerTimeout, config.NetworkIsolated)
}

func fakeHatcheryWith(t *testing.T, e *enginetest.Engine, dockerTimeout time.Duration, network string) (*hatchery.Hatchery, *recorder) {
	t.Helper()
	c, err := client.NewClientWithOpts(client.WithHost(e.Host), client.WithAPIVersionNegotiation())
	must(t, err)
	cfg := testConfig("mother-chick:fake")
	cfg.Chicks.Network = network
	h, err := hatchery.New(hatchery.Options{
		Config: cfg, Dir: t.TempDir(), Logger: testLogger(t), DockerTimeout: dockerTimeout, ProbeInterval: time.Hour,
		Hosts: []hatchery.Host{{Name: "fake", Runtime: docker.New(c), Capacity: 2, MotherAddress: "127.0.0.1:1"}},
	})
	must(t, err)
	rec := newRecorder()
	h.Subscribe(rec)
	t.Cleanup(func() { h.Close() })
	return h, rec
}

func waitEnded(t *testing.T, rec *recorder) hatchery.Info {
	t.Helper()
	select {
	case in := <-rec.endedC:
		return in
	case <-time.After(time.Minute):
		t.Fatal("the chick did not end")
		return hatchery.Info{}
	}
}

func TestFakeEngineCreateFailsEndsTheChick(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		answer enginetest.Answer
		want   string
	}{
		{"engine error", enginetest.Error(500, "disk full"), "could not start: create chick container: "},
		{"no image", enginetest.Error(404, "No such image: mother-chick:fake"), "the image mother-chick:fake is not on Docker host fake"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := enginetest.New(t)
			e.On(http.MethodPost, "/containers/create", tc.answer)
			h, rec := fakeHatchery(t, e, 30*time.Second)
			in, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "x"})
			must(t, err)
			got := waitEnded(t, rec)
			if got.ID != in.ID || got.State != hatchery.StateFailed || got.Reason != hatchery.ReasonNoStart || !strings.Contains(got.Outcome, tc.want) {
				t.Errorf("ended %s %s %s %q; want %s failed no_start with %q", got.ID, got.State, got.Reason, got.Outcome, in.ID, tc.want)
			}
		})
	}
}

func TestFakeEngineStartConflictRemovesTheContainer(t *testing.T) {
	t.Parallel()
	e := enginetest.New(t)
	e.On(http.MethodPost, "/containers/create", enginetest.JSON(201, map[string]any{"Id": "k1"}))
	e.On(http.MethodPost, "/containers/{}/wait", enginetest.Pending())
	e.On(http.MethodPost, "/containers/{}/start", enginetest.Error(409, "cannot start"))
	// Removal answers "no such container": taken as gone, not retried.
	e.On(http.MethodDelete, "/containers/{}", enginetest.Error(404, "No such container: k1"))
	e.On(http.MethodGet, "/containers/{}/json", enginetest.Error(404, "No such container: k1"))
	h, rec := fakeHatchery(t, e, 30*time.Second)
	_, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "x"})
	must(t, err)
	got := waitEnded(t, rec)
	if got.Reason != hatchery.ReasonNoStart || !strings.Contains(got.Outcome, "start chick container: ") || !strings.Contains(got.Outcome, "cannot start") || !got.Removed {
		t.Errorf("ended %s %q removed=%v; want no_start, the engine's words, removed", got.Reason, got.Outcome, got.Removed)
	}
	removes := 0
	for _, c := range e.Calls() {
		if c == "DELETE /containers/k1" {
			removes++
		}
	}
	if removes != 1 {
		t.Errorf("container removed %d times, want once (404 means gone): %v", removes, e.Calls())
	}
}

func TestFakeEngineHungCreateRequeuesAndMarksTheHostDown(t *testing.T) {
	t.Parallel()
	e := enginetest.New(t)
	e.On(http.MethodPost, "/containers/create", enginetest.Hang())
	h, _ := fakeHatchery(t, e, 300*time.Millisecond)
	in, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "x"})
	must(t, err)
	deadline := time.Now().Add(time.Minute)
	for {
		st := h.HostStates()
		if len(st) == 1 && !st[0].Up {
			if s := h.State(in.ID); s != hatchery.StateQueued {
				t.Errorf("chick on a host that timed out is %s, want queued", s)
			}
			if h.QueueLen() != 1 {
				t.Errorf("queue holds %d, want the chick", h.QueueLen())
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("host still up after a hung create: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestFakeEngineGateErrorEndsTheChick(t *testing.T) {
	t.Parallel()
	e := enginetest.New(t)
	e.On(http.MethodGet, "/images/{}/json", enginetest.Error(500, "engine busy"))
	h, rec := fakeIsolatedHatchery(t, e, 30*time.Second)
	in, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "x"})
	must(t, err)
	got := waitEnded(t, rec)
	if got.ID != in.ID || got.Reason != hatchery.ReasonNoStart || !strings.Contains(got.Outcome, "gate") || !strings.Contains(got.Outcome, "engine busy") {
		t.Errorf("ended %s %s %q; want %s no_start, about the gate, with the engine's words", got.ID, got.Reason, got.Outcome, in.ID)
	}
	for _, c := range e.Calls() {
		if c == "POST /containers/create" {
			t.Errorf("a chick container was made without its gate: %v", e.Calls())
		}
	}
}

func TestFakeEngineHungGateRequeuesAndMarksTheHostDown(t *testing.T) {
	t.Parallel()
	e := enginetest.New(t)
	e.On(http.MethodGet, "/images/{}/json", enginetest.Hang())
	h, _ := fakeIsolatedHatchery(t, e, 300*time.Millisecond)
	in, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "x"})
	must(t, err)
	deadline := time.Now().Add(time.Minute)
	for {
		st := h.HostStates()
		if len(st) == 1 && !st[0].Up {
			if s := h.State(in.ID); s != hatchery.StateQueued {
				t.Errorf("chick whose gate's host timed out is %s, want queued", s)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("host still up after a hung gate call: %+v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
