package hatchery_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/docker"
)

// TestSpawnKeyHatchesOnce: a request key (SpawnRequest.Key) hatches one
// chick: asked again, in this process or in the next one on the same
// directory (a run a power cut sent back to before its spawn_chick call),
// Spawn returns that chick with ErrSpawnedBefore and creates no
// container; another key, or none, hatches another.
func TestSpawnKeyHatchesOnce(t *testing.T) {
	t.Parallel()
	e := runningEngine(t)
	c, err := client.NewClientWithOpts(client.WithHost(e.Host), client.WithAPIVersionNegotiation())
	must(t, err)
	dir := t.TempDir()
	open := func() *hatchery.Hatchery {
		h, err := hatchery.New(hatchery.Options{
			Config: testConfig("mother-chick:fake"), Dir: dir, Logger: testLogger(t), ProbeInterval: time.Hour,
			Hosts: []hatchery.Host{{Name: "fake", Runtime: docker.New(c), Capacity: 4, MotherAddress: "127.0.0.1:1"}},
		})
		must(t, err)
		return h
	}
	creates := func() int {
		n := 0
		for _, call := range e.Calls() {
			if strings.Contains(call, "/containers/create") {
				n++
			}
		}
		return n
	}
	req := func(key string) hatchery.SpawnRequest {
		return hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "the goal", Key: key}
	}

	h := open()
	first, err := h.Spawn(t.Context(), req("cli/local/M1/spawn-1"))
	must(t, err)
	waitState(t, h, first.ID, hatchery.StateRunning, time.Minute)
	again, err := h.Spawn(t.Context(), req("cli/local/M1/spawn-1"))
	if !errors.Is(err, hatchery.ErrSpawnedBefore) || again.ID != first.ID {
		t.Fatalf("Spawn with the same key = %s, %v; want %s and ErrSpawnedBefore", again.ID, err, first.ID)
	}
	if in, ok := h.Spawned("cli/local/M1/spawn-1"); !ok || in.ID != first.ID || in.Key != "cli/local/M1/spawn-1" {
		t.Fatalf("Spawned = %+v, %v; want %s", in, ok, first.ID)
	}
	if _, ok := h.Spawned("cli/local/M1/spawn-2"); ok {
		t.Fatal("Spawned found a key no chick has")
	}
	if n := creates(); n != 1 {
		t.Fatalf("%d containers created, want 1", n)
	}
	second, err := h.Spawn(t.Context(), req("cli/local/M1/spawn-2"))
	must(t, err)
	if second.ID == first.ID {
		t.Fatal("another key got the same chick")
	}
	for range 2 {
		if _, err := h.Spawn(t.Context(), req("")); err != nil {
			t.Fatalf("Spawn without a key: %v", err)
		}
	}
	if n := len(h.List(true)); n != 4 {
		t.Fatalf("%d chicks, want 4 (two keys, two without)", n)
	}
	h.Close()

	// The next process, on the records the first left.
	h = open()
	t.Cleanup(func() { h.Close() })
	again, err = h.Spawn(t.Context(), req("cli/local/M1/spawn-1"))
	if !errors.Is(err, hatchery.ErrSpawnedBefore) || again.ID != first.ID || again.Goal != "the goal" {
		t.Fatalf("after a restart, Spawn with the same key = %+v, %v; want %s and ErrSpawnedBefore", again, err, first.ID)
	}
	if n := len(h.List(true)); n != 4 {
		t.Fatalf("after a restart, %d chicks, want the 4 from before", n)
	}
}
