package broker_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/anthropic/anthropictest"
	"github.com/mother-chat/mother/pkg/model/ollama"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/model/providers"
)

// testOut is the output limit of the test tier "big"; goReq is the request
// call sends, testIn its prompt estimate and perCall what it reserves.
// The fakes that answer it report testIn prompt tokens and testOut output
// tokens, so a call costs exactly what it reserved: a budget of n*perCall
// is reached exactly, never passed.
const testOut = 40

var (
	goReq   = model.Request{Model: "chick-chose-this", Messages: []model.Message{{Role: model.RoleUser, Content: "go"}}}
	testIn  = broker.EstimateInput(goReq)
	perCall = testIn + testOut
)

// exact answers goReq with exactly what it reserved.
func exact(ollamatest.Request) ollamatest.Turn {
	return ollamatest.Turn{Text: "ok", PromptTokens: int(testIn), OutputTokens: testOut}
}

func setup(t *testing.T, budgets config.Budgets, dir string, clk *clock.Fake, fake *ollamatest.Server, edit ...func(*config.Config)) *broker.Broker {
	t.Helper()
	cfg := &config.Config{Budgets: budgets}
	cfg.SetDefaults("")
	cfg.Budgets.ChickTokens = budgets.ChickTokens
	cfg.Chicks.Tiers["big"] = config.Tier{Provider: "ollama", Model: "big-model", MaxOutputTokens: testOut}
	for _, e := range edit {
		e(cfg)
	}
	b, err := broker.New(broker.Options{Config: cfg, Dir: dir, Clock: clk, Providers: func(name string) (model.Provider, error) {
		if name != "ollama" {
			return nil, errors.New("no such provider")
		}
		return ollama.New(fake.URL, nil)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func call(t *testing.T, b *broker.Broker, c broker.Caller) error {
	t.Helper()
	_, err := b.Generate(t.Context(), c, goReq, nil)
	return err
}

func TestBudgetsRefuse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		budgets config.Budgets
		// callers in order; the last one must be refused with want.
		callers []broker.Caller
		want    string
		other   broker.Caller // still allowed after the refusal
	}{
		{
			name:    "per chick",
			budgets: config.Budgets{ChickTokens: config.Tokens(3 * perCall)},
			callers: rep(broker.Caller{ChickID: "c-1", Channel: "cli/a", Tier: "big"}, 4),
			want:    fmt.Sprintf("chick c-1 used %d of its %d tokens (budgets.chickTokens); the next call needs at least %d tokens", 3*perCall, 3*perCall, perCall),
			other:   broker.Caller{ChickID: "c-2", Channel: "cli/a", Tier: "big"},
		},
		{
			name:    "per channel per day",
			budgets: config.Budgets{ChannelDailyTokens: config.Tokens(3 * perCall)},
			callers: []broker.Caller{{ChickID: "c-1", Channel: "cli/a", Tier: "big"}, {ChickID: "c-2", Channel: "cli/a", Tier: "big"}, {ChickID: "c-3", Channel: "cli/a", Tier: "big"}, {ChickID: "c-4", Channel: "cli/a", Tier: "big"}},
			want:    fmt.Sprintf("channel cli/a used %d of its %d chick tokens today", 3*perCall, 3*perCall),
			other:   broker.Caller{ChickID: "c-5", Channel: "cli/b", Tier: "big"},
		},
		{
			name:    "per tier per day",
			budgets: config.Budgets{TierDailyTokens: map[string]config.Tokens{"big": config.Tokens(3 * perCall)}},
			callers: []broker.Caller{{ChickID: "c-1", Channel: "cli/a", Tier: "big"}, {ChickID: "c-2", Channel: "cli/b", Tier: "big"}, {ChickID: "c-3", Channel: "cli/c", Tier: "big"}, {ChickID: "c-4", Channel: "cli/d", Tier: "big"}},
			want:    fmt.Sprintf("tier big used %d of its %d tokens today", 3*perCall, 3*perCall),
			other:   broker.Caller{ChickID: "c-5", Channel: "cli/e", Tier: "local"},
		},
		{
			name:    "per user per day, across channels",
			budgets: config.Budgets{UserDailyTokens: config.Tokens(3 * perCall)},
			callers: []broker.Caller{{ChickID: "c-1", Channel: "cli/a", Tier: "big", User: "slack/alice"}, {ChickID: "c-2", Channel: "slack/C1", Tier: "big", User: "slack/alice"}, {ChickID: "c-3", Channel: "slack/C2", Tier: "big", User: "slack/alice"}, {ChickID: "c-4", Channel: "slack/C3", Tier: "big", User: "slack/alice"}},
			want:    fmt.Sprintf("user slack/alice used %d of their %d chick tokens today", 3*perCall, 3*perCall),
			// The same user id on another adapter is another person.
			other: broker.Caller{ChickID: "c-5", Channel: "slack/C1", Tier: "big", User: "discord/alice"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := ollamatest.NewFunc(exact)
			defer fake.Close()
			dir := t.TempDir()
			clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.Local))
			b := setup(t, tc.budgets, dir, clk, fake)
			last := len(tc.callers) - 1
			for i, c := range tc.callers[:last] {
				if err := call(t, b, c); err != nil {
					t.Fatalf("call %d: %v", i+1, err)
				}
			}
			err := call(t, b, tc.callers[last])
			if !errors.Is(err, model.ErrBudgetExhausted) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("call past the budget: %v, want %q", err, tc.want)
			}
			if got := fake.Requests()[0].Model; got != "big-model" {
				t.Errorf("provider called with model %q, want the tier's (never the chick's choice)", got)
			}
			must(t, call(t, b, tc.other))
			calls := len(fake.Requests())

			// Restart: the ledger is read back; nothing is forgotten.
			must(t, b.Close())
			b = setup(t, tc.budgets, dir, clk, fake)
			if err := call(t, b, tc.callers[last]); !errors.Is(err, model.ErrBudgetExhausted) {
				t.Errorf("after a restart the budget is forgotten: %v", err)
			}
			if len(fake.Requests()) != calls {
				t.Errorf("a refused call reached the provider")
			}
			// The next day the daily budgets start over; a chick's own
			// does not.
			clk.Advance(24 * time.Hour)
			err = call(t, b, tc.callers[last])
			if tc.budgets.ChickTokens > 0 {
				if !errors.Is(err, model.ErrBudgetExhausted) {
					t.Errorf("next day, per-chick budget: %v", err)
				}
			} else if err != nil {
				t.Errorf("next day, daily budget: %v", err)
			}
		})
	}
}

