package hatchery_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/docker/enginetest"
)

// TestFollowEvents: a follower gets the events stored before it came, in
// order, then each new one as it is stored; without follow it returns
// after the stored ones; it stops when its context ends.
func TestFollowEvents(t *testing.T) {
	t.Parallel()
	h, id := runningFakeChick(t)
	if err := h.FollowEvents(t.Context(), id, false, func(hatchery.StoredEvent) error { return errors.New("called") }); err != nil {
		t.Fatalf("FollowEvents before any event = %v, want nil (no events)", err)
	}
	record := func(seq uint64, ev agent.Event) {
		t.Helper()
		if _, err := h.RecordEvent(id, seq, ev); err != nil {
			t.Fatal(err)
		}
	}
	record(1, agent.Event{Type: agent.EventMessageStart})
	record(2, agent.Event{Type: agent.EventToolStart, ToolName: "bash", Label: "ls"})

	var stored []uint64
	must(t, h.FollowEvents(t.Context(), id, false, func(se hatchery.StoredEvent) error {
		stored = append(stored, se.Seq)
		return nil
	}))
	if len(stored) != 2 || stored[0] != 1 || stored[1] != 2 {
		t.Fatalf("FollowEvents(follow=false) passed %v, want [1 2]", stored)
	}

	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan hatchery.StoredEvent, 10)
	done := make(chan error, 1)
	go func() {
		done <- h.FollowEvents(ctx, id, true, func(se hatchery.StoredEvent) error { got <- se; return nil })
	}()
	next := func() hatchery.StoredEvent {
		t.Helper()
		select {
		case se := <-got:
			return se
		case <-time.After(time.Minute):
			t.Fatal("the follower got nothing")
			return hatchery.StoredEvent{}
		}
	}
	if a, b := next(), next(); a.Seq != 1 || b.Seq != 2 || b.Event.ToolName != "bash" {
		t.Fatalf("follower got %+v, %+v first, want the stored events 1 and 2", a, b)
	}
	record(3, agent.Event{Type: agent.EventToolEnd, ToolName: "bash"})
	if se := next(); se.Seq != 3 || se.Event.Type != agent.EventToolEnd {
		t.Fatalf("follower got %+v, want event 3 as it was stored", se)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("FollowEvents after cancel = %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("FollowEvents did not return when its context ended")
	}
	if err := h.FollowEvents(t.Context(), "c-nope", true, nil); !errors.Is(err, hatchery.ErrUnknownChick) {
		t.Errorf("unknown chick: %v", err)
	}
}

// runningFakeChick spawns a chick on a fake engine whose container runs
// until the test ends, and waits until it runs.
func runningFakeChick(t *testing.T) (*hatchery.Hatchery, string) {
	t.Helper()
	h, _ := fakeHatchery(t, runningEngine(t), 30*time.Second)
	in, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "x"})
	must(t, err)
	waitState(t, h, in.ID, hatchery.StateRunning, time.Minute)
	return h, in.ID
}

// runningEngine is a fake engine whose containers are created, start and
// run until the test ends.
func runningEngine(t *testing.T) *enginetest.Engine {
	t.Helper()
	e := enginetest.New(t)
	e.On(http.MethodPost, "/containers/create", enginetest.JSON(201, map[string]any{"Id": "k1"}))
	e.On(http.MethodPost, "/containers/{}/wait", enginetest.Pending())
	e.On(http.MethodPost, "/containers/{}/start", enginetest.Answer{Status: 204})
	return e
}
