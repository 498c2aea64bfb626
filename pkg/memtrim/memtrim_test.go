package memtrim

import (
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/mother-chat/mother/pkg/clock"
)

func TestTrimIsArmedOnlyWhenIdleAndReArmed(t *testing.T) {
	start := time.Unix(1000, 0)
	c := clock.NewFake(start)
	tr := New(c, 2*time.Second, slog.New(slog.DiscardHandler))
	tr.Begin()
	tr.Begin()
	tr.End()
	if n := c.Pending(); n != 0 {
		t.Fatalf("with work in flight %d trims are armed, want 0", n)
	}
	tr.End()
	if n, at := c.Pending(), c.NextAt(); n != 1 || !at.Equal(start.Add(2*time.Second)) {
		t.Fatalf("idle: %d trims armed at %v, want 1 at %v", n, at, start.Add(2*time.Second))
	}
	c.Advance(time.Second)
	tr.Schedule() // re-armed: the delay counts from now
	if n, at := c.Pending(), c.NextAt(); n != 1 || !at.Equal(start.Add(3*time.Second)) {
		t.Fatalf("re-armed: %d trims armed at %v, want 1 at %v", n, at, start.Add(3*time.Second))
	}
	c.Advance(2 * time.Second) // fires: trimIfIdle runs
	if n := c.Pending(); n != 0 {
		t.Errorf("after the delay %d trims still armed", n)
	}
}

func TestBeforeTrimRunsAtTheIdleTrimOnly(t *testing.T) {
	c := clock.NewFake(time.Unix(1000, 0))
	tr := New(c, 2*time.Second, slog.New(slog.DiscardHandler))
	dropped := 0
	tr.BeforeTrim(func() { dropped++ })
	tr.Begin()
	tr.End()
	tr.Begin() // busy again before the delay: the armed trim finds work
	c.Advance(2 * time.Second)
	if dropped != 0 {
		t.Fatalf("caches dropped %d times with work in flight", dropped)
	}
	tr.End()
	c.Advance(time.Second)
	if dropped != 0 {
		t.Fatalf("caches dropped %d times before the delay", dropped)
	}
	c.Advance(time.Second)
	if dropped != 1 {
		t.Errorf("caches dropped %d times after the delay of quiet, want 1", dropped)
	}
}

// TestTrimFreesWhatPoolsKeep: a buffer left in a sync.Pool (as
// encoding/json leaves one as large as the last model request) is freed
// by the idle trim, not kept until two more collections happen to run.
func TestTrimFreesWhatPoolsKeep(t *testing.T) {
	c := clock.NewFake(time.Unix(1000, 0))
	tr := New(c, 2*time.Second, slog.New(slog.DiscardHandler))
	var pool sync.Pool
	buf := new([1 << 20]byte)
	w := weak.Make(buf)
	pool.Put(buf)
	buf = nil
	tr.Schedule()
	c.Advance(2 * time.Second) // the trim runs
	if w.Value() != nil {
		t.Error("the pooled buffer is still in memory after the trim")
	}
	runtime.KeepAlive(&pool)
}

// TestFloorCodeReleasedBeforeTheHeapTrim: with ReleaseCodeAfter, the
// code pages go after their shorter quiet (not while work is in flight),
// and the full trim still comes at its own delay.
func TestFloorCodeReleasedBeforeTheHeapTrim(t *testing.T) {
	released := 0
	release = func() error { released++; return nil }
	t.Cleanup(func() { release = releaseCode })
	c := clock.NewFake(time.Unix(1000, 0))
	tr := New(c, 2*time.Second, slog.New(slog.DiscardHandler))
	tr.ReleaseCodeAfter(500 * time.Millisecond)
	trimmed := 0
	tr.BeforeTrim(func() { trimmed++ })
	tr.Begin()
	tr.End()
	tr.Begin() // busy again before the short delay: nothing is released
	c.Advance(500 * time.Millisecond)
	if released != 0 {
		t.Fatalf("code released %d times with work in flight", released)
	}
	tr.End()
	c.Advance(400 * time.Millisecond)
	if released != 0 {
		t.Fatalf("code released %d times before its delay of quiet", released)
	}
	c.Advance(100 * time.Millisecond)
	if released != 1 || trimmed != 0 {
		t.Fatalf("after 500 ms of quiet: code released %d times, trims %d; want 1 and 0", released, trimmed)
	}
	c.Advance(1500 * time.Millisecond)
	if released != 2 || trimmed != 1 {
		t.Errorf("after 2 s of quiet: code released %d times, trims %d; want 2 (the trim releases it too) and 1", released, trimmed)
	}
}

// TestFloorTouchDefersTheCodeRelease: work not counted by Begin/End (a
// chick's relayed events) keeps the code mapped until its own quiet.
func TestFloorTouchDefersTheCodeRelease(t *testing.T) {
	released := 0
	release = func() error { released++; return nil }
	t.Cleanup(func() { release = releaseCode })
	c := clock.NewFake(time.Unix(1000, 0))
	tr := New(c, 2*time.Second, slog.New(slog.DiscardHandler))
	tr.ReleaseCodeAfter(500 * time.Millisecond)
	tr.Begin()
	tr.End()
	c.Advance(400 * time.Millisecond)
	tr.Touch()
	c.Advance(100 * time.Millisecond)
	if released != 0 {
		t.Fatalf("code released %d times 100 ms after a touch", released)
	}
	c.Advance(400 * time.Millisecond)
	if released != 1 {
		t.Errorf("code released %d times 500 ms after the last touch, want 1", released)
	}
}
