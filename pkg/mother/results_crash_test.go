package mother

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// fakeHatchery keeps chick ends as the hatchery does across restarts: an
// end is stored unreported (chicks.jsonl) before it is told to Mother,
// and stays so until she says it was reported. At start the hatchery's
// Reconcile, which the daemon starts after Mother's Start, announces the
// ends still unreported: plan is what it decides to announce, deliver
// hands them to Mother. The test calls each when it chooses, so the
// order of a recovery, an answer and an announcement is its own, not the
// scheduler's.
type fakeHatchery struct {
	mu         sync.Mutex
	ends       map[string]hatchery.Info
	unreported map[string]bool
}

var _ Hatchery = (*fakeHatchery)(nil)

func newFakeHatchery() *fakeHatchery {
	return &fakeHatchery{ends: map[string]hatchery.Info{}, unreported: map[string]bool{}}
}

// end stores the chick's end, unreported, and tells Mother.
func (f *fakeHatchery) end(obs hatchery.Observer, in hatchery.Info) {
	f.mu.Lock()
	f.ends[in.ID], f.unreported[in.ID] = in, true
	f.mu.Unlock()
	obs.ChickEnded(in)
}

// plan is what a Reconcile starting now would announce: the ends still
// unreported, oldest id first.
func (f *fakeHatchery) plan() []hatchery.Info {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []hatchery.Info
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id, u := range f.unreported {
			if u && !yield(id) {
				return
			}
		}
	}) {
		out = append(out, f.ends[id])
	}
	return out
}

// deliver announces a plan's ends to Mother, as Reconcile's apply does.
func (f *fakeHatchery) deliver(obs hatchery.Observer, plan []hatchery.Info) {
	for _, in := range plan {
		obs.ChickEnded(in)
	}
}

func (f *fakeHatchery) isUnreported(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unreported[id]
}

func (f *fakeHatchery) Reported(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.ends[id]; ok {
		f.unreported[id] = false
	}
}

func (f *fakeHatchery) Spawn(context.Context, hatchery.SpawnRequest) (hatchery.Info, error) {
	return hatchery.Info{}, errors.New("this test spawns no chicks")
}

func (f *fakeHatchery) Spawned(string) (hatchery.Info, bool) { return hatchery.Info{}, false }

func (f *fakeHatchery) Stop(id string, _ hatchery.Reason, _ string, _ time.Duration) (hatchery.State, error) {
	return "", hatchery.ErrUnknownChick
}

func (f *fakeHatchery) List(bool) []hatchery.Info { return nil }

func (f *fakeHatchery) Get(id string) (hatchery.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if in, ok := f.ends[id]; ok {
		return in, nil
	}
	return hatchery.Info{}, hatchery.ErrUnknownChick
}

func (f *fakeHatchery) Config() config.Chicks { return config.Chicks{} }

// chickAnswers are the answers to chick id posted by the booted Mother
// (her finishes with its usage line).
func chickAnswers(h *harness, id string) []string {
	var out []string
	for _, r := range h.ad.of("finish") {
		if strings.Contains(r.Text, "(chick "+id+" · ") {
			out = append(out, r.Text)
		}
	}
	return out
}

// chickReports counts the reports of chick id in the channel's log.
func chickReports(h *harness, id string) int {
	n := 0
	for _, m := range h.logged("C1") {
		if m.Sender.ID == ChickSenderID && strings.Contains(m.Text, "[chick "+id+" ended]") {
			n++
		}
	}
	return n
}

// freezeAt makes the booted Mother die at point: the goroutine that
// reaches it stops there for good (nothing of that process runs on), and
// the returned channel is closed.
func freezeAt(t *testing.T, m *Mother, point string) <-chan struct{} {
	hit, frozen := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(frozen) })
	var once sync.Once
	m.crashHook = func(p string) bool {
		if p != point {
			return false
		}
		once.Do(func() { close(hit) })
		<-frozen
		return true
	}
	return hit
}

