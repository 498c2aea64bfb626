package hatchery_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/docker"
	"github.com/mother-chat/mother/pkg/hatchery/docker/enginetest"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/ollama"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// limitsHatchery is a hatchery on a fake engine whose container creates
// hang, with one slot: the first chick holds it (starting) and every later
// one waits in the queue, so none of them ends by itself. meter may be nil.
func limitsHatchery(t *testing.T, cfg *config.Config, meter hatchery.Meter) *hatchery.Hatchery {
	t.Helper()
	e := enginetest.New(t)
	e.On(http.MethodPost, "/containers/create", enginetest.Hang())
	c, err := client.NewClientWithOpts(client.WithHost(e.Host), client.WithAPIVersionNegotiation())
	must(t, err)
	cfg.Chicks.MaxConcurrent = 1
	h, err := hatchery.New(hatchery.Options{
		Config: cfg, Dir: t.TempDir(), Logger: testLogger(t), DockerTimeout: time.Hour, ProbeInterval: time.Hour, Meter: meter,
		Hosts: []hatchery.Host{{Name: "fake", Runtime: docker.New(c), Capacity: 1, MotherAddress: "127.0.0.1:1"}},
	})
	must(t, err)
	t.Cleanup(func() {
		e.Close() // the hung create ends, so Close does not wait for it
		h.Close()
	})
	return h
}

// TestMaxPerUser: chicks.maxPerUser counts a person's running and queued
// chicks across channels; the same user id on another adapter is another
// person; chicks of events count against no one; once one of the
// person's chicks ends, they may start another.
func TestMaxPerUser(t *testing.T) {
	t.Parallel()
	cfg := testConfig("mother-chick:fake")
	cfg.Chicks.MaxPerUser = 2
	cfg.Chicks.MaxPerChannel = 10
	h := limitsHatchery(t, cfg, nil)
	spawn := func(adapter, channel, user string) (hatchery.Info, error) {
		return h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: adapter, ChannelID: channel, StartedBy: user, Goal: "work"})
	}
	// An event's chick first: it takes the one slot.
	ev, err := spawn("slack", "C1", "")
	must(t, err)
	a1, err := spawn("slack", "C1", "U1")
	must(t, err)
	a2, err := spawn("slack", "C2", "U1")
	must(t, err)
	if a1.State != hatchery.StateQueued || a2.State != hatchery.StateQueued {
		t.Fatalf("U1's chicks are %s and %s, want queued behind the event's", a1.State, a2.State)
	}
	_, err = spawn("slack", "C3", "U1")
	var refused *hatchery.RefusedError
	if !errors.Is(err, hatchery.ErrUserLimit) || !errors.As(err, &refused) {
		t.Fatalf("third chick of slack/U1: %v, want a RefusedError matching ErrUserLimit", err)
	}
	for _, w := range []string{"slack/U1 already has 2 chicks running or queued", a1.ID, a2.ID, "chicks.maxPerUser is 2", "another can start when one of them ends"} {
		if !strings.Contains(refused.Reason, w) {
			t.Errorf("refusal %q lacks %q", refused.Reason, w)
		}
	}
	if n := len(h.List(true)); n != 3 {
		t.Errorf("%d chicks after the refusal, want 3 (the refused one is not queued)", n)
	}
	// Another person, the same id on another adapter, and more events'
	// chicks are not held back by U1's cap.
	for _, s := range []struct{ adapter, channel, user string }{{"slack", "C1", "U2"}, {"discord", "C1", "U1"}, {"slack", "C1", ""}, {"slack", "C2", ""}} {
		if _, err := spawn(s.adapter, s.channel, s.user); err != nil {
			t.Errorf("spawn for %s/%q in %s: %v", s.adapter, s.user, s.channel, err)
		}
	}
	// U1's first chick ends: there is room for one more, and only one.
	st, err := h.Stop(a1.ID, hatchery.ReasonKilled, "cancelled", 0)
	if err != nil || !st.Final() {
		t.Fatalf("stop of a queued chick: %s, %v; want it ended at once", st, err)
	}
	if _, err := spawn("slack", "C3", "U1"); err != nil {
		t.Errorf("U1 after one of their chicks ended: %v", err)
	}
	if _, err := spawn("slack", "C4", "U1"); !errors.Is(err, hatchery.ErrUserLimit) {
		t.Errorf("U1 at the cap again: %v, want ErrUserLimit", err)
	}
	if h.State(ev.ID).Final() {
		t.Errorf("the event's chick ended: %s", h.State(ev.ID))
	}
}

