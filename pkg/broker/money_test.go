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

// The test models' price: $2 per million input tokens, $10 per million
// output tokens, so a token costs 2 or 10 micro-dollars and goReq's call,
// which costs exactly what it reserves, costs perCallMicro.
var (
	testPrice    = config.Price{InputPerMTok: 2, OutputPerMTok: 10}
	perCallMicro = 2*testIn + 10*testOut
)

// priced gives the test tier "big" and Mother's model ("mother-m" on
// ollama, output limit testOut) testPrice.
func priced(cfg *config.Config) {
	cfg.Prices = map[string]config.Price{"ollama/big-model": testPrice, "ollama/mother-m": testPrice}
	cfg.Model = config.Model{Provider: "ollama", ID: "mother-m", MaxOutputTokens: testOut}
}

// motherCall makes one call of Mother's model, as caller.
func motherCall(t *testing.T, b *broker.Broker, caller broker.Caller) error {
	t.Helper()
	p, err := b.MotherModel(func(context.Context) broker.Caller { return caller })
	must(t, err)
	req := goReq
	req.Model = "mother-m"
	_, err = p.Chat(t.Context(), req, nil)
	return err
}

// costs sums the costMicroUSD of dir's settlement lines, Mother's and
// the chicks' apart.
func costs(t *testing.T, dir string) (chicks, mother int64) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "usage", "*.jsonl"))
	must(t, err)
	for _, f := range files {
		data, err := os.ReadFile(f)
		must(t, err)
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var e broker.Entry
			must(t, json.Unmarshal([]byte(line), &e))
			switch e.Kind {
			case "":
				chicks += e.Cost
			case broker.KindMother:
				mother += e.Cost
			}
		}
	}
	return chicks, mother
}

