package broker_test

import (
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// bigOutput gives the test tier the default output limit, 8192.
func bigOutput(cfg *config.Config) {
	cfg.Chicks.Tiers["big"] = config.Tier{Provider: "ollama", Model: "big-model", MaxOutputTokens: 8192}
}

// TestOutputClampedToTheBudget: a budget that holds the prompt but not the
// tier's output limit besides sends the call with the output limit
// lowered to what is left (num_predict), in tokens and in money; a
// budget that cannot hold the prompt and 256 tokens refuses it unsent.
func TestOutputClampedToTheBudget(t *testing.T) {
	t.Parallel()
	c := broker.Caller{ChickID: "c-1", Channel: "cli/a", Tier: "big"}
	cases := []struct {
		name    string
		budgets config.Budgets
		want    float64 // num_predict sent; 0: refused
	}{
		{"tokens", config.Budgets{ChickTokens: config.Tokens(testIn + 1000)}, 1000},
		// testIn at 2 micro-dollars, then 10 a token of output.
		{"money", config.Budgets{ChickUSD: config.USD(2*testIn + 10*700 + 5)}, 700},
		{"prompt does not fit", config.Budgets{ChickTokens: config.Tokens(testIn + 255)}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := ollamatest.NewFunc(exact)
			defer fake.Close()
			clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.Local))
			b := setup(t, tc.budgets, t.TempDir(), clk, fake, bigOutput, priced)
			err := call(t, b, c)
			reqs := fake.Requests()
			if tc.want == 0 {
				if err == nil || len(reqs) != 0 {
					t.Fatalf("call: %v with %d requests sent, want a refusal unsent", err, len(reqs))
				}
				return
			}
			if err != nil || len(reqs) != 1 {
				t.Fatalf("call: %v with %d requests sent, want one sent", err, len(reqs))
			}
			if got := reqs[0].Options["num_predict"]; got != tc.want {
				t.Errorf("num_predict = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPromptBoundByTheLastCall: a chick's second call, whose prompt is the
// first's with the answer and a tool result added, is bounded by what the
// first was reported to cost plus the added bytes: it fits a budget its
// byte count alone would not.
func TestPromptBoundByTheLastCall(t *testing.T) {
	t.Parallel()
	long := model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: string(make([]byte, 8000))}}}
	// The model counts 4 bytes a token.
	fake := ollamatest.NewFunc(func(ollamatest.Request) ollamatest.Turn {
		return ollamatest.Turn{Text: "ok", PromptTokens: 2100, OutputTokens: 10}
	})
	defer fake.Close()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.Local))
	// Room for the first call's 8,000-byte bound and 256 output tokens,
	// then for a second call bounded by 2,110 + what was added, not for
	// 8,000 bytes again.
	b := setup(t, config.Budgets{ChickTokens: config.Tokens(broker.EstimateInput(long) + 256 + 2110 + 600)}, t.TempDir(), clk, fake, bigOutput)
	c := broker.Caller{ChickID: "c-1", Channel: "cli/a", Tier: "big"}
	resp, err := b.Generate(t.Context(), c, long, nil)
	must(t, err)
	next := long
	next.Messages = append(append([]model.Message(nil), long.Messages...), resp.Message, model.Message{Role: model.RoleUser, Content: "more"})
	if _, err := b.Generate(t.Context(), c, next, nil); err != nil {
		t.Fatalf("the second call: %v, want it sent (its prompt is bounded by the first's reported tokens)", err)
	}
	// Another chick's call with another prompt gets no such bound.
	other := model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: string(make([]byte, 12000))}}}
	if _, err := b.Generate(t.Context(), broker.Caller{ChickID: "c-2", Channel: "cli/a", Tier: "big"}, other, nil); err == nil {
		t.Errorf("a call of another prompt fitted a budget its bytes do not")
	}
}