func rep(c broker.Caller, n int) []broker.Caller {
	out := make([]broker.Caller, n)
	for i := range out {
		out[i] = c
	}
	return out
}

func TestLedgerIsDurable(t *testing.T) {
	t.Parallel()
	fake := ollamatest.NewFunc(func(ollamatest.Request) ollamatest.Turn {
		return ollamatest.Turn{Text: "ok", PromptTokens: 60, OutputTokens: 40}
	})
	defer fake.Close()
	dir := t.TempDir()
	clk := clock.NewFake(time.Date(2026, 3, 1, 23, 59, 0, 0, time.Local))
	b := setup(t, config.Budgets{}, dir, clk, fake)
	c := broker.Caller{ChickID: "c-1", Channel: "cli/a", Tier: "big"}
	must(t, call(t, b, c))
	clk.Advance(2 * time.Minute) // past midnight: a chick spans two days
	must(t, call(t, b, c))
	days, _ := filepath.Glob(filepath.Join(dir, "usage", "*.jsonl"))
	if len(days) != 2 {
		t.Fatalf("ledger files %v, want one per day", days)
	}
	// A torn last line (a crash mid-append) is repaired, not fatal.
	f, err := os.OpenFile(days[1], os.O_APPEND|os.O_WRONLY, 0o600)
	must(t, err)
	f.WriteString(`{"ts":"2026-03-02T00:01:00Z","chick":"c-1","in":`)
	f.Close()
	must(t, b.Close())
	b = setup(t, config.Budgets{}, dir, clk, fake)
	if u := b.ChickUsage("c-1"); u.InputTokens != 120 || u.OutputTokens != 80 {
		t.Errorf("c-1 after restart: %+v, want 120 in / 80 out from both days", u)
	}
	found := false
	for _, bs := range b.Budgets() {
		if bs.Scope == "channel cli/a today" && bs.Used == 100 {
			found = true
		}
	}
	if !found {
		t.Errorf("today's channel usage: %+v, want cli/a at 100", b.Budgets())
	}
	// Forgotten (the hatchery no longer remembers the chick): its totals
	// go from memory, the day's budgets and the ledger stay.
	b.ForgetChick("c-1")
	if u, n := b.ChickUsage("c-1"), b.ChickCalls("c-1"); u.Total() != 0 || n != 0 {
		t.Errorf("c-1 after ForgetChick: %+v, %d calls; want none kept", u, n)
	}
	found = false
	for _, bs := range b.Budgets() {
		if bs.Scope == "channel cli/a today" && bs.Used == 100 {
			found = true
		}
	}
	if !found {
		t.Errorf("today's channel usage after ForgetChick: %+v, want cli/a still at 100", b.Budgets())
	}
}