// TestMoneyCapsRefuseBeforeTheCall: each money cap, chicks' and Mother's
// own, takes three calls and refuses the fourth before it is sent, naming
// the cap, what was spent, and when it resets; a restart forgets nothing;
// the ledger holds each call's cost; the next day the daily caps start
// over.
func TestMoneyCapsRefuseBeforeTheCall(t *testing.T) {
	t.Parallel()
	three := config.USD(3 * perCallMicro)
	spent := config.FormatMicroUSD(3 * perCallMicro)
	chick := func(id, channel, user string) broker.Caller {
		return broker.Caller{ChickID: id, Channel: channel, Tier: "big", User: user}
	}
	own := func(channel, event string) broker.Caller {
		return broker.Caller{Kind: broker.CallerMother, Channel: channel, Event: event}
	}
	cases := []struct {
		name    string
		budgets config.Budgets
		callers []broker.Caller // the last is refused
		scope   string
		want    string
		other   broker.Caller // still allowed
	}{
		{"chick", config.Budgets{ChickUSD: three}, rep(chick("c-1", "cli/a", ""), 4), "chick",
			"chick c-1 spent " + spent + " of its " + spent + " (budgets.chickUSD)", chick("c-2", "cli/a", "")},
		{"channel, chicks and Mother together", config.Budgets{ChannelDailyUSD: three},
			[]broker.Caller{chick("c-1", "cli/a", ""), own("cli/a", ""), chick("c-2", "cli/a", ""), own("cli/a", "")}, "channel",
			"channel cli/a spent " + spent + " of " + spent + " today (budgets.channelDailyUSD)", own("cli/b", "")},
		{"tier", config.Budgets{TierDailyUSD: map[string]config.USD{"big": three}},
			[]broker.Caller{chick("c-1", "cli/a", ""), chick("c-2", "cli/b", ""), chick("c-3", "cli/c", ""), chick("c-4", "cli/d", "")}, "tier",
			"tier big spent " + spent + " of " + spent + " today (budgets.tierDailyUSD.big)", own("cli/a", "")},
		{"user, their chicks and Mother's answers to them", config.Budgets{UserDailyUSD: three},
			[]broker.Caller{chick("c-1", "cli/a", "slack/U1"), {Kind: broker.CallerMother, Channel: "slack/C1", User: "slack/U1"}, chick("c-2", "slack/C2", "slack/U1"), chick("c-3", "slack/C2", "slack/U1")}, "user",
			"user slack/U1 spent " + spent + " of " + spent + " today (budgets.userDailyUSD)", chick("c-4", "slack/C2", "slack/U2")},
		{"Mother's own per day", config.Budgets{Mother: config.MotherBudgets{DailyUSD: three}},
			[]broker.Caller{own("cli/a", ""), own("cli/b", ""), own("", ""), own("cli/c", "x.json")}, "mother",
			"Mother's own calls spent " + spent + " of " + spent + " today (budgets.mother.dailyUSD)", chick("c-1", "cli/a", "")},
		{"Mother's own per channel", config.Budgets{Mother: config.MotherBudgets{ChannelDailyUSD: three}},
			rep(own("cli/a", ""), 4), "mother-channel",
			"Mother's own calls in channel cli/a spent " + spent + " of " + spent + " today (budgets.mother.channelDailyUSD)", own("cli/b", "")},
		{"an event's runs", config.Budgets{Mother: config.MotherBudgets{EventDailyUSD: three}},
			rep(own("cli/a", "check.json"), 4), "event",
			"event check.json spent " + spent + " of " + spent + " today (budgets.mother.eventDailyUSD)", own("cli/a", "other.json")},
		{"Mother's own tokens per day", config.Budgets{Mother: config.MotherBudgets{DailyTokens: config.Tokens(3 * perCall)}},
			rep(own("cli/a", ""), 4), "mother",
			fmt.Sprintf("Mother's own calls used %d of their %d tokens today (budgets.mother.dailyTokens)", 3*perCall, 3*perCall), chick("c-1", "cli/a", "")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := ollamatest.NewFunc(exact)
			defer fake.Close()
			dir := t.TempDir()
			clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.Local))
			b := setup(t, tc.budgets, dir, clk, fake, priced)
			do := func(c broker.Caller) error {
				if c.Kind == broker.CallerMother {
					return motherCall(t, b, c)
				}
				return call(t, b, c)
			}
			last := len(tc.callers) - 1
			for i, c := range tc.callers[:last] {
				if err := do(c); err != nil {
					t.Fatalf("call %d: %v", i+1, err)
				}
			}
			sent := len(fake.Requests())
			err := do(tc.callers[last])
			var be *model.BudgetError
			if !errors.As(err, &be) || !errors.Is(err, model.ErrBudgetExhausted) || !strings.Contains(err.Error(), tc.want) || be.Scope != tc.scope || be.Unit == "" {
				t.Fatalf("call past the cap: %v (%+v), want a %s cap's refusal saying %q", err, be, tc.scope, tc.want)
			}
			if tc.scope != "chick" && (be.Reset != broker.ResetAt(clk.Now()) || !strings.Contains(err.Error(), "it resets at ")) {
				t.Errorf("a daily cap's refusal says no reset: %v (%v)", err, be.Reset)
			}
			if len(fake.Requests()) != sent {
				t.Fatal("the refused call reached the provider")
			}
			ch, mo := costs(t, dir)
			if ch+mo != 3*perCallMicro {
				t.Errorf("ledger costs: chicks %d + Mother %d, want %d", ch, mo, 3*perCallMicro)
			}
			must(t, do(tc.other))

			// Restart: the ledger is read back.
			must(t, b.Close())
			b = setup(t, tc.budgets, dir, clk, fake, priced)
			if err := do(tc.callers[last]); !errors.Is(err, model.ErrBudgetExhausted) {
				t.Errorf("after a restart the cap is forgotten: %v", err)
			}
			clk.Advance(24 * time.Hour)
			err = do(tc.callers[last])
			if tc.scope == "chick" {
				if !errors.Is(err, model.ErrBudgetExhausted) {
					t.Errorf("next day, a chick's own cap: %v", err)
				}
			} else if err != nil {
				t.Errorf("next day, a daily cap: %v", err)
			}
		})
	}
}

