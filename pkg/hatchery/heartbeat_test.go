package hatchery_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/docker"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model"
)

// watchedChick spawns a chick (a container that sleeps: it never speaks
// by itself, the test says when it does with Touch) on a hatchery whose
// clock is fc, with heartbeats every iv and a startup grace of a minute,
// and waits until it runs. The watchdog runs on fc: time passes, and
// heartbeats are missed, only when the test says.
func watchedChick(t *testing.T, iv time.Duration) (*hatchery.Hatchery, *recorder, *clock.Fake, hatchery.Info) {
	t.Helper()
	image := hatcherytest.BuildImage(t)
	api := hatcherytest.Docker(t)
	cfg := testConfig(image) // kill grace 1s
	cfg.Chicks.HeartbeatInterval = config.Dur(iv)
	fc := clock.NewFake(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))
	hostAPI, err := docker.Dial(config.DockerHost{Name: "local"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := hatchery.New(hatchery.Options{
		Config: cfg, Dir: t.TempDir(), Command: []string{"sleep", "60"}, StartupGrace: time.Minute, Clock: fc, Logger: testLogger(t),
		Hosts: []hatchery.Host{{Name: "local", Runtime: docker.New(hostAPI), Capacity: 2, MotherAddress: "127.0.0.1:1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	h.Subscribe(rec)
	hatcherytest.RemoveOnCleanup(t, api, h.Instance)
	t.Cleanup(func() { h.Close() })
	must(t, h.Reconcile(t.Context())) // starts the watchdog
	e := &env{h: h, rec: rec, api: api}
	in := e.spawn(t, hatchery.SpawnRequest{Files: hatchery.Files{ChannelDir: e.channelDir(t)}})
	waitState(t, h, in.ID, hatchery.StateRunning, time.Minute)
	return h, rec, fc, in
}

// TestHangSoonAfterFirstContact: the startup grace covers a chick that has
// not spoken yet; once it has, missed heartbeats mean hung, even inside
// what would have been the grace (found by the soak: a chick that froze
// in its first 30 s was killed only after the grace ran out). Nothing is
// measured of its heartbeats yet, so that takes three of maxStretch (4)
// intervals: 2.4 s here, not 60 s.
func TestHangSoonAfterFirstContact(t *testing.T) {
	t.Parallel()
	h, rec, fc, in := watchedChick(t, 200*time.Millisecond)
	fc.Advance(2 * time.Second) // silent, but within the startup grace
	if st := h.State(in.ID); st != hatchery.StateRunning {
		t.Fatalf("a chick that has not spoken yet was stopped within its startup grace: %s", st)
	}
	h.Touch(in.ID)              // it speaks (joins, sends a heartbeat) ...
	fc.Advance(3 * time.Second) // ... then goes silent for fifteen intervals
	end := rec.wait(t, in.ID, time.Minute)
	if end.Reason != hatchery.ReasonHung || end.Outcome != "hung: no heartbeat for 2.4s" {
		t.Errorf("ended %s (%s), want hung after three missed heartbeats of four intervals each (2.4s): silent for 15 heartbeat intervals after it spoke", end.Reason, end.Outcome)
	}
}

// TestMotherStallIsNotAHang: Mother herself does not run for ten heartbeat
// intervals (a loaded machine, a long GC pause): her watchdog's check
// comes late, while what the chick sent meanwhile waits in her socket. It
// counts no missed heartbeat, so the chick, heard right after, runs on
// (measured from its last sighting, it was taken for hung at once). A
// chick that stays silent after the stall is still hung three intervals
// later.
func TestMotherStallIsNotAHang(t *testing.T) {
	t.Parallel()
	iv := 200 * time.Millisecond
	h, rec, fc, in := watchedChick(t, iv)
	for range 5 {
		h.Touch(in.ID)
		fc.Advance(iv)
	}
	fc.Stall(10 * iv) // Mother does not run
	fc.Advance(0)     // her watchdog's late check
	h.Touch(in.ID)    // then she reads the heartbeats that waited
	for range 5 {
		fc.Advance(iv)
		h.Touch(in.ID)
	}
	if st := h.State(in.ID); st != hatchery.StateRunning {
		t.Fatalf("after Mother stalled for 10 intervals, a chick heard as soon as she ran again is %s, want running", st)
	}
	fc.Stall(10 * iv)
	fc.Advance(0)
	fc.Advance(4 * iv) // silent after this stall: three checks on time
	end := rec.wait(t, in.ID, time.Minute)
	if end.Reason != hatchery.ReasonHung {
		t.Errorf("ended %s (%s), want hung: silent for three intervals after Mother's stall", end.Reason, end.Outcome)
	}
}

// TestSlowHeartbeatsAreNotAHang: a chick whose heartbeats arrive later and
// later (a loaded machine, big events in their way) is not taken for hung
// when they come 3.5 intervals apart: the threshold follows the gaps
// measured. Once it stops, it is hung after three of its own gaps.
func TestSlowHeartbeatsAreNotAHang(t *testing.T) {
	t.Parallel()
	iv := 200 * time.Millisecond
	h, rec, fc, in := watchedChick(t, iv)
	h.Touch(in.ID)
	for _, gap := range []float64{2, 2, 3, 3.5, 3.5, 3.5, 3.5, 3.5} {
		fc.Advance(time.Duration(gap * float64(iv)))
		if st := h.State(in.ID); st != hatchery.StateRunning {
			t.Fatalf("a chick heard every %.1f intervals is %s, want running", gap, st)
		}
		h.Touch(in.ID)
	}
	fc.Advance(20 * iv)
	end := rec.wait(t, in.ID, time.Minute)
	if end.Reason != hatchery.ReasonHung || end.Outcome != "hung: no heartbeat for 2.1s" {
		t.Errorf("ended %s (%s), want hung after three of its 3.5-interval gaps (2.1s)", end.Reason, end.Outcome)
	}
}

// TestResultStoredIsNotHung: a chick that has delivered its result and
// falls silent while it exits is not hung: it ends done (its container
// killed after the kill grace if it lingers).
func TestResultStoredIsNotHung(t *testing.T) {
	t.Parallel()
	h, rec, fc, in := watchedChick(t, 200*time.Millisecond)
	h.Touch(in.ID)
	must(t, h.Finish(in.ID, hatchery.Result{Text: "all done", StopReason: "done"}))
	fc.Advance(2 * time.Second) // silent for ten intervals; the kill grace passes
	end := rec.wait(t, in.ID, time.Minute)
	if end.Reason != hatchery.ReasonDone {
		t.Errorf("ended %s (%s), want done: its result was stored", end.Reason, end.Outcome)
	}
}

// TestEndedChicksAreForgotten: a Mother that runs for months must not grow
// with every chick (found by the soak: each ended chick's record, system
// prompt included, stayed in memory). The hatchery remembers the newest
// MaxRemembered ended chicks whose end was reported; older ones are
// forgotten, but never one whose end Mother has not reported yet. The
// chicks here ask for an image the engine does not have, which ends them at
// once; the runtime is wrapped so the hatchery cannot ask for the image
// first (which would refuse them: TestMissingImageRefusesChicksUntilBuilt).
func TestEndedChicksAreForgotten(t *testing.T) {
	t.Parallel()
	hatcherytest.Docker(t)
	cfg := testConfig("mother-chick:absent-from-this-engine")
	cfg.Chicks.MaxConcurrent, cfg.Chicks.MaxPerChannel = 4, 4
	local, err := docker.Dial(config.DockerHost{Name: "local"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	meter := &forgetMeter{forgot: map[string]bool{}}
	newH := func() *hatchery.Hatchery {
		h, err := hatchery.New(hatchery.Options{Config: cfg, Dir: dir, Logger: testLogger(t), Meter: meter,
			Hosts: []hatchery.Host{{Name: "local", Runtime: struct{ hatchery.Runtime }{docker.New(local)}, Capacity: 4, MotherAddress: "127.0.0.1:1"}}})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	h := newH()
	defer h.Close()
	var ids []string
	for i := range hatchery.MaxRemembered + 50 {
		in, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "cli", ChannelID: "local", Goal: "g", System: strings.Repeat("a long system prompt ", 200)})
		if err != nil {
			t.Fatalf("spawn %d: %v", i, err)
		}
		ended, err := h.Ended(in.ID)
		if err != nil {
			t.Fatal(err)
		}
		<-ended
		if i > 0 { // as Mother does once she has told the channel; not for the first
			h.Reported(in.ID)
		}
		ids = append(ids, in.ID)
	}
	if n := len(h.List(true)); n != hatchery.MaxRemembered+1 {
		t.Errorf("%d chicks remembered after %d ended, want %d and the unreported one", n, len(ids), hatchery.MaxRemembered)
	}
	if got, err := h.Get(ids[0]); err != nil || !got.Unreported {
		t.Errorf("the unreported chick was forgotten: %+v, %v", got, err)
	}
	if _, err := h.Get(ids[1]); !errors.Is(err, hatchery.ErrUnknownChick) {
		t.Errorf("the oldest reported chick is still remembered: %v", err)
	}
	if got, err := h.Get(ids[len(ids)-1]); err != nil || got.Reason != hatchery.ReasonNoStart {
		t.Errorf("the newest ended chick: %+v, %v", got, err)
	}
	// The meter (the broker) was told to forget exactly the forgotten ones.
	meter.mu.Lock()
	for i, id := range ids {
		if forgot, want := meter.forgot[id], i >= 1 && i < len(ids)-hatchery.MaxRemembered; forgot != want {
			t.Errorf("chick %d (%s): the meter told to forget it: %v, want %v", i, id, forgot, want)
		}
	}
	meter.mu.Unlock()
	// A restart loads what was kept on disk, and remembers as many.
	h.Close()
	local, _ = docker.Dial(config.DockerHost{Name: "local"}, nil)
	h2 := newH()
	defer h2.Close()
	if n := len(h2.List(true)); n != hatchery.MaxRemembered+1 {
		t.Errorf("%d chicks remembered after a restart, want %d and the unreported one", n, hatchery.MaxRemembered)
	}
}

// forgetMeter is a hatchery.Meter and Forgetter that records what it is
// told to forget.
type forgetMeter struct {
	mu     sync.Mutex
	forgot map[string]bool
}

func (m *forgetMeter) ChickUsage(string) model.Usage { return model.Usage{} }

func (m *forgetMeter) ForgetChick(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgot[id] = true
}