// TestMaxPerUserZeroIsNoCap: the default 0 lets a person have as many
// chicks as the other caps allow.
func TestMaxPerUserZeroIsNoCap(t *testing.T) {
	t.Parallel()
	cfg := testConfig("mother-chick:fake")
	h := limitsHatchery(t, cfg, nil)
	for i := range 5 {
		if _, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "slack", ChannelID: "C1", StartedBy: "U1", Goal: "work"}); err != nil {
			t.Fatalf("spawn %d: %v", i+1, err)
		}
	}
}

// TestUserDailyBudgetRefusesSpawn: with the broker as the meter, a person
// who spent today's budgets.userDailyTokens cannot start a chick; the
// refusal says when the budget resets. Others still can.
func TestUserDailyBudgetRefusesSpawn(t *testing.T) {
	t.Parallel()
	// The call reserves its prompt's estimate plus the tier's 30 output
	// tokens, and costs exactly that: the budget holds it and no more.
	goReq := model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "go"}}}
	in := broker.EstimateInput(goReq)
	fake := ollamatest.NewFunc(func(ollamatest.Request) ollamatest.Turn {
		return ollamatest.Turn{Text: "ok", PromptTokens: int(in), OutputTokens: 30}
	})
	defer fake.Close()
	cfg := testConfig("mother-chick:fake")
	tier := cfg.Chicks.Tiers[cfg.Chicks.DefaultTier]
	tier.MaxOutputTokens = 30
	cfg.Chicks.Tiers[cfg.Chicks.DefaultTier] = tier
	cfg.Budgets.UserDailyTokens = config.Tokens(in + 30)
	clk := clock.NewFake(time.Date(2026, 3, 1, 18, 0, 0, 0, time.Local))
	br, err := broker.New(broker.Options{Config: cfg, Dir: t.TempDir(), Clock: clk, Providers: func(string) (model.Provider, error) {
		return ollama.New(fake.URL, nil)
	}})
	must(t, err)
	defer br.Close()
	h := limitsHatchery(t, cfg, br)
	spawn := func(user string) error {
		_, err := h.Spawn(t.Context(), hatchery.SpawnRequest{Adapter: "telegram", ChannelID: "42", StartedBy: user, Goal: "work"})
		return err
	}
	must(t, spawn("7"))
	_, err = br.Generate(t.Context(), broker.Caller{ChickID: "c-old", Channel: "telegram/42", Tier: cfg.Chicks.DefaultTier, User: "telegram/7"}, goReq, nil)
	must(t, err)
	err = spawn("7")
	var refused *hatchery.RefusedError
	if !errors.Is(err, model.ErrBudgetExhausted) || !errors.As(err, &refused) {
		t.Fatalf("spawn after the budget is spent: %v, want a RefusedError matching ErrBudgetExhausted", err)
	}
	for _, w := range []string{fmt.Sprintf("user telegram/7 used %d of their %d chick tokens today", in+30, in+30), "budgets.userDailyTokens", "resets at 00:00 ", "in 6h0m0s"} {
		if !strings.Contains(refused.Reason, w) {
			t.Errorf("refusal %q lacks %q", refused.Reason, w)
		}
	}
	must(t, spawn("8"))
	must(t, spawn("")) // an event's chick
	clk.Advance(6 * time.Hour)
	must(t, spawn("7"))
}