// TestMoneyReservationHoldsCallsInFlight: two chicks' calls in flight
// hold two calls' worth of a channel's money cap, and what is left cannot
// take a third whole call: Mother's is refused as busy, not exhausted, and
// never reaches the provider. Once they settle below their reservation
// (half their output), the money they did not spend is free again and
// her call fits.
func TestMoneyReservationHoldsCallsInFlight(t *testing.T) {
	t.Parallel()
	hold, release := make(chan struct{}, 2), make(chan struct{})
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		if r.LastUser() == "go" && r.Model == "big-model" {
			hold <- struct{}{}
			<-release
			// Half the output it reserved.
			return ollamatest.Turn{Text: "ok", PromptTokens: int(testIn), OutputTokens: testOut / 2}
		}
		return exact(r)
	})
	defer fake.Close()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.Local))
	limit := 3*perCallMicro - 400
	b := setup(t, config.Budgets{ChannelDailyUSD: config.USD(limit)}, t.TempDir(), clk, fake, priced)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			if err := call(t, b, broker.Caller{ChickID: fmt.Sprint("c-", i), Channel: "cli/a", Tier: "big"}); err != nil {
				t.Error(err)
			}
		})
	}
	<-hold
	<-hold
	err := motherCall(t, b, broker.Caller{Channel: "cli/a"})
	if !errors.Is(err, model.ErrBusy) || !model.IsTransient(err) || errors.Is(err, model.ErrBudgetExhausted) {
		t.Fatalf("a call while the cap is held: %v, want busy", err)
	}
	if !strings.Contains(err.Error(), "channel cli/a has "+config.FormatMicroUSD(limit)+" of its") {
		t.Errorf("busy error: %v", err)
	}
	close(release)
	wg.Wait()
	// Two calls spent 2*(2*testIn + 10*testOut/2) = limit - perCallMicro:
	// there is room for one more whole call.
	must(t, motherCall(t, b, broker.Caller{Channel: "cli/a"}))
	for _, bs := range b.Budgets() {
		if bs.Kind == "channel" && bs.Name == "cli/a" {
			want := 2*(2*testIn+5*testOut) + perCallMicro
			if bs.UsedMicroUSD != want || bs.ReservedMicroUSD != 0 || bs.LimitMicroUSD != limit {
				t.Errorf("channel budget = %+v, want %d used of %d", bs, want, limit)
			}
			// Mother's tokens are not the chicks' channel tokens.
			if bs.Used != 2*(testIn+testOut/2) {
				t.Errorf("channel tokens = %d, want the chicks' only (%d)", bs.Used, 2*(testIn+testOut/2))
			}
		}
	}
}

// TestEveryModelOfAFallbackChainIsMetered: Mother's model on Anthropic,
// overloaded, with a local fallback. The overloaded attempt is reserved at
// Anthropic's price (and refused before it is sent once the cap cannot
// take it), released at no cost (the provider refused it), and the
// fallback's call settles at the fallback's own price.
func TestEveryModelOfAFallbackChainIsMetered(t *testing.T) {
	t.Parallel()
	claude := anthropictest.NewFunc(func(anthropictest.Request) anthropictest.Turn {
		return anthropictest.Turn{Status: 529, ErrorType: "overloaded_error", Error: "Overloaded"}
	})
	defer claude.Close()
	local := ollamatest.NewFunc(exact)
	defer local.Close()
	dir := t.TempDir()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.Local))
	cfg := &config.Config{}
	cfg.Providers.Anthropic = config.Anthropic{APIKey: anthropictest.APIKey, BaseURL: claude.URL}
	cfg.Providers.Ollama.URL = local.URL
	cfg.SetDefaults("")
	cfg.Model = config.Model{Provider: "anthropic", ID: "claude-sonnet-4-5", MaxOutputTokens: testOut, Fallbacks: []config.Fallback{{Provider: "ollama", Model: "mother-m"}}}
	cfg.Prices = map[string]config.Price{"ollama/mother-m": testPrice}
	set := providers.NewSet(cfg.Providers, clk, nil)
	// Anthropic's list price (3 and 15) is the default. The cap takes an
	// Anthropic reservation on top of one fallback call, but not three
	// fallback calls.
	claudeRes := 3*testIn + 15*testOut
	cfg.Budgets.Mother.DailyUSD = config.USD(claudeRes + perCallMicro)
	b, err := broker.New(broker.Options{Config: cfg, Dir: dir, Clock: clk, Providers: set.Get, Health: set.Health()})
	must(t, err)
	defer b.Close()
	p, err := b.MotherModel(func(context.Context) broker.Caller { return broker.Caller{Channel: "cli/a"} })
	must(t, err)
	req := goReq
	req.Model = "claude-sonnet-4-5"
	resp, err := p.Chat(t.Context(), req, nil)
	if err != nil || resp.AnsweredBy != "ollama/mother-m" {
		t.Fatalf("call = %+v, %v; want the fallback's answer", resp, err)
	}
	if n := len(claude.Requests()); n != 1 {
		t.Fatalf("Anthropic saw %d requests", n)
	}
	var lines []broker.Entry
	files, _ := filepath.Glob(filepath.Join(dir, "usage", "*.jsonl"))
	for _, line := range readLines(t, files[0]) {
		var e broker.Entry
		must(t, json.Unmarshal([]byte(line), &e))
		lines = append(lines, e)
	}
	if len(lines) != 4 || lines[0].Kind != broker.KindMotherReserve || lines[0].Provider != "anthropic" || lines[0].ReserveCost != claudeRes ||
		lines[1].Kind != broker.KindMother || lines[1].Cost != 0 ||
		lines[2].Provider != "ollama" || lines[2].ReserveCost != perCallMicro || lines[3].Cost != perCallMicro || lines[3].Model != "mother-m" {
		t.Errorf("ledger:\n%+v", lines)
	}
	// The second call: Anthropic again (its reservation fits beside the
	// first call's cost), overloaded again, and the fallback.
	if _, err := p.Chat(t.Context(), req, nil); err != nil {
		t.Fatalf("second call: %v", err)
	}
	if n := len(claude.Requests()); n != 2 {
		t.Fatalf("Anthropic saw %d requests", n)
	}
	// A third (Anthropic is cooling down after two failures, so the
	// fallback is asked first): the cap cannot take it, and nothing is
	// sent.
	before := len(claude.Requests()) + len(local.Requests())
	if _, err := p.Chat(t.Context(), req, nil); !errors.Is(err, model.ErrBudgetExhausted) {
		t.Fatalf("third call: %v, want refused", err)
	}
	if after := len(claude.Requests()) + len(local.Requests()); after != before {
		t.Errorf("a refused call reached a provider (%d requests, %d before)", after, before)
	}
}

