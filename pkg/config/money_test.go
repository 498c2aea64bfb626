package config

import (
	"strings"
	"testing"
)

func TestUSD(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want USD
	}{
		{`1.5`, 1_500_000}, {`"$1.50"`, 1_500_000}, {`"0.25"`, 250_000}, {`0`, 0},
		{`0.000001`, 1}, {`"unlimited"`, USDUnlimited}, {`"Unlimited"`, USDUnlimited}, {`12`, 12_000_000},
	} {
		var u USD
		if err := u.UnmarshalJSON([]byte(tc.in)); err != nil || u != tc.want {
			t.Errorf("USD(%s) = %d, %v; want %d", tc.in, u, err, tc.want)
		}
	}
	for _, in := range []string{`-1`, `"lots"`, `"-$2"`, `true`} {
		var u USD
		if err := u.UnmarshalJSON([]byte(in)); err == nil {
			t.Errorf("USD(%s) = %d, no error", in, u)
		}
	}
	for micro, want := range map[int64]string{0: "$0.00", 1_500_000: "$1.50", 4_200: "$0.0042", 1: "$0.000001", 9_999: "$0.009999", 10_000: "$0.01", 999_999_999: "$1000.00", 12_345_678: "$12.35", -250_000: "-$0.25"} {
		if got := FormatMicroUSD(micro); got != want {
			t.Errorf("FormatMicroUSD(%d) = %q, want %q", micro, got, want)
		}
	}
	if b, _ := USD(1_500_000).MarshalJSON(); string(b) != "1.5" {
		t.Errorf("marshal = %s", b)
	}
	if b, _ := USDUnlimited.MarshalJSON(); string(b) != `"unlimited"` {
		t.Errorf("marshal unlimited = %s", b)
	}
}

func TestPriceMicroUSD(t *testing.T) {
	t.Parallel()
	p := Price{InputPerMTok: 3, OutputPerMTok: 15}
	// 1,000 in at $3/MTok and 100 out at $15/MTok: 3,000 + 1,500 micro-dollars.
	if got := p.MicroUSD(1000, 100); got != 4500 {
		t.Errorf("cost = %d", got)
	}
	// A fraction of a micro-dollar is rounded up: a cost is never shown
	// or charged smaller than it is.
	if got := (Price{InputPerMTok: 0.1}).MicroUSD(3, 0); got != 1 {
		t.Errorf("cost of 3 tokens at $0.10/MTok = %d, want 1", got)
	}
	if got := (Price{}).MicroUSD(1e6, 1e6); got != 0 {
		t.Errorf("free model costs %d", got)
	}
}

