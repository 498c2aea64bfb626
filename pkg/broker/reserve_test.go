package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/anthropic/anthropictest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/model/providers"
)

// ledger sums the settlement lines of dir's usage ledger: what was
// charged, in how many lines, and how many reservations have no
// settlement.
func ledger(t *testing.T, dir string) (total int64, settled, open int) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "usage", "*.jsonl"))
	must(t, err)
	reserved := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		must(t, err)
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if line == "" {
				continue
			}
			var e broker.Entry
			must(t, json.Unmarshal([]byte(line), &e))
			switch e.Kind {
			case broker.KindReserve, broker.KindMotherReserve:
				reserved[e.Call] = true
				continue
			case "", broker.KindMother:
			default:
				continue // a notice given
			}
			delete(reserved, e.Call)
			total += e.Input + e.Output
			settled++
		}
	}
	return total, settled, len(reserved)
}

// inFlight counts the chat requests the fake is answering, and the most at
// once. A request counts from when the fake's handler starts until the
// handler returns, which is inside the request's life: the most at once
// is never more than the requests in flight at once.
type inFlight struct {
	now, max atomic.Int64
}

func (f *inFlight) enter() {
	n := f.now.Add(1)
	for m := f.max.Load(); n > m && !f.max.CompareAndSwap(m, n); m = f.max.Load() {
	}
}

func (f *inFlight) leave() { f.now.Add(-1) }

// barrier holds the first n arrivals until all n are in (or a minute
// passed: a broken broker that lets fewer through fails the test on
// counts, not on a hang).
type barrier struct {
	n       int64
	arrived atomic.Int64
	all     chan struct{}
	once    sync.Once
}

func newBarrier(n int64) *barrier { return &barrier{n: n, all: make(chan struct{})} }

func (b *barrier) wait() {
	if b.arrived.Add(1) >= b.n {
		b.once.Do(func() { close(b.all) })
	}
	select {
	case <-b.all:
	case <-time.After(time.Minute):
	}
}

// outcome of one caller that retries while the broker says busy.
type outcome struct {
	answered, refused, other atomic.Int64
	firstOther               atomic.Value
}

func (o *outcome) run(ctx context.Context, b *broker.Broker, c broker.Caller, req model.Request) {
	for {
		_, err := b.Generate(ctx, c, req, nil)
		switch {
		case err == nil:
			o.answered.Add(1)
			return
		case errors.Is(err, model.ErrBudgetExhausted):
			o.refused.Add(1)
			return
		case errors.Is(err, model.ErrBusy) && model.IsTransient(err):
			// As the chick's agent does, with a shorter wait.
			time.Sleep(time.Millisecond)
		default:
			o.other.Add(1)
			o.firstOther.CompareAndSwap(nil, err.Error())
			return
		}
	}
}

