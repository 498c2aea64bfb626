package model

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// held is a provider whose calls stay inside until the test releases one
// (a send on release) or their context ends. It counts how many are in.
type held struct {
	release chan struct{}

	mu            sync.Mutex
	inside, calls int
}

func (h *held) Chat(ctx context.Context, _ Request, _ func(Delta)) (Response, error) {
	h.mu.Lock()
	h.inside++
	h.calls++
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.inside--
		h.mu.Unlock()
	}()
	select {
	case <-h.release:
		return Response{StopReason: "stop"}, nil
	case <-ctx.Done():
		return Response{}, ctx.Err()
	}
}

func (h *held) counts() (inside, calls int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inside, h.calls
}

// The tests run in a synctest bubble: synctest.Wait returns once every
// goroutine of the test is blocked, so "the other calls are still waiting
// for a slot" is a fact when it is checked, not a guess after a sleep.

// TestLimitHoldsCallsBeyondN: five calls through a limit of two; two are at
// the provider, three wait. Each call that ends lets exactly one more in.
func TestLimitHoldsCallsBeyondN(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &held{release: make(chan struct{})}
		lim := Limit(h, 2)
		const n = 5
		done := make(chan error, n)
		for range n {
			go func() {
				_, err := lim.Chat(t.Context(), Request{}, nil)
				done <- err
			}()
		}
		synctest.Wait()
		if inside, calls := h.counts(); inside != 2 || calls != 2 {
			t.Fatalf("with every call blocked: %d inside the provider, %d calls reached it; want 2 and 2", inside, calls)
		}
		for i := 1; i <= n; i++ {
			h.release <- struct{}{}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			wantInside, wantCalls := min(2, n-i), min(n, 2+i)
			if inside, calls := h.counts(); inside != wantInside || calls != wantCalls {
				t.Fatalf("after %d calls ended: %d inside, %d reached the provider; want %d and %d", i, inside, calls, wantInside, wantCalls)
			}
		}
	})
}

// TestLimitWaitEndsWithContext: a call waiting for a slot gives up when its
// context ends (a stop while queued), never reaches the provider, and
// leaves no slot taken.
func TestLimitWaitEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &held{release: make(chan struct{})}
		lim := Limit(h, 1)
		first := make(chan error, 1)
		go func() {
			_, err := lim.Chat(t.Context(), Request{}, nil)
			first <- err
		}()
		synctest.Wait()

		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if _, err := lim.Chat(ctx, Request{}, nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("queued call after its deadline: err = %v, want context.DeadlineExceeded", err)
		}
		if _, calls := h.counts(); calls != 1 {
			t.Errorf("%d calls reached the provider, want 1 (the queued one gave up)", calls)
		}

		h.release <- struct{}{}
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		// The slot is free again: the next call goes straight in.
		next := make(chan error, 1)
		go func() {
			_, err := lim.Chat(t.Context(), Request{}, nil)
			next <- err
		}()
		synctest.Wait()
		if inside, _ := h.counts(); inside != 1 {
			t.Errorf("after the first call ended, a new call is not at the provider (%d inside)", inside)
		}
		h.release <- struct{}{}
		if err := <-next; err != nil {
			t.Fatal(err)
		}
	})
}

// TestLimitZeroIsNoLimit: n <= 0 returns the provider itself.
func TestLimitZeroIsNoLimit(t *testing.T) {
	h := &held{}
	if got := Limit(h, 0); got != Provider(h) {
		t.Errorf("Limit(p, 0) = %T, want p itself", got)
	}
}