// TestChickResultAnsweredOnceAcrossCrashes: Mother dies at each point of a
// chick result's way to her answer, and the hatchery announces what it
// still holds as unreported at the next start and at the one after (its
// plan taken once Mother has started, as the daemon orders it, and handed
// over after her recovered run has answered: the ordering that answered
// twice when only the queued job stopped a second answer). The result is
// answered once, its report logged once, and the hatchery ends up holding
// it as reported.
func TestChickResultAnsweredOnceAcrossCrashes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, point, goal string
	}{
		{"before the report is logged", "chick reserved", "count"},
		{"after the report is logged", "chick logged", "count"},
		{"while her run answers", "", "please block"},
		{"after her answer is logged", "answer logged", "count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hatch, block := newFakeHatchery(), newBlockTool()
			h := newHarness(t, withTools(block), withScript(resultScript), withHatchery(hatch))
			var hit <-chan struct{}
			if tc.point != "" {
				hit = freezeAt(t, h.m, tc.point)
			}
			hatch.end(h.m.ChickObserver(), endedChick("c-1", tc.goal, hatchery.StateDone, hatchery.ReasonDone, "", "Counted 3."))
			if hit == nil {
				block.waitStarted(t) // the crash cuts this run off
			} else {
				select {
				case <-hit:
				case <-time.After(10 * time.Second):
					t.Fatalf("Mother never reached the crash point %q", tc.point)
				}
			}
			answers := chickAnswers(h, "c-1")

			h.boot() // Mother starts (and recovers), then the hatchery plans
			plan := hatch.plan()
			h.idle() // her recovered run has answered
			hatch.deliver(h.m.ChickObserver(), plan)
			h.idle()
			answers = append(answers, chickAnswers(h, "c-1")...)

			h.boot() // and once more
			hatch.deliver(h.m.ChickObserver(), hatch.plan())
			h.idle()
			answers = append(answers, chickAnswers(h, "c-1")...)

			if len(answers) != 1 {
				t.Errorf("chick c-1's result was answered %d times, want once: %q", len(answers), answers)
			}
			if n := chickReports(h, "c-1"); n != 1 {
				t.Errorf("chick c-1's report is logged %d times, want once", n)
			}
			if hatch.isUnreported("c-1") {
				t.Error("the hatchery still holds chick c-1's end as unreported: every start would announce it again")
			}
			if jobs := markerJobs(t, filepath.Join(h.data, "state/inflight/rec/C1.json")); jobs != 0 {
				t.Errorf("in-flight marker holds %d jobs after the answer", jobs)
			}
		})
	}
}