func TestProviderErrorsPassThroughUnmetered(t *testing.T) {
	t.Parallel()
	fake := ollamatest.New(ollamatest.Turn{Status: 404, Error: "model 'big-model' not found"})
	defer fake.Close()
	clk := clock.NewFake(time.Now())
	b := setup(t, config.Budgets{}, t.TempDir(), clk, fake)
	err := call(t, b, broker.Caller{ChickID: "c-1", Channel: "cli/local", Tier: "big"})
	if !errors.Is(err, model.ErrModelNotFound) {
		t.Errorf("err = %v, want model not found", err)
	}
	if u := b.ChickUsage("c-1"); u.Total() != 0 {
		t.Errorf("failed call metered: %+v", u)
	}
	if err := call(t, b, broker.Caller{ChickID: "c-1", Channel: "cli/local", Tier: "nope"}); err == nil || !strings.Contains(err.Error(), "unknown tier") {
		t.Errorf("unknown tier: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestAnthropicTier: a chick on a Claude tier gets its answer through the
// broker, which calls Anthropic with the key only Mother holds.
func TestAnthropicTier(t *testing.T) {
	t.Parallel()
	fake := anthropictest.New(anthropictest.Turn{Text: "Claude here.", InputTokens: 12, OutputTokens: 3})
	defer fake.Close()
	cfg := &config.Config{}
	cfg.Providers.Anthropic = config.Anthropic{APIKey: anthropictest.APIKey, BaseURL: fake.URL}
	cfg.SetDefaults("")
	cfg.Chicks.Tiers["claude"] = config.Tier{Provider: "anthropic", Model: "claude-sonnet-4-5"}
	b, err := broker.New(broker.Options{Config: cfg, Dir: t.TempDir(), Providers: func(name string) (model.Provider, error) {
		return providers.New(cfg.Providers, name, nil)
	}})
	must(t, err)
	defer b.Close()
	var deltas strings.Builder
	resp, err := b.Generate(t.Context(), broker.Caller{ChickID: "c-1", Channel: "cli/a", Tier: "claude"},
		model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}, func(d model.Delta) { deltas.WriteString(d.Text) })
	must(t, err)
	if resp.Message.Content != "Claude here." || deltas.String() != "Claude here." || resp.Usage.Total() != 15 {
		t.Errorf("answer %+v, deltas %q", resp, deltas.String())
	}
	reqs := fake.Requests()
	if len(reqs) != 1 || reqs[0].Model != "claude-sonnet-4-5" || reqs[0].Header.Get("x-api-key") != anthropictest.APIKey {
		t.Errorf("Anthropic saw %+v", reqs)
	}
	if u := b.ChickUsage("c-1"); u.InputTokens != 12 || u.OutputTokens != 3 {
		t.Errorf("metered %+v", u)
	}
}

// TestUserDailyBudget: budgets.userDailyTokens counts a requester's chicks
// across channels, says when it resets, ignores chicks no person asked
// for, survives a restart (the ledger is read back) and starts over at
// local midnight.
func TestUserDailyBudget(t *testing.T) {
	t.Parallel()
	fake := ollamatest.NewFunc(exact)
	defer fake.Close()
	dir := t.TempDir()
	budgets := config.Budgets{UserDailyTokens: config.Tokens(3 * perCall)}
	clk := clock.NewFake(time.Date(2026, 3, 1, 23, 30, 0, 0, time.Local))
	b := setup(t, budgets, dir, clk, fake)
	alice := "discord/alice"
	must(t, b.CheckUser(alice))
	for i, ch := range []string{"discord/a", "discord/b", "discord/c"} {
		must(t, call(t, b, broker.Caller{ChickID: fmt.Sprintf("c-%d", i), Channel: ch, Tier: "big", User: alice}))
	}
	// An event's chick (no requester) spends nobody's budget, and is not
	// refused by it.
	event := broker.Caller{ChickID: "c-ev", Channel: "discord/a", Tier: "big"}
	must(t, call(t, b, event))
	must(t, b.CheckUser(""))

	checkRefused := func(when string) {
		t.Helper()
		err := b.CheckUser(alice)
		want := []string{fmt.Sprintf("user discord/alice used %d of their %d chick tokens today", 3*perCall, 3*perCall), "budgets.userDailyTokens", "resets at 00:00 ", "(2026-03-02)"}
		if !errors.Is(err, model.ErrBudgetExhausted) {
			t.Fatalf("%s: CheckUser(%q) = %v, want a budget error", when, alice, err)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: CheckUser(%q) = %q, want it to contain %q", when, alice, err, w)
			}
		}
		calls := len(fake.Requests())
		if err := call(t, b, broker.Caller{ChickID: "c-new", Channel: "discord/z", Tier: "big", User: alice}); !errors.Is(err, model.ErrBudgetExhausted) {
			t.Errorf("%s: a call of alice's chick: %v, want refused", when, err)
		}
		if len(fake.Requests()) != calls {
			t.Errorf("%s: a refused call reached the provider", when)
		}
	}
	checkRefused("first day")
	if err := b.CheckUser(alice); err == nil || !strings.Contains(err.Error(), "in 30m0s") {
		t.Errorf("CheckUser at 23:30 = %v, want it to reset in 30m0s", err)
	}
	must(t, b.CheckUser("slack/alice"))
	must(t, call(t, b, event))
	found := false
	for _, bs := range b.Budgets() {
		if bs.Kind == "user" && bs.Name == alice && bs.Used == 3*perCall && bs.Limit == 3*perCall && bs.Reserved == 0 && bs.Scope == "user discord/alice today" {
			found = true
		}
		if bs.Kind == "user" && bs.Name != alice {
			t.Errorf("budget of a user who spent nothing: %+v", bs)
		}
	}
	if !found {
		t.Errorf("Budgets() = %+v, want discord/alice at %d of %d", b.Budgets(), 3*perCall, 3*perCall)
	}

	// Restart: the ledger is read back.
	must(t, b.Close())
	b = setup(t, budgets, dir, clk, fake)
	checkRefused("after a restart")

	// Past local midnight the budget starts over.
	clk.Advance(31 * time.Minute)
	must(t, b.CheckUser(alice))
	must(t, call(t, b, broker.Caller{ChickID: "c-0", Channel: "discord/a", Tier: "big", User: alice}))
	must(t, b.Close())
	b = setup(t, budgets, dir, clk, fake)
	for _, bs := range b.Budgets() {
		if bs.Kind == "user" && bs.Name == alice && bs.Used != perCall {
			t.Errorf("the next day after a restart: %+v, want %d (only today's call)", bs, perCall)
		}
	}
}

func TestResetAt(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		now  time.Time
		want time.Time
	}{
		{"evening", time.Date(2026, 3, 1, 23, 59, 0, 0, time.Local), time.Date(2026, 3, 2, 0, 0, 0, 0, time.Local)},
		{"just after midnight", time.Date(2026, 3, 2, 0, 0, 1, 0, time.Local), time.Date(2026, 3, 3, 0, 0, 0, 0, time.Local)},
		{"end of the year", time.Date(2026, 12, 31, 12, 0, 0, 0, time.Local), time.Date(2027, 1, 1, 0, 0, 0, 0, time.Local)},
	}
	for _, tc := range cases {
		if got := broker.ResetAt(tc.now); !got.Equal(tc.want) {
			t.Errorf("%s: ResetAt(%v) = %v, want %v", tc.name, tc.now, got, tc.want)
		}
	}
}
