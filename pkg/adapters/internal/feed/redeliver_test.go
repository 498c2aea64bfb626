package feed

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
)

// TestRedeliverWaitsForTheDisk: a delivery refused is tried again when
// the error's Ready closes, not before; with Ready closed already (the
// disk thought fine) only the backoff paces the tries, never a tight loop.
func TestRedeliverWaitsForTheDisk(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	ready := make(chan struct{})
	var tries atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- Redeliver(t.Context(), clk, slog.New(slog.DiscardHandler), "m1", func() error {
			if tries.Add(1) == 1 {
				return &chat.NotStoredError{Err: errors.New("no space left on device"), Ready: ready}
			}
			return nil
		})
	}()
	for tries.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if n := tries.Load(); n != 1 {
		t.Fatalf("tried %d times before the disk was fine", n)
	}
	close(ready)
	select {
	case err := <-done:
		if err != nil || tries.Load() != 2 {
			t.Fatalf("Redeliver = %v after %d tries, want nil after 2", err, tries.Load())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not delivered again once Ready closed")
	}

	// Ready closed already: each try waits for the backoff.
	closed := make(chan struct{})
	close(closed)
	tries.Store(0)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		done <- Redeliver(ctx, clk, slog.New(slog.DiscardHandler), "m2", func() error {
			tries.Add(1)
			return &chat.NotStoredError{Err: errors.New("permission denied"), Ready: closed}
		})
	}()
	time.Sleep(50 * time.Millisecond)
	if n := tries.Load(); n != 1 {
		t.Fatalf("tried %d times without the clock moving, want 1", n)
	}
	clk.Advance(RetryMin + RetryMin/5)
	for deadline := time.Now().Add(5 * time.Second); tries.Load() < 2 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := tries.Load(); n != 2 {
		t.Fatalf("tried %d times after one backoff, want 2", n)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Redeliver after its context ended = %v", err)
	}
}
