package broker_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// TestRecallEmbedMetered: an embedding call through the broker (the real
// Ollama client against the wire fake's /api/embed) is reserved before it
// is sent and settled after, in the ledger as kind embed-reserve and
// embed, charged to Mother's day; a call that would pass Mother's daily
// token cap is refused before it reaches the server; a restart reads the
// embed lines back into her day.
func TestRecallEmbedMetered(t *testing.T) {
	t.Parallel()
	fake := ollamatest.New()
	defer fake.Close()
	dir := t.TempDir()
	clk := clock.NewFake(time.Date(2026, 12, 6, 12, 0, 0, 0, time.Local))
	capped := func(cfg *config.Config) { cfg.Budgets.Mother.DailyTokens = 1000 }
	b := setup(t, config.Budgets{}, dir, clk, fake, capped)
	e, err := b.Embedder("ollama", "embed-model")
	if err != nil {
		t.Fatal(err)
	}
	vecs, err := e.Embed(t.Context(), []string{"the backup runs at night", "lunch"})
	if err != nil || len(vecs) != 2 || len(vecs[0]) == 0 {
		t.Fatalf("Embed = %d vectors, %v", len(vecs), err)
	}
	if n := len(fake.EmbedRequests()); n != 1 {
		t.Fatalf("%d embed requests, want 1", n)
	}
	var kinds []string
	var charged int64
	files, _ := filepath.Glob(filepath.Join(dir, "usage", "*.jsonl"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var en broker.Entry
			if json.Unmarshal([]byte(line), &en) == nil {
				kinds = append(kinds, en.Kind+":"+en.Model)
				if en.Kind == broker.KindEmbed {
					charged += en.Input
				}
			}
		}
	}
	if strings.Join(kinds, ",") != "embed-reserve:embed-model,embed:embed-model" || charged != int64(fake.EmbedTokens()) || charged == 0 {
		t.Errorf("ledger = %v, %d tokens charged (server counted %d), want a reservation and a settlement of what the server counted", kinds, charged, fake.EmbedTokens())
	}

	// Mother's day is nearly spent: a call that could pass it is refused
	// before it is sent.
	long := []string{strings.Repeat("word ", 2000)}
	if _, err := e.Embed(t.Context(), long); err == nil {
		t.Errorf("an embedding over Mother's daily cap was sent")
	}
	if n := len(fake.EmbedRequests()); n != 1 {
		t.Errorf("%d embed requests, want the refused one never sent", n)
	}
	// A restart reads the embed lines back: what was spent still counts.
	b.Close()
	// The next call's bound is len/3+8 tokens: the cap leaves room for it
	// alone, not beside what was spent before the restart.
	text := "the backup runs at night, and more words than five tokens"
	bound := int64(len(text)/3 + 8)
	b2 := setup(t, config.Budgets{}, dir, clk, fake, func(cfg *config.Config) { cfg.Budgets.Mother.DailyTokens = config.Tokens(bound + charged - 1) })
	e2, _ := b2.Embedder("ollama", "embed-model")
	if _, err := e2.Embed(t.Context(), []string{text}); err == nil {
		t.Errorf("after a restart the embed spend was forgotten: a call past the cap was sent")
	}
	// The settled call was read as settled, not charged again whole.
	files, _ = filepath.Glob(filepath.Join(dir, "usage", "*.jsonl"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if strings.Contains(string(data), `"unsettled":true`) {
			t.Errorf("the restart charged a settled embed call again as unsettled:\n%s", data)
		}
	}
}
