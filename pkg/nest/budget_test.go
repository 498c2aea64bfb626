package nest_test

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/wire"
)

// TestConcurrentGenerateCannotRaceTheBudget is the attack of issue 31 over
// the nest's real gRPC: a program holding a chick's token sends 30
// Generate calls at once, again and again while they are refused as busy,
// against a 1,000-token chick budget and the default cap of 2 calls in
// flight. The provider never has more than 2 of them at once, the chick
// never uses more than its budget (exactly the calls that fit are
// answered), and it is stopped for its budget.
func TestConcurrentGenerateCannotRaceTheBudget(t *testing.T) {
	t.Parallel()
	const budget, callers = 1000, 30
	f := newFixture(t, budget)
	id, tok := f.spawn(t)
	req := model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}
	per := broker.EstimateInput(req) + fixtureOut
	fit := budget / per
	var now, most atomic.Int64
	f.fake.SetFunc(func(ollamatest.Request) ollamatest.Turn {
		n := now.Add(1)
		defer now.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		// Long enough that the calls overlap; nothing here is timed.
		time.Sleep(20 * time.Millisecond)
		return ollamatest.Turn{Text: "ok", PromptTokens: int(broker.EstimateInput(req)), OutputTokens: fixtureOut}
	})
	ctx := wire.Credentials(t.Context(), id, tok)
	var answered, exhausted, busy, ended atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for {
				st, err := f.client.Generate(ctx, wire.RequestToProto(req))
				if err == nil {
					for {
						msg, rerr := st.Recv()
						if rerr == nil {
							if msg.GetDone() != nil {
								answered.Add(1)
								return
							}
							continue
						}
						if errors.Is(rerr, io.EOF) {
							err = errors.New("stream ended without an answer")
						} else {
							err = rerr
						}
						break
					}
				}
				switch status.Code(err) {
				case codes.Aborted: // busy: as the chick's agent does, retry
					busy.Add(1)
					time.Sleep(time.Millisecond)
					continue
				case codes.ResourceExhausted:
					exhausted.Add(1)
				case codes.Unauthenticated, codes.NotFound: // stopped for its budget
					ended.Add(1)
				default:
					t.Errorf("Generate: %v", err)
				}
				return
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > 2 || m < 1 {
		t.Errorf("the provider had %d of the chick's calls at once, want at most chicks.maxModelCallsPerChick (2)", m)
	}
	if busy.Load() == 0 {
		t.Error("no call was refused as busy: the 30 never raced")
	}
	if got := answered.Load(); got != fit || answered.Load()+exhausted.Load()+ended.Load() != callers || exhausted.Load() == 0 {
		t.Errorf("%d answered, %d refused for the budget, %d after the chick ended; want %d answered (%d tokens each in %d) and the rest refused",
			got, exhausted.Load(), ended.Load(), fit, per, budget)
	}
	if n := len(f.fake.Requests()); n != int(fit) {
		t.Errorf("the provider got %d requests, want %d", n, fit)
	}
	ch, _ := f.h.Ended(id)
	select {
	case <-ch:
	case <-time.After(60 * time.Second):
		t.Fatal("the chick over its budget was not stopped")
	}
	in, _ := f.h.Get(id)
	if in.Reason != hatchery.ReasonBudget || in.Usage.Total() > budget || in.Usage.Total() != fit*per {
		t.Errorf("ended %s with %d tokens, want budget with %d (at most %d)", in.Reason, in.Usage.Total(), fit*per, budget)
	}
}