// TestNoticesOnceEachPerDay: a channel's money cap of five calls. The
// fourth call's settlement brings it to 80%: one notice in the channel.
// The fifth spends it all; the sixth is refused: one "reached" notice.
// Neither comes again that day, after a restart either; the next day they
// do. Mother's own daily cap is said for the admins, in the channel of
// the call.
func TestNoticesOnceEachPerDay(t *testing.T) {
	t.Parallel()
	fake := ollamatest.NewFunc(exact)
	defer fake.Close()
	dir := t.TempDir()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.Local))
	budgets := config.Budgets{ChannelDailyUSD: config.USD(5 * perCallMicro), Mother: config.MotherBudgets{DailyUSD: config.USD(5 * perCallMicro)}}
	var (
		mu    sync.Mutex
		heard []broker.Notice
	)
	listen := func(b *broker.Broker) {
		b.SetNotifier(func(n broker.Notice) { mu.Lock(); heard = append(heard, n); mu.Unlock() })
	}
	take := func() []broker.Notice {
		mu.Lock()
		defer mu.Unlock()
		out := heard
		heard = nil
		return out
	}
	b := setup(t, budgets, dir, clk, fake, priced)
	listen(b)
	c := broker.Caller{ChickID: "c-1", Channel: "cli/a", Tier: "big"}
	for i := 1; i <= 3; i++ {
		must(t, call(t, b, c))
	}
	if n := take(); len(n) != 0 {
		t.Fatalf("notices at 60%%: %+v", n)
	}
	must(t, call(t, b, c))
	n := take()
	if len(n) != 1 || n[0].Level != 80 || n[0].Scope != "channel" || n[0].Channel != "cli/a" || n[0].Admins || n[0].Field != "budgets.channelDailyUSD" ||
		!strings.Contains(n[0].Text, "This channel has used 80% of its daily cap") || !strings.Contains(n[0].Text, "until it resets at 00:00") {
		t.Fatalf("at 80%%: %+v", n)
	}
	must(t, call(t, b, c))
	if n := take(); len(n) != 0 {
		t.Errorf("the 80%% notice again: %+v", n)
	}
	for range 2 {
		if err := call(t, b, c); !errors.Is(err, model.ErrBudgetExhausted) {
			t.Fatalf("past the cap: %v", err)
		}
	}
	n = take()
	if len(n) != 1 || n[0].Level != 100 || !strings.Contains(n[0].Text, "Spend cap reached: This channel has used "+config.FormatMicroUSD(5*perCallMicro)) {
		t.Fatalf("at the cap: %+v", n)
	}
	// Mother's own calls elsewhere: at 80% of her own cap (4 calls), said
	// for the admins where the call was made.
	for range 4 {
		must(t, motherCall(t, b, broker.Caller{Channel: "cli/b"}))
	}
	// They count against cli/b's money cap too, which is at 80% with
	// them: said there, for everyone.
	n = take()
	if len(n) != 2 || n[0].Scope != "mother" || !n[0].Admins || n[0].Channel != "cli/b" || !strings.Contains(n[0].Text, "My own model use has used 80%") ||
		n[1].Scope != "channel" || n[1].Name != "cli/b" || n[1].Admins {
		t.Fatalf("Mother's own: %+v", n)
	}

	must(t, b.Close())
	b = setup(t, budgets, dir, clk, fake, priced)
	listen(b)
	if err := call(t, b, c); !errors.Is(err, model.ErrBudgetExhausted) {
		t.Fatalf("after a restart: %v", err)
	}
	must(t, motherCall(t, b, broker.Caller{Channel: "cli/b"}))
	if n := take(); len(n) != 0 {
		t.Errorf("notices again after a restart: %+v", n)
	}

	clk.Advance(24 * time.Hour)
	for range 4 {
		must(t, call(t, b, c))
	}
	if n := take(); len(n) != 1 || n[0].Level != 80 {
		t.Errorf("the next day: %+v", n)
	}
}