// TestConcurrentCallsCannotRaceABudget: 30 calls at once against a budget
// of 1,000 tokens, for each budget the broker enforces. Each call reserves
// testIn+100 and costs exactly that, so floor(1000/perCall) calls fit;
// those are held at the fake until all of them are in flight at once (the
// race is real), and every other call is refused before it reaches the
// provider. The ledger's total never passes the budget. On the broker
// that checked before and recorded after, all 30 were answered.
func TestConcurrentCallsCannotRaceABudget(t *testing.T) {
	t.Parallel()
	const budget, out, callers = 1000, 100, 30
	per := testIn + out
	fit := budget / per
	cases := []struct {
		name    string
		budgets config.Budgets
		caller  func(i int) broker.Caller
	}{
		{"chick", config.Budgets{ChickTokens: config.Tokens(budget)}, func(int) broker.Caller {
			return broker.Caller{ChickID: "c-1", Channel: "cli/a", Tier: "big"}
		}},
		{"channel per day", config.Budgets{ChannelDailyTokens: config.Tokens(budget)}, func(i int) broker.Caller {
			return broker.Caller{ChickID: fmt.Sprintf("c-%d", i), Channel: "cli/a", Tier: "big"}
		}},
		{"tier per day", config.Budgets{TierDailyTokens: map[string]config.Tokens{"big": config.Tokens(budget)}}, func(i int) broker.Caller {
			return broker.Caller{ChickID: fmt.Sprintf("c-%d", i), Channel: fmt.Sprintf("cli/%d", i), Tier: "big"}
		}},
		{"user per day", config.Budgets{UserDailyTokens: config.Tokens(budget)}, func(i int) broker.Caller {
			return broker.Caller{ChickID: fmt.Sprintf("c-%d", i), Channel: fmt.Sprintf("cli/%d", i), Tier: "big", User: "slack/alice"}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var flight inFlight
			bar := newBarrier(fit)
			fake := ollamatest.NewFunc(func(ollamatest.Request) ollamatest.Turn {
				flight.enter()
				defer flight.leave()
				bar.wait()
				return ollamatest.Turn{Text: "ok", PromptTokens: int(testIn), OutputTokens: out}
			})
			defer fake.Close()
			dir := t.TempDir()
			b := setup(t, tc.budgets, dir, clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.Local)), fake, func(cfg *config.Config) {
				cfg.Chicks.Tiers["big"] = config.Tier{Provider: "ollama", Model: "big-model", MaxOutputTokens: out}
				// The reservations are under test here, not the cap on a
				// chick's calls in flight.
				cfg.Chicks.MaxModelCallsPerChick = callers
			})
			var o outcome
			var wg sync.WaitGroup
			for i := range callers {
				wg.Go(func() { o.run(t.Context(), b, tc.caller(i), goReq) })
			}
			wg.Wait()
			if o.other.Load() != 0 {
				t.Fatalf("%d calls failed otherwise, first: %v", o.other.Load(), o.firstOther.Load())
			}
			total, settled, open := ledger(t, dir)
			if total > budget {
				t.Errorf("the ledger holds %d tokens against a budget of %d", total, budget)
			}
			if got := o.answered.Load(); got != fit || o.refused.Load() != callers-fit {
				t.Errorf("%d answered and %d refused, want %d answered (%d tokens each in a budget of %d) and %d refused", got, o.refused.Load(), fit, per, budget, callers-fit)
			}
			if total != fit*per || settled != int(fit) || open != 0 {
				t.Errorf("ledger: %d tokens in %d settled calls, %d reservations open; want %d in %d, none open", total, settled, open, fit*per, fit)
			}
			if n := len(fake.Requests()); n != int(fit) {
				t.Errorf("the provider got %d requests, want %d: a refused call reached it", n, fit)
			}
			if m := flight.max.Load(); m != fit {
				t.Errorf("at most %d calls in flight at the provider, want all %d that fit at once", m, fit)
			}
			for _, bs := range b.Budgets() {
				if bs.Reserved != 0 {
					t.Errorf("after every call ended: %+v still reserved", bs)
				}
			}
		})
	}
}

// TestOutputLimitIsClampedOnTheWire: the output limit the model server is
// sent (Ollama's num_predict, Anthropic's max_tokens) is the tier's, a
// request can lower it and never raise it.
func TestOutputLimitIsClampedOnTheWire(t *testing.T) {
	t.Parallel()
	fake := ollamatest.NewFunc(exact)
	defer fake.Close()
	b := setup(t, config.Budgets{}, t.TempDir(), clock.NewFake(time.Now()), fake, func(cfg *config.Config) {
		cfg.Chicks.Tiers["big"] = config.Tier{Provider: "ollama", Model: "big-model", MaxOutputTokens: 100}
		cfg.Chicks.Tiers["plain"] = config.Tier{Provider: "ollama", Model: "plain-model"} // no maxOutputTokens: the default
	})
	cases := []struct {
		tier      string
		requested int
		want      float64
	}{
		{"big", 0, 100},
		{"big", 1 << 30, 100},
		{"big", 101, 100},
		{"big", 50, 50},
		{"big", -7, 100},
		{"plain", 0, config.DefaultTierMaxOutputTokens},
		{"plain", 1<<31 - 1, config.DefaultTierMaxOutputTokens},
		{"plain", 300, 300},
	}
	for i, tc := range cases {
		req := goReq
		req.MaxOutputTokens = tc.requested
		_, err := b.Generate(t.Context(), broker.Caller{ChickID: "c-1", Channel: "cli/a", Tier: tc.tier}, req, nil)
		must(t, err)
		got := fake.Requests()[i].Options["num_predict"]
		if got != tc.want {
			t.Errorf("tier %s, max_output_tokens %d: num_predict %v on the wire, want %v", tc.tier, tc.requested, got, tc.want)
		}
	}

	// Anthropic: max_tokens, the same way.
	afake := anthropictest.New()
	defer afake.Close()
	cfg := &config.Config{}
	cfg.Providers.Anthropic = config.Anthropic{APIKey: anthropictest.APIKey, BaseURL: afake.URL}
	cfg.SetDefaults("")
	cfg.Chicks.Tiers["claude"] = config.Tier{Provider: "anthropic", Model: "claude-sonnet-4-5", MaxOutputTokens: 2000}
	ab, err := broker.New(broker.Options{Config: cfg, Dir: t.TempDir(), Providers: func(name string) (model.Provider, error) {
		return providers.New(cfg.Providers, name, nil)
	}})
	must(t, err)
	defer ab.Close()
	for _, requested := range []int{0, 1 << 30, 700} {
		req := goReq
		req.MaxOutputTokens = requested
		_, err := ab.Generate(t.Context(), broker.Caller{ChickID: "c-2", Channel: "cli/a", Tier: "claude"}, req, nil)
		must(t, err)
	}
	var got []int
	for _, r := range afake.Requests() {
		got = append(got, r.MaxTokens)
	}
	if fmt.Sprint(got) != "[2000 2000 700]" {
		t.Errorf("Anthropic's max_tokens on the wire: %v, want [2000 2000 700]", got)
	}
}

