package mother

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/mother-chat/mother/pkg/agent"
)

// TestHeldEventsWaitForTheFsync: events emitted while the trigger's fsync
// is in flight are shown once it is done, in order, with the ones after;
// none is shown before. If the fsync fails they are dropped and the run is
// cancelled.
func TestHeldEventsWaitForTheFsync(t *testing.T) {
	var mu sync.Mutex
	var shown []string
	deliver := func(ev agent.Event) {
		mu.Lock()
		shown = append(shown, ev.Text)
		mu.Unlock()
	}
	pending := newPendingSync()
	h := holdEvents(pending, deliver, func() { t.Error("cancelled though the fsync succeeded") })
	for i := range 50 {
		h.emit(agent.Event{Text: fmt.Sprint(i)})
	}
	mu.Lock()
	early := len(shown)
	mu.Unlock()
	if early != 0 {
		t.Fatalf("%d events shown before the fsync was done", early)
	}
	pending.settle(nil)
	for i := 50; i < 100; i++ {
		h.emit(agent.Event{Text: fmt.Sprint(i)})
	}
	if err := h.release(); err != nil {
		t.Fatal(err)
	}
	h.emit(agent.Event{Text: "100"})
	var want []string
	for i := range 101 {
		want = append(want, fmt.Sprint(i))
	}
	if !slices.Equal(shown, want) {
		t.Errorf("shown %v, want 0..100 in order", shown)
	}

	failed := newPendingSync()
	cancelled := make(chan struct{})
	shown = nil
	h = holdEvents(failed, deliver, func() { close(cancelled) })
	h.emit(agent.Event{Text: "held"})
	diskFull := errors.New("no space left on device")
	failed.settle(diskFull)
	<-cancelled
	h.emit(agent.Event{Text: "after"})
	if err := h.release(); !errors.Is(err, diskFull) {
		t.Errorf("release: %v, want the fsync's error", err)
	}
	if len(shown) != 0 {
		t.Errorf("shown %v after a failed fsync, want nothing", shown)
	}

	// Already on disk (a job from the in-flight marker): straight through.
	shown = nil
	h = holdEvents(nil, deliver, nil)
	h.emit(agent.Event{Text: "now"})
	if !slices.Equal(shown, []string{"now"}) {
		t.Errorf("shown %v, want [now] at once", shown)
	}
}