// TestOldAndForeignLedgerLines: lines an older Mother wrote (no call id,
// no cost) count as tokens at no cost; a line of a kind this Mother does
// not know is skipped; a reservation of Mother's own left without a
// settlement is charged whole, money included, once.
func TestOldAndForeignLedgerLines(t *testing.T) {
	t.Parallel()
	fake := ollamatest.NewFunc(exact)
	defer fake.Close()
	dir := t.TempDir()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.Local))
	must(t, os.MkdirAll(filepath.Join(dir, "usage"), 0o700))
	ts := clk.Now().Add(-time.Hour).Format(time.RFC3339)
	lines := []string{
		`{"ts":"` + ts + `","chick":"c-old","channel":"cli/a","tier":"big","model":"big-model","in":100,"out":20}`,
		`{"ts":"` + ts + `","kind":"from-the-future","channel":"cli/a","in":5000000,"out":0}`,
		fmt.Sprintf(`{"ts":"%s","kind":"mother-reserve","call":"abc","chick":"","channel":"cli/a","tier":"","model":"mother-m","in":0,"out":0,"rin":%d,"rout":%d,"rcostMicroUSD":%d}`, ts, testIn, testOut, perCallMicro),
	}
	must(t, os.WriteFile(filepath.Join(dir, "usage", "2026-03-01.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	budgets := config.Budgets{ChannelDailyTokens: 1000, Mother: config.MotherBudgets{ChannelDailyUSD: config.USD(perCallMicro + perCallMicro/2)}}
	for restart := range 2 {
		b := setup(t, budgets, dir, clk, fake, priced)
		if u := b.ChickUsage("c-old"); u.Total() != 120 {
			t.Errorf("restart %d: the old line counts %d tokens", restart, u.Total())
		}
		for _, bs := range b.Budgets() {
			if bs.Kind == "mother-channel" && bs.Name == "cli/a" && bs.UsedMicroUSD != perCallMicro {
				t.Errorf("restart %d: Mother's channel %+v, want the unsettled call's %d", restart, bs, perCallMicro)
			}
			if bs.Kind == "channel" && bs.Name == "cli/a" && (bs.Used != 120 || bs.UsedMicroUSD != perCallMicro) {
				t.Errorf("restart %d: channel %+v", restart, bs)
			}
		}
		if err := motherCall(t, b, broker.Caller{Channel: "cli/a"}); !errors.Is(err, model.ErrBudgetExhausted) {
			t.Errorf("restart %d: %v, want refused (the unsettled call is charged)", restart, err)
		}
		must(t, b.Close())
	}
	if len(fake.Requests()) != 0 {
		t.Error("a refused call was sent")
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}