// TestCallsInFlightPerChickAreCapped: with the default cap of 2, a chick's
// third call at once is refused before it reaches the provider, as a
// transient busy error; another chick is not held up by it; once the two
// end, the chick may call again.
func TestCallsInFlightPerChickAreCapped(t *testing.T) {
	t.Parallel()
	var flight inFlight
	release, arrived := make(chan struct{}), make(chan struct{}, 16)
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if r.LastUser() == "hold" {
			flight.enter()
			defer flight.leave()
			arrived <- struct{}{}
			<-release
		}
		return exact(r)
	})
	defer fake.Close()
	dir := t.TempDir()
	b := setup(t, config.Budgets{}, dir, clock.NewFake(time.Now()), fake)
	c1 := broker.Caller{ChickID: "c-1", Channel: "cli/a", Tier: "big"}
	hold := model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hold"}}}
	const callers = 10
	errs := make(chan error, callers)
	for range callers {
		go func() {
			_, err := b.Generate(t.Context(), c1, hold, nil)
			errs <- err
		}()
	}
	// The refused return at once; two stay at the provider until released.
	// A third arriving there fails the test (and releases them all).
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	var at int
	for refused := 0; refused < callers-2; {
		select {
		case err := <-errs:
			if !errors.Is(err, model.ErrBusy) || !model.IsTransient(err) || !strings.Contains(err.Error(), "chicks.maxModelCallsPerChick") {
				t.Fatalf("a call past the cap: %v, want a transient busy error naming chicks.maxModelCallsPerChick", err)
			}
			refused++
		case <-arrived:
			if at++; at > 2 {
				t.Fatalf("%d of c-1's calls reached the provider at once, want at most 2", at)
			}
		}
	}
	// Another chick is not held up by c-1's calls.
	must(t, call(t, b, broker.Caller{ChickID: "c-2", Channel: "cli/a", Tier: "big"}))
	for ; at < 2; at++ {
		<-arrived
	}
	close(release)
	for range 2 {
		must(t, <-errs)
	}
	if m := flight.max.Load(); m != 2 {
		t.Errorf("at most %d of c-1's calls at the provider at once, want 2", m)
	}
	if n := len(fake.Requests()); n != 3 {
		t.Errorf("the provider got %d requests, want 3 (c-1's two and c-2's one)", n)
	}
	// Slots are given back.
	must(t, call(t, b, c1))
	if _, settled, open := ledger(t, dir); settled != 4 || open != 0 {
		t.Errorf("ledger: %d settled, %d open; want 4 settled", settled, open)
	}
}