func TestPriceOf(t *testing.T) {
	t.Parallel()
	cfg, err := load(t, `{
	  "providers": {"anthropic": {"apiKey": "k"}, "openai": {"router": {"baseURL": "http://127.0.0.1:1/v1"}}},
	  "prices": {
	    "anthropic/claude-haiku-4-5": {"inputPerMTok": 0.5, "outputPerMTok": 2},
	    "ollama/*": {"inputPerMTok": 0.02, "outputPerMTok": 0.1},
	    "ollama/big": {"inputPerMTok": 0.2, "outputPerMTok": 1},
	    "openai/qwen/qwen3-coder": {"inputPerMTok": 0.3, "outputPerMTok": 1.2}
	  },
	  "chicks": {"tiers": {"claude": {"provider": "anthropic", "model": "claude-sonnet-4-5", "price": {"inputPerMTok": 9, "outputPerMTok": 9}},
	                       "local": {"provider": "ollama", "model": "qwen3:14b"}}}
	}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		provider, model string
		want            Price
		known           bool
	}{
		{"anthropic", "claude-haiku-4-5", Price{0.5, 2}, true},          // configured wins over the default
		{"anthropic", "claude-sonnet-4-5", Price{3, 15}, true},          // the default list price
		{"anthropic", "claude-sonnet-4-5-20250929", Price{3, 15}, true}, // a dated id
		{"anthropic", "claude-opus-4-5", Price{5, 25}, true},            //
		{"anthropic", "claude-test", Price{}, false},                    // unknown: free
		{"ollama", "big", Price{0.2, 1}, true},                          // the model's own
		{"ollama", "qwen3:14b", Price{0.02, 0.1}, true},                 // the provider's "*"
		{"openai:router", "qwen/qwen3-coder", Price{0.3, 1.2}, true},    // "openai" is the only endpoint
		{"openai", "other", Price{}, false},                             //
	} {
		got, known := cfg.PriceOf(tc.provider, tc.model)
		if got != tc.want || known != tc.known {
			t.Errorf("PriceOf(%s, %s) = %+v, %v; want %+v, %v", tc.provider, tc.model, got, known, tc.want, tc.known)
		}
	}
	if p, _ := cfg.TierPrice("claude"); p != (Price{9, 9}) {
		t.Errorf("the tier's own price = %+v", p)
	}
	if p, _ := cfg.TierPrice("local"); p != (Price{0.02, 0.1}) {
		t.Errorf("the local tier's price = %+v", p)
	}
	if cfg.Budgets.Mother.EventDailyUSD != DefaultEventDailyUSD || cfg.Model.MaxOutputTokens != 8192 {
		t.Errorf("defaults: event cap %s, Mother's output limit %d", cfg.Budgets.Mother.EventDailyUSD, cfg.Model.MaxOutputTokens)
	}
}

func TestMoneyConfigErrorsNameTheField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ body, want string }{
		{`{"prices": {"claude-sonnet-4-5": {"inputPerMTok": 3}}}`, `prices.claude-sonnet-4-5: the key must be "<provider>/<model>"`},
		{`{"prices": {"gemini/flash": {"inputPerMTok": 3}}}`, `prices.gemini/flash: unknown provider "gemini"`},
		{`{"prices": {"openai:x/m": {"inputPerMTok": 3}}}`, `prices.openai:x/m: "openai:x": providers.openai has no endpoint`},
		{`{"prices": {"ollama/m": {"inputPerMTok": -3}}}`, `prices.ollama/m: must not be negative`},
		{`{"prices": {"ollama/m": {"inputPerMToken": 3}}}`, `prices.ollama/m.inputPerMToken: unknown field (did you mean "inputPerMTok"?`},
		{`{"budgets": {"channelDailyUSD": "lots"}}`, `budgets.channelDailyUSD: "lots" is not an amount of US dollars`},
		{`{"budgets": {"channelDailyUSD": -2}}`, `budgets.channelDailyUSD: -2 is not an amount of US dollars`},
		{`{"budgets": {"mother": {"dailyUSDs": 2}}}`, `budgets.mother.dailyUSDs: unknown field (did you mean "dailyUSD"?`},
		{`{"budgets": {"mother": {"eventDailyUSD": 0.001}}}`, `budgets.mother.eventDailyUSD: $0.001 is less than a cent`},
		{`{"budgets": {"mother": {"eventDailyTokens": -1}}}`, `budgets.mother.eventDailyTokens: must not be negative`},
		{`{"budgets": {"tierDailyUSD": {"gpu": 5}}}`, `budgets.tierDailyUSD.gpu: unknown tier "gpu"`},
		{`{"model": {"maxOutputTokens": -5}}`, `model.maxOutputTokens: must be positive`},
	} {
		_, err := load(t, tc.body, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v; want it to contain %q", tc.body, err, tc.want)
		}
	}
	cfg, err := load(t, `{"budgets": {"mother": {"eventDailyUSD": "unlimited", "dailyUSD": "$2"}}}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Budgets.Mother.EventDailyUSD.Capped() || cfg.Budgets.Mother.DailyUSD != 2_000_000 {
		t.Errorf("mother budgets = %+v", cfg.Budgets.Mother)
	}
}
