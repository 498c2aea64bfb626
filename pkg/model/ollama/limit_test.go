package ollama

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// TestLimitCapsConcurrentStreams sends 8 calls at once through a limit of 2
// over the real client and socket, and watches, at the fake server, how
// many streams are open at a time. That calls beyond the limit wait rather
// than arrive late is shown exactly, with synctest, by pkg/model's
// TestLimitHoldsCallsBeyondN; this is the same limit in Mother's wiring.
func TestLimitCapsConcurrentStreams(t *testing.T) {
	t.Parallel()
	var open, peak atomic.Int32
	arrived := make(chan struct{}, 8)
	release := make(chan struct{})
	fake := ollamatest.NewFunc(func(ollamatest.Request) ollamatest.Turn {
		n := open.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		arrived <- struct{}{}
		<-release
		open.Add(-1)
		return ollamatest.Turn{Text: "ok"}
	})
	defer fake.Close()
	p, err := New(fake.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	lim := model.Limit(p, 2)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := lim.Chat(t.Context(), model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}, nil)
			errs <- err
		}()
	}
	// Two calls are at the server at once; then let everything finish.
	<-arrived
	<-arrived
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := peak.Load(); got != 2 {
		t.Errorf("peak concurrent streams at the server = %d, want 2", got)
	}
	if got := len(fake.Requests()); got != 8 {
		t.Errorf("server saw %d calls, want 8", got)
	}
	// The wrapper keeps the provider's optional abilities.
	if _, ok := lim.(model.ContextWindower); !ok {
		t.Error("limited provider lost ContextWindower")
	}
	if n, err := lim.(model.ContextWindower).ContextWindow(context.Background(), "m"); err != nil || n <= 0 {
		t.Errorf("ContextWindow through the limit = %d, %v", n, err)
	}
}

// TestLimitWaitHonoursContext: a call waiting for a slot gives up when its
// context ends (a stop while queued).
func TestLimitWaitHonoursContext(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan struct{}, 2), make(chan struct{})
	fake := ollamatest.NewFunc(func(ollamatest.Request) ollamatest.Turn {
		arrived <- struct{}{}
		<-release
		return ollamatest.Turn{Text: "ok"}
	})
	defer fake.Close()
	defer close(release)
	p, _ := New(fake.URL, nil)
	lim := model.Limit(p, 1)
	go lim.Chat(t.Context(), model.Request{Model: "m"}, nil)
	<-arrived // the one slot is taken
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := lim.Chat(ctx, model.Request{Model: "m"}, nil); err != context.DeadlineExceeded {
		t.Errorf("queued call after its deadline: err = %v, want context.DeadlineExceeded", err)
	}
}
