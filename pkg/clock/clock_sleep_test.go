package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleepFiresOnAdvance(t *testing.T) {
	c := NewFake(time.Unix(0, 0))
	done := make(chan error, 1)
	go func() { done <- Sleep(t.Context(), c, time.Minute) }()
	for c.Pending() == 0 {
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("Sleep returned %v before the clock moved", err)
	default:
	}
	c.Advance(time.Minute)
	if err := <-done; err != nil {
		t.Fatalf("Sleep = %v, want nil", err)
	}
}

func TestSleepCancelled(t *testing.T) {
	c := NewFake(time.Unix(0, 0))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Sleep(ctx, c, time.Hour) }()
	for c.Pending() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep = %v, want context.Canceled", err)
	}
	if n := c.Pending(); n != 0 {
		t.Fatalf("Pending = %d after a cancelled Sleep, want 0 (timer stopped)", n)
	}
}

func TestSleepNonPositive(t *testing.T) {
	c := NewFake(time.Unix(0, 0))
	if err := Sleep(t.Context(), c, 0); err != nil {
		t.Fatalf("Sleep(0) = %v, want nil", err)
	}
	if n := c.Pending(); n != 0 {
		t.Fatalf("Pending = %d, want 0", n)
	}
}

func TestAfterAndSince(t *testing.T) {
	start := time.Unix(100, 0)
	c := NewFake(start)
	ch := After(c, time.Second)
	c.Advance(2 * time.Second)
	if got := <-ch; !got.Equal(start.Add(time.Second)) {
		t.Fatalf("After delivered %v, want %v", got, start.Add(time.Second))
	}
	if d := Since(c, start); d != 2*time.Second {
		t.Fatalf("Since = %v, want 2s", d)
	}
}

func TestTicker(t *testing.T) {
	start := time.Unix(100, 0)
	c := NewFake(start)
	tk := NewTicker(c, time.Second)
	select {
	case v := <-tk.C:
		t.Fatalf("tick %v before the clock moved", v)
	default:
	}
	c.Advance(time.Second)
	if got := <-tk.C; !got.Equal(start.Add(time.Second)) {
		t.Fatalf("first tick at %v, want %v", got, start.Add(time.Second))
	}
	// Three periods pass unread: one tick waits, the others are dropped.
	c.Advance(3 * time.Second)
	if got := <-tk.C; !got.Equal(start.Add(2 * time.Second)) {
		t.Fatalf("buffered tick at %v, want %v (the first unread one)", got, start.Add(2*time.Second))
	}
	select {
	case v := <-tk.C:
		t.Fatalf("a second buffered tick %v: want dropped ticks", v)
	default:
	}
	tk.Stop()
	c.Advance(10 * time.Second)
	select {
	case v := <-tk.C:
		t.Fatalf("tick %v after Stop", v)
	default:
	}
	if n := c.Pending(); n != 0 {
		t.Fatalf("Pending = %d after Stop, want 0", n)
	}
}