// TestFailedCallReleasesItsReservation: with a budget that holds exactly
// one call, a call the provider fails (an error status, a model it does
// not have) gives its reservation back, so the next call fits; a call its
// caller abandons is charged its whole reservation.
func TestFailedCallReleasesItsReservation(t *testing.T) {
	t.Parallel()
	fake := ollamatest.New(
		ollamatest.Turn{Status: 500, Error: "out of memory"},
		ollamatest.Turn{Status: 400, Error: "bad request"},
		ollamatest.Turn{Text: "ok", PromptTokens: int(testIn), OutputTokens: testOut},
	)
	defer fake.Close()
	dir := t.TempDir()
	b := setup(t, config.Budgets{ChickTokens: config.Tokens(perCall)}, dir, clock.NewFake(time.Now()), fake)
	c := broker.Caller{ChickID: "c-1", Channel: "cli/a", Tier: "big"}
	for i := range 2 {
		if err := call(t, b, c); err == nil || errors.Is(err, model.ErrBudgetExhausted) || errors.Is(err, model.ErrBusy) {
			t.Fatalf("failing call %d: %v, want the provider's error", i+1, err)
		}
		if u := b.ChickUsage(c.ChickID); u.Total() != 0 {
			t.Fatalf("failing call %d charged %+v", i+1, u)
		}
	}
	must(t, call(t, b, c))
	if err := call(t, b, c); !errors.Is(err, model.ErrBudgetExhausted) {
		t.Errorf("a call past the budget: %v", err)
	}
	if total, settled, open := ledger(t, dir); total != perCall || settled != 3 || open != 0 {
		t.Errorf("ledger: %d tokens in %d settled calls, %d open; want %d in 3 (two of them zero)", total, settled, open, perCall)
	}

	// Abandoned: the chick hangs up while the provider works.
	started := make(chan struct{}, 1)
	slow := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		started <- struct{}{}
		return ollamatest.Turn{Text: "ok", Delay: time.Hour}
	})
	defer slow.Close()
	b2 := setup(t, config.Budgets{}, t.TempDir(), clock.NewFake(time.Now()), slow)
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-started; cancel() }()
	if _, err := b2.Generate(ctx, c, goReq, nil); err == nil {
		t.Fatal("an abandoned call succeeded")
	}
	if u := b2.ChickUsage(c.ChickID); u.InputTokens != testIn || u.OutputTokens != testOut {
		t.Errorf("an abandoned call was charged %+v, want its reservation %d in / %d out", u, testIn, testOut)
	}
}

// TestRestartKeepsTotalsAndChargesCallsInFlight: a new broker on the same
// directory has the same totals; a call still in flight when the broker
// closed (Mother stopping or killed: its settlement never reached the
// ledger) is charged its whole reservation at the next start, once.
func TestRestartKeepsTotalsAndChargesCallsInFlight(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}, 1), make(chan struct{})
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if r.LastUser() == "hold" {
			started <- struct{}{}
			<-release
			return ollamatest.Turn{Text: "late", PromptTokens: 1, OutputTokens: 1}
		}
		return exact(r)
	})
	defer fake.Close()
	dir := t.TempDir()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.Local))
	budgets := config.Budgets{ChickTokens: config.Tokens(4 * perCall), ChannelDailyTokens: config.Tokens(10 * perCall)}
	b := setup(t, budgets, dir, clk, fake)
	c := broker.Caller{ChickID: "c-1", Channel: "cli/a", Tier: "big"}
	must(t, call(t, b, c))
	must(t, call(t, b, c))

	hold := model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hold"}}}
	holdRes := broker.EstimateInput(hold) + testOut
	done := make(chan error, 1)
	go func() {
		_, err := b.Generate(t.Context(), c, hold, nil)
		done <- err
	}()
	<-started
	must(t, b.Close()) // Mother stops while the call is at the provider
	if _, err := b.Generate(t.Context(), c, goReq, nil); err == nil {
		t.Error("a closed broker sent a call")
	}
	close(release)
	must(t, <-done) // the provider answered, but the ledger is closed

	if _, _, open := ledger(t, dir); open != 1 {
		t.Fatalf("%d reservations without settlement in the ledger, want the held call's", open)
	}
	want := 2*perCall + holdRes
	for restart := 1; restart <= 2; restart++ {
		b = setup(t, budgets, dir, clk, fake)
		if u := b.ChickUsage(c.ChickID); u.Total() != want {
			t.Errorf("restart %d: c-1 used %d, want %d (two calls and the held one's whole reservation)", restart, u.Total(), want)
		}
		for _, bs := range b.Budgets() {
			if bs.Kind == "channel" && bs.Used != want {
				t.Errorf("restart %d: %+v, want %d used", restart, bs, want)
			}
		}
		if total, _, open := ledger(t, dir); total != want || open != 0 {
			t.Errorf("restart %d: ledger total %d with %d open, want %d and none", restart, total, open, want)
		}
		must(t, b.Close())
	}
	// What is left of the chick's budget (4 calls) no longer holds one.
	b = setup(t, budgets, dir, clk, fake)
	if err := call(t, b, c); !errors.Is(err, model.ErrBudgetExhausted) {
		t.Errorf("after the restarts, a call past the budget: %v", err)
	}
}