// TestChickResultAnsweredAfterCrash: a chick's result whose answer run was
// cut off by a crash, or whose report was not even logged yet, is
// answered after the restart (the in-flight marker carries it).
func TestChickResultAnsweredAfterCrash(t *testing.T) {
	t.Parallel()
	t.Run("run cut off", func(t *testing.T) {
		t.Parallel()
		block := newBlockTool()
		h := newHarness(t, withTools(block), withScript(resultScript))
		h.m.ChickObserver().ChickEnded(endedChick("c-1", "please block", hatchery.StateDone, hatchery.ReasonDone, "", "Counted 3."))
		block.waitStarted(t)
		h.boot() // the crash
		h.idle()
		posts := texts(h.ad.of("post"))
		if len(posts) != 1 || !strings.Contains(posts[0], "Resuming my answer to chick c-1's result, which was cut off.") {
			t.Fatalf("restart notices = %q", posts)
		}
		fins := h.ad.of("finish")
		if len(fins) != 1 || !strings.HasPrefix(fins[0].Text, "(Resumed after a restart.)\n\nanswer to: [restart]") ||
			!strings.HasSuffix(fins[0].Text, "(chick c-1 · done · tier local · 15 tokens: 10 in, 5 out)") || fins[0].Title != "chick c-1" {
			t.Fatalf("after the restart: %q", texts(fins))
		}
	})
	t.Run("report not logged", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, withScript(resultScript))
		h.m.crashHook = func(p string) bool { return p == "chick reserved" }
		h.m.ChickObserver().ChickEnded(endedChick("c-2", "count", hatchery.StateDone, hatchery.ReasonDone, "", "Counted 4."))
		waitFor(t, "the marker", func() bool {
			_, err := os.Stat(filepath.Join(h.data, "state/inflight/rec/C1.json"))
			return err == nil
		})
		h.idle() // the abandoned view has ended
		h.boot()
		h.idle()
		if posts := texts(h.ad.of("post")); len(posts) != 1 || !strings.Contains(posts[0], "Answering chick c-2's result, which was waiting.") {
			t.Fatalf("restart notices = %q", posts)
		}
		fins := h.ad.of("finish")
		want := "(Late answer: I restarted before I could answer this chick's result.)\n\nIn my words: the chick ended done.\n\n(chick c-2 · done · tier local · 15 tokens: 10 in, 5 out)"
		if len(fins) != 1 || fins[0].Text != want {
			t.Fatalf("after the restart: %q, want %q", texts(fins), want)
		}
		if n := chickReports(h, "c-2"); n != 1 {
			t.Errorf("report logged %d times, want once (by the restart)", n)
		}
	})
	t.Run("cut off twice", func(t *testing.T) {
		// Not tried a third time, and not lost: the notice has the
		// result as it came.
		t.Parallel()
		block := newBlockTool()
		h := newHarness(t, withTools(block), withScript(func(r ollamatest.Request) ollamatest.Turn {
			if strings.HasPrefix(r.LastUser(), "[restart]") {
				return ollamatest.Turn{Calls: []ollamatest.Call{{Name: "block"}}}
			}
			return resultScript(r)
		}))
		h.m.ChickObserver().ChickEnded(endedChick("c-4", "please block", hatchery.StateDone, hatchery.ReasonDone, "", "Counted 6."))
		block.waitStarted(t)
		h.boot()
		block.waitStarted(t) // the resumed run is cut off again
		h.boot()
		h.idle()
		posts := texts(h.ad.of("post"))
		if len(posts) != 1 || !strings.Contains(posts[0], "My answer to chick c-4's result was cut off by a restart twice, so here it is as it came:\n\nCounted 6.\n\n(chick c-4 · done") {
			t.Fatalf("notice after the second crash = %q", posts)
		}
		if r := h.ad.of("finish"); len(r) != 0 {
			t.Errorf("a run cut off twice was retried: %q", texts(r))
		}
	})
	// The crash came after the report was logged and before the hatchery
	// heard it was reported: the marker carries the run, and the hatchery
	// announces the chick again (here even though Mother has told it, as
	// one whose plan was taken before she did would): while her recovered
	// run answers, or after it has. It is answered once. The test hands
	// the announcement over at that moment, and ChickEnded has dealt with
	// it when it returns, so no ordering is left to the scheduler.
	for _, tc := range []struct {
		name  string
		after bool
	}{
		{"announced again while her recovered run answers", false},
		{"announced again after her recovered run answered", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			block := newBlockTool()
			h := newHarness(t, withTools(block), withScript(resultScript))
			h.m.crashHook = func(p string) bool { return p == "chick logged" }
			end := endedChick("c-3", "please block", hatchery.StateDone, hatchery.ReasonDone, "", "Counted 5.")
			h.m.ChickObserver().ChickEnded(end)
			h.idle()
			h.boot()
			block.waitStarted(t) // the recovered run
			if !tc.after {
				h.m.ChickObserver().ChickEnded(end)
			}
			// Enough for the recovered run and for a second answer,
			// which would block too: a second answer fails the test
			// below rather than hanging it.
			for range 2 {
				block.release <- struct{}{}
			}
			h.idle()
			if tc.after {
				h.m.ChickObserver().ChickEnded(end)
				h.idle()
			}
			if answers := chickAnswers(h, "c-3"); len(answers) != 1 {
				t.Fatalf("after the restart and the announcement: %q, want one answer", answers)
			}
			if n := chickReports(h, "c-3"); n != 1 {
				t.Errorf("report logged %d times, want once", n)
			}
		})
	}
}

// TestChickResultRelayedOnceAfterCrash: with chicks.results "relay", a
// crash after the result was posted and logged and before the hatchery
// heard it was reported: at the next start the hatchery announces it
// again, and the log, which holds the relayed result, keeps it from being
// posted twice; the hatchery is then told it was reported.
func TestChickResultRelayedOnceAfterCrash(t *testing.T) {
	t.Parallel()
	hatch := newFakeHatchery()
	// This Mother dies between her log line and Reported: the hatchery
	// never hears it.
	h := newHarness(t, withScript(resultScript), withChickResults(config.ResultsRelay))
	hatch.end(h.m.ChickObserver(), endedChick("c-5", "count", hatchery.StateDone, hatchery.ReasonDone, "", "Counted 7."))
	h.idle()
	first := chickAnswers(h, "c-5")
	if len(first) != 1 || !hatch.isUnreported("c-5") {
		t.Fatalf("before the crash: posted %q, unreported %v; want it posted once and not reported", first, hatch.isUnreported("c-5"))
	}

	h.hatch = hatch
	h.boot()
	hatch.deliver(h.m.ChickObserver(), hatch.plan())
	h.idle()
	if again := chickAnswers(h, "c-5"); len(again) != 0 {
		t.Errorf("the relayed result was posted again after the restart: %q", again)
	}
	if hatch.isUnreported("c-5") {
		t.Error("the hatchery still holds chick c-5's end as unreported")
	}
}
