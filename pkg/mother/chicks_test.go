package mother

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/model"
)

// TestChickObserverRendersAndAccounts drives Mother's side of the
// hatchery's contract (with chicks.results "relay": the result posted as
// is; results_test.go has "answer"): events render under the chick's title, the end is
// posted once with its usage and logged as Mother's message, late events
// after the end are dropped (no panic, no new view), and Idle waits for a
// chick in flight.
func TestChickObserverRendersAndAccounts(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withChickResults(config.ResultsRelay))
	obs := h.m.ChickObserver()
	in := hatchery.Info{Record: hatchery.Record{ID: "c-1", Adapter: "rec", ChannelID: "C1", Tier: "local", Goal: "count"}, Channel: "rec/C1"}

	obs.ChickEvent(in, agent.Event{Type: agent.EventToolStart, ToolName: "bash", Label: "count"})
	idle := make(chan struct{})
	go func() { h.idle(); close(idle) }()
	select {
	case <-idle:
		t.Fatal("Idle returned while a chick was in flight")
	case <-time.After(100 * time.Millisecond):
	}

	end := in
	end.State, end.Reason = hatchery.StateDone, hatchery.ReasonDone
	end.Result = &hatchery.Result{Text: "Counted 3."}
	end.Usage = model.Usage{InputTokens: 10, OutputTokens: 5}
	end.StartedAt, end.EndedAt = time.Now().Add(-2*time.Second), time.Now()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); obs.ChickEnded(end) }()
	go func() { // a late event racing the end
		defer wg.Done()
		for i := 0; i < 50; i++ {
			obs.ChickEvent(in, agent.Event{Type: agent.EventToolStart, ToolName: "late"})
		}
	}()
	wg.Wait()
	select {
	case <-idle:
	case <-time.After(10 * time.Second):
		t.Fatal("Idle did not return after the chick ended")
	}
	obs.ChickEvent(in, agent.Event{Type: agent.EventToolStart, ToolName: "after"})
	h.idle()

	fins := h.ad.of("finish")
	if len(fins) != 1 || fins[0].Title != "chick c-1" || !strings.Contains(fins[0].Text, "Counted 3.") || !strings.Contains(fins[0].Text, "15 tokens: 10 in, 5 out") {
		t.Fatalf("finishes %+v, want one titled chick c-1 with the answer and usage", fins)
	}
	for _, r := range h.ad.of("tool") {
		if r.Title != "chick c-1" {
			t.Errorf("tool line titled %q", r.Title)
		}
		if r.Text == "after" {
			t.Error("an event after the end was rendered")
		}
	}
	logged := h.logged("C1")
	if last := logged[len(logged)-1]; last.Sender.ID != "UMOTHER" || !strings.Contains(last.Text, "[chick c-1, goal: count]") {
		t.Errorf("last logged message %+v, want the chick result as Mother's", last)
	}

	// Every other ending is said plainly.
	killed := in
	killed.ID = "c-2"
	killed.State, killed.Reason, killed.Outcome = hatchery.StateKilled, hatchery.ReasonKilled, "killed by the operator"
	obs.ChickEnded(killed)
	h.idle()
	fins = h.ad.of("finish")
	if got := fins[len(fins)-1].Text; !strings.Contains(got, "Chick c-2 was stopped: killed by the operator.") {
		t.Errorf("kill notice %q", got)
	}
}

// TestEndedChicksBounded: Mother remembers only the newest ended chicks
// (to drop their late events), so a daemon that runs for months does not
// grow with every chick. (Relayed: a thousand answer runs would be about
// the model, not the bound.)
func TestEndedChicksBounded(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withChickResults(config.ResultsRelay))
	obs := h.m.ChickObserver()
	for i := range maxEndedViews + 100 {
		in := hatchery.Info{Record: hatchery.Record{ID: fmt.Sprintf("c-%d", i), Adapter: "rec", ChannelID: "C1", Tier: "local", Goal: "g",
			State: hatchery.StateKilled, Reason: hatchery.ReasonKilled, Outcome: "killed"}, Channel: "rec/C1"}
		obs.ChickEnded(in)
	}
	// Each ending posts and logs its notice (an fsync each): more than
	// harness.idle's ten seconds under a loaded -race run.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if err := h.m.Idle(ctx); err != nil {
		t.Fatalf("Mother did not become idle: %v", err)
	}
	h.m.mu.Lock()
	n, views := len(h.m.chicksEnded), len(h.m.chickViews)
	newest := h.m.chicksEnded[fmt.Sprintf("c-%d", maxEndedViews+99)]
	h.m.mu.Unlock()
	if n != maxEndedViews || views != 0 || !newest {
		t.Errorf("remembered %d ended chicks (newest %v) and %d views, want %d and none", n, newest, views, maxEndedViews)
	}
}

// TestFloodingChickStoppedInItsChannel: a chick the hatchery stopped for
// flooding (chicks.events) ends in its channel saying so, and what its
// view holds of its events is bounded: a label of a megabyte is rendered
// clipped, and a thousand large events pass through the view's bounded
// queue (its bytes, not only its count).
func TestFloodingChickStoppedInItsChannel(t *testing.T) {
	t.Parallel()
	h := newHarness(t, withChickResults(config.ResultsRelay))
	obs := h.m.ChickObserver()
	in := hatchery.Info{Record: hatchery.Record{ID: "c-9", Adapter: "rec", ChannelID: "C1", Tier: "local", Goal: "flood"}, Channel: "rec/C1"}
	obs.ChickEvent(in, agent.Event{Type: agent.EventToolStart, ToolName: "bash", ToolCallID: "a", Label: strings.Repeat("é", 1<<19)})
	big := strings.Repeat("x", 256<<10)
	for i := range 1000 {
		obs.ChickEvent(in, agent.Event{Type: agent.EventToolEnd, ToolName: "bash", ToolCallID: fmt.Sprint(i), Result: big})
	}
	end := in
	end.State, end.Reason, end.Outcome = hatchery.StateKilled, hatchery.ReasonFlooding, "flooding: an event of 16 MiB (limit 1 MiB)"
	obs.ChickEnded(end)
	h.idle()
	clipped, n := viewEvent(agent.Event{Type: agent.EventToolStart, Label: strings.Repeat("é", 1<<19), Result: big})
	if len(clipped.Label) > maxViewLabelBytes+len("…") || !utf8.ValidString(clipped.Label) || n < int64(len(big)) {
		t.Errorf("a label of 1 MiB reaches the view as %d bytes (valid UTF-8: %v), counted %d bytes; want it clipped to %d, whole runes, the result counted",
			len(clipped.Label), utf8.ValidString(clipped.Label), n, maxViewLabelBytes)
	}
	fins := h.ad.of("finish")
	if len(fins) != 1 || !strings.Contains(fins[0].Text, "Chick c-9 was stopped for sending too much: an event of 16 MiB (limit 1 MiB).") {
		t.Fatalf("finishes %+v; want the chick's end saying it was stopped for flooding", fins)
	}
}
