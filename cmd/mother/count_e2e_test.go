package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/model/anthropic/anthropictest"
)

// TestCountMotherCallFitsByTheAPIsCount: Mother on Anthropic with a daily
// cap of 2,000 tokens. Her first prompt (its system prompt alone is over
// 2,000 bytes, and its tools come on top) does not fit by its bytes; the
// API counts it at 500 tokens, so the broker reserves 526 (the count, 2%
// and 16) and sends the call with the 1,474 tokens of output the cap
// leaves. The answer
// reaches the terminal, and the ledger charges what the call reported.
func TestCountMotherCallFitsByTheAPIsCount(t *testing.T) {
	t.Parallel()
	fake := anthropictest.New(anthropictest.Turn{Text: "Hello from Claude.", InputTokens: 500, OutputTokens: 5})
	defer fake.Close()
	fake.SetCounter(func(anthropictest.Request) anthropictest.Count { return anthropictest.Count{InputTokens: 500} })
	data := t.TempDir()
	writeJSON(t, filepath.Join(data, "config.json"), map[string]any{
		"model":     map[string]any{"provider": "anthropic", "id": "claude-sonnet-4-5"},
		"providers": map[string]any{"anthropic": map[string]any{"apiKey": anthropictest.APIKey, "baseURL": fake.URL}},
		"budgets":   map[string]any{"mother": map[string]any{"dailyTokens": 2000}},
	})
	r := runMother(t, "hi\n", nil, "--cli", data)
	if r.code != 0 || !strings.Contains(r.stdout, "Hello from Claude.") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	reqs, counts := fake.Requests(), fake.CountRequests()
	if len(reqs) != 1 || len(counts) != 1 {
		t.Fatalf("%d calls and %d counts, want 1 and 1", len(reqs), len(counts))
	}
	if b := len(reqs[0].SystemText()); b+256 <= 2000 {
		t.Fatalf("the system prompt is %d bytes: the test assumes its bytes alone do not fit the cap", b)
	}
	if reqs[0].MaxTokens != 2000-526 {
		t.Errorf("max_tokens = %d, want %d", reqs[0].MaxTokens, 2000-526)
	}
	if counts[0].SystemText() != reqs[0].SystemText() || len(counts[0].Tools) != len(reqs[0].Tools) || len(counts[0].Tools) == 0 {
		t.Errorf("the count was of another prompt: %d tools, system %d bytes", len(counts[0].Tools), len(counts[0].SystemText()))
	}
	in, out := countMotherCharged(t, data)
	if in != 500 || out != 5 {
		t.Errorf("the ledger charged %d in and %d out, want what the call reported", in, out)
	}
}

// countMotherCharged sums the tokens of data's ledger's settlements of
// Mother's own calls.
func countMotherCharged(t *testing.T, data string) (in, out int64) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(data, "chicks", "usage", "*.jsonl"))
	for _, f := range files {
		for _, line := range readLines(t, f) {
			var l struct {
				Kind string `json:"kind"`
				In   int64  `json:"in"`
				Out  int64  `json:"out"`
			}
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if l.Kind == "mother" {
				in, out = in+l.In, out+l.Out
			}
		}
	}
	return in, out
}
