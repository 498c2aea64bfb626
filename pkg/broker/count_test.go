package broker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/anthropic/anthropictest"
	"github.com/mother-chat/mother/pkg/model/openai/openaitest"
	"github.com/mother-chat/mother/pkg/model/providers"
)

// TestProviderCountsTheTightPrompt: on an Anthropic tier, a call whose
// byte bound would be refused or sent with less than the tier's output
// limit asks /v1/messages/count_tokens, and is reserved and sent by the
// count (plus 2% and 16 tokens); a call with room asks nothing; a count
// that fails, is too slow or says more than the bytes leaves the byte
// bound.
func TestProviderCountsTheTightPrompt(t *testing.T) {
	t.Parallel()
	// 8,000 bytes that Claude counts as 2,000 tokens.
	req := model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: strings.Repeat("word ", 1600)}}}
	bytes := broker.EstimateInput(req)
	const count = 2000
	counted := int64(count + count/50 + 16)
	answer := anthropictest.Count{InputTokens: count}
	failed := anthropictest.Count{Status: 500, ErrorType: "api_error", Error: "Internal server error"}
	cases := []struct {
		name   string
		budget int64
		count  anthropictest.Count
		// sent is the max_tokens sent (0: refused unsent); counts the
		// count requests made.
		sent   int64
		counts int
	}{
		{"room", 1_000_000, answer, 8192, 0},
		{"bytes refuse, the count fits", bytes + 100, answer, bytes + 100 - counted, 1},
		{"bytes clamp, the count leaves more", bytes + 1000, answer, bytes + 1000 - counted, 1},
		{"the count fails, bytes refuse", bytes + 100, failed, 0, 1},
		{"the count fails, bytes clamp", bytes + 1000, failed, 1000, 1},
		{"the count is too slow", bytes + 1000, anthropictest.Count{InputTokens: count, Delay: 10 * time.Second}, 1000, 1},
		{"the count says more than the bytes", bytes + 1000, anthropictest.Count{InputTokens: int(bytes) * 2}, 1000, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := anthropictest.NewFunc(func(anthropictest.Request) anthropictest.Turn {
				return anthropictest.Turn{Text: "ok", InputTokens: count, OutputTokens: 10}
			})
			defer fake.Close()
			fake.SetCounter(func(anthropictest.Request) anthropictest.Count { return tc.count })
			cfg := &config.Config{}
			cfg.Providers.Anthropic = config.Anthropic{APIKey: anthropictest.APIKey, BaseURL: fake.URL}
			cfg.SetDefaults("")
			cfg.Budgets.ChickTokens = config.Tokens(tc.budget)
			cfg.Chicks.Tiers["claude"] = config.Tier{Provider: "anthropic", Model: "claude-sonnet-4-5", MaxOutputTokens: 8192}
			b, err := broker.New(broker.Options{Config: cfg, Dir: t.TempDir(), Providers: func(name string) (model.Provider, error) {
				return providers.New(cfg.Providers, name, nil)
			}})
			must(t, err)
			defer b.Close()
			start := time.Now()
			_, err = b.Generate(t.Context(), broker.Caller{ChickID: "c-1", Channel: "cli/a", Tier: "claude"}, req, nil)
			took := time.Since(start)
			reqs, counts := fake.Requests(), fake.CountRequests()
			if len(counts) != tc.counts {
				t.Errorf("%d count requests, want %d", len(counts), tc.counts)
			}
			if len(counts) > 0 && (counts[0].Model != "claude-sonnet-4-5" || counts[0].LastUserText() != req.Messages[0].Content) {
				t.Errorf("count request %+v", counts[0])
			}
			if tc.sent == 0 {
				if !errors.Is(err, model.ErrBudgetExhausted) || len(reqs) != 0 {
					t.Fatalf("call: %v with %d requests sent, want a refusal unsent", err, len(reqs))
				}
				return
			}
			if err != nil || len(reqs) != 1 {
				t.Fatalf("call: %v with %d requests sent, want one sent", err, len(reqs))
			}
			if got := int64(reqs[0].MaxTokens); got != tc.sent {
				t.Errorf("max_tokens = %d, want %d", got, tc.sent)
			}
			if took > 8*time.Second {
				t.Errorf("the call took %v: the count's wait is not bounded", took)
			}
			if u := b.ChickUsage("c-1"); u != (model.Usage{InputTokens: count, OutputTokens: 10}) {
				t.Errorf("charged %+v, want what the call reported", u)
			}
		})
	}
}

// TestVLLMCountsTheTightPrompt: on a tier of an OpenAI-compatible server,
// vLLM's /tokenize counts a prompt the bytes leave short, and the call is
// sent with the output its count leaves; a server without /tokenize (as
// llama.cpp's answers a chat) is asked once and its calls keep the byte
// bound.
func TestVLLMCountsTheTightPrompt(t *testing.T) {
	t.Parallel()
	req := model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: strings.Repeat("word ", 1600)}}}
	bytes := broker.EstimateInput(req)
	const count = 2000
	counted := int64(count + count/50 + 16)
	for _, tc := range []struct {
		name string
		t    openaitest.Tokenize
		// sent are the output caps of two calls; asked the /tokenize
		// requests they make.
		sent  []int
		asked int
	}{
		{"vllm", openaitest.Tokenize{Count: count}, []int{int(bytes + 1000 - counted), int(bytes + 1000 - counted)}, 2},
		{"llama.cpp", openaitest.Tokenize{LlamaCpp: true}, []int{1000, 1000}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := openaitest.NewFunc(func(openaitest.Request) openaitest.Turn {
				return openaitest.Turn{Text: "ok", Usage: openaitest.Usage{Prompt: count, Completion: 10}}
			})
			defer fake.Close()
			fake.SetTokenize(func(openaitest.Request) openaitest.Tokenize { return tc.t })
			cfg := &config.Config{}
			cfg.Providers.OpenAI = map[string]config.OpenAI{"gpu": {BaseURL: fake.BaseURL()}}
			cfg.SetDefaults("")
			cfg.Chicks.Tiers["gpu"] = config.Tier{Provider: "openai:gpu", Model: "qwen", MaxOutputTokens: 8192}
			// Each chick's own budget: room for one call's byte bound and
			// 1,000 tokens of output.
			cfg.Budgets.ChickTokens = config.Tokens(bytes + 1000)
			b, err := broker.New(broker.Options{Config: cfg, Dir: t.TempDir(), Providers: func(name string) (model.Provider, error) {
				return providers.New(cfg.Providers, name, nil)
			}})
			must(t, err)
			defer b.Close()
			for i := range 2 {
				// Another prompt of the same size each time (a prompt the
				// first call shared would be bounded by its report).
				c := broker.Caller{ChickID: fmt.Sprintf("c-%d", i), Channel: "cli/a", Tier: "gpu"}
				r := model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: strings.Repeat(fmt.Sprintf("w%d.. ", i), 1600)}}}
				_, err := b.Generate(t.Context(), c, r, nil)
				must(t, err)
			}
			reqs := fake.Requests()
			for i, r := range reqs {
				if r.MaxTokens == nil || *r.MaxTokens != tc.sent[i] {
					t.Errorf("call %d: body %.80s..., want max_tokens %d", i, r.Body, tc.sent[i])
				}
			}
			if len(reqs) != 2 || len(fake.TokenizeRequests()) != tc.asked {
				t.Errorf("%d calls and %d tokenize requests, want 2 and %d", len(reqs), len(fake.TokenizeRequests()), tc.asked)
			}
		})
	}
}

// TestGoneWhileCounting: a caller that goes away while the provider
// counts its prompt has nothing sent and is charged nothing.
func TestGoneWhileCounting(t *testing.T) {
	t.Parallel()
	req := model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: strings.Repeat("word ", 1600)}}}
	fake := anthropictest.New()
	defer fake.Close()
	fake.SetCounter(func(anthropictest.Request) anthropictest.Count {
		return anthropictest.Count{InputTokens: 2000, Delay: 10 * time.Second}
	})
	cfg := &config.Config{}
	cfg.Providers.Anthropic = config.Anthropic{APIKey: anthropictest.APIKey, BaseURL: fake.URL}
	cfg.SetDefaults("")
	cfg.Budgets.ChickTokens = config.Tokens(broker.EstimateInput(req) + 100)
	cfg.Chicks.Tiers["claude"] = config.Tier{Provider: "anthropic", Model: "claude-sonnet-4-5", MaxOutputTokens: 8192}
	b, err := broker.New(broker.Options{Config: cfg, Dir: t.TempDir(), Providers: func(name string) (model.Provider, error) {
		return providers.New(cfg.Providers, name, nil)
	}})
	must(t, err)
	defer b.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err = b.Generate(ctx, broker.Caller{ChickID: "c-1", Channel: "cli/a", Tier: "claude"}, req, nil)
	if !errors.Is(err, context.DeadlineExceeded) || len(fake.Requests()) != 0 || len(fake.CountRequests()) != 1 {
		t.Fatalf("call: %v, %d sent, %d counts; want the deadline, nothing sent, one count", err, len(fake.Requests()), len(fake.CountRequests()))
	}
	if u := b.ChickUsage("c-1"); u.Total() != 0 {
		t.Errorf("charged %+v for a call never sent", u)
	}
}
