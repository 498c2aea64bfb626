package broker_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// knownLedger writes three days of ledger under dir (today is 2026-03-10
// on clk): settlements of chicks and of Mother, with and without costs,
// and lines that are not usage (a reservation, settled by a failed call
// that cost nothing, a notice, a line from the future).
func knownLedger(t *testing.T, dir string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Join(dir, "usage"), 0o700))
	files := map[string][]string{
		"2026-03-10": {
			`{"ts":"2026-03-10T09:00:00Z","call":"a","chick":"c-1","channel":"slack/C1","tier":"claude","user":"slack/U1","provider":"anthropic","model":"claude-sonnet-4-5","in":10000,"out":1000,"costMicroUSD":45000}`,
			`{"ts":"2026-03-10T09:01:00Z","kind":"reserve","call":"b","chick":"c-1","channel":"slack/C1","tier":"claude","model":"claude-sonnet-4-5","in":0,"out":0,"rin":99999,"rout":8192,"rcostMicroUSD":999999}`,
			`{"ts":"2026-03-10T09:01:30Z","call":"b","chick":"c-1","channel":"slack/C1","tier":"claude","provider":"anthropic","model":"claude-sonnet-4-5","in":0,"out":0}`,
			`{"ts":"2026-03-10T09:02:00Z","kind":"mother","call":"c","chick":"","channel":"slack/C1","tier":"","user":"slack/U1","provider":"anthropic","model":"claude-haiku-4-5","in":20000,"out":500,"costMicroUSD":22500}`,
			`{"ts":"2026-03-10T09:03:00Z","kind":"mother","call":"d","chick":"","channel":"cli/local","tier":"","event":"check.json","provider":"ollama","model":"qwen3:30b-a3b","in":3000,"out":100}`,
			`{"ts":"2026-03-10T09:04:00Z","kind":"warned","chick":"","channel":"","tier":"","model":"","in":0,"out":0,"scope":"channel","name":"slack/C1","unit":"usd","level":80}`,
			`{"ts":"2026-03-10T09:05:00Z","kind":"tomorrow's","chick":"","channel":"x","tier":"claude","model":"","in":5,"out":5,"costMicroUSD":5}`,
		},
		"2026-03-08": {
			`{"ts":"2026-03-08T10:00:00Z","chick":"c-0","channel":"cli/local","tier":"local","model":"qwen3:14b","in":700,"out":300}`,
			`{"ts":"2026-03-08T10:01:00Z","call":"e","chick":"c-2","channel":"slack/C1","tier":"claude","provider":"anthropic","model":"claude-sonnet-4-5","in":1000,"out":100,"costMicroUSD":4500,"unsettled":true}`,
		},
		"2026-02-20": {
			`{"ts":"2026-02-20T10:00:00Z","chick":"c-9","channel":"cli/local","tier":"claude","model":"claude-sonnet-4-5","in":1,"out":1,"costMicroUSD":7000000}`,
		},
	}
	for day, lines := range files {
		must(t, os.WriteFile(filepath.Join(dir, "usage", day+".jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	}
}

func TestUsageReports(t *testing.T) {
	t.Parallel()
	fake := ollamatest.NewFunc(exact)
	defer fake.Close()
	dir := t.TempDir()
	knownLedger(t, dir)
	clk := clock.NewFake(time.Date(2026, 3, 10, 12, 0, 0, 0, time.Local))
	b := setup(t, config.Budgets{}, dir, clk, fake)

	row := func(key string, calls, in, out, cost int64) broker.UsageRow {
		return broker.UsageRow{Key: key, Calls: calls, InputTokens: in, OutputTokens: out, CostMicroUSD: cost}
	}
	total := row("total", 6, 34700, 2000, 72000)
	for _, tc := range []struct {
		days int
		by   string
		want broker.Usage
	}{
		{7, "", broker.Usage{From: "2026-03-04", To: "2026-03-10", By: "day", Total: total, Rows: []broker.UsageRow{
			row("2026-03-08", 2, 1700, 400, 4500), row("2026-03-10", 4, 33000, 1600, 67500)}}},
		{7, "tier", broker.Usage{From: "2026-03-04", To: "2026-03-10", By: "tier", Total: total, Rows: []broker.UsageRow{
			row("claude", 3, 11000, 1100, 49500), row(broker.MotherKey, 2, 23000, 600, 22500), row("local", 1, 700, 300, 0)}}},
		{7, "model", broker.Usage{From: "2026-03-04", To: "2026-03-10", By: "model", Total: total, Rows: []broker.UsageRow{
			row("anthropic/claude-sonnet-4-5", 3, 11000, 1100, 49500), row("anthropic/claude-haiku-4-5", 1, 20000, 500, 22500),
			row("ollama/qwen3:30b-a3b", 1, 3000, 100, 0), row("qwen3:14b", 1, 700, 300, 0)}}},
		{1, "event", broker.Usage{From: "2026-03-10", To: "2026-03-10", By: "event", Total: row("total", 4, 33000, 1600, 67500), Rows: []broker.UsageRow{
			row("(none)", 3, 30000, 1500, 67500), row("check.json", 1, 3000, 100, 0)}}},
		{1, "user", broker.Usage{From: "2026-03-10", To: "2026-03-10", By: "user", Total: row("total", 4, 33000, 1600, 67500), Rows: []broker.UsageRow{
			row("slack/U1", 2, 30000, 1500, 67500), row("(none)", 2, 3000, 100, 0)}}},
		{30, "channel", broker.Usage{From: "2026-02-09", To: "2026-03-10", By: "channel", Total: row("total", 7, 34701, 2001, 7072000), Rows: []broker.UsageRow{
			row("cli/local", 3, 3701, 401, 7000000), row("slack/C1", 4, 31000, 1600, 72000)}}},
	} {
		got, err := b.Usage(tc.days, tc.by)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Usage(%d, %q) = %+v, %v\nwant %+v", tc.days, tc.by, got, err, tc.want)
		}
	}
	if _, err := b.Usage(7, "colour"); err == nil {
		t.Error("an unknown grouping")
	}

	spend, err := b.DailySpend(3)
	must(t, err)
	want := []broker.DaySpend{
		{Day: "2026-03-08", Tiers: map[string]int64{"local": 0, "claude": 4500}},
		{Day: "2026-03-09", Tiers: map[string]int64{}},
		{Day: "2026-03-10", Tiers: map[string]int64{"claude": 45000}, Mother: 22500},
	}
	if !reflect.DeepEqual(spend, want) {
		t.Errorf("DailySpend(3) = %+v\nwant %+v", spend, want)
	}
	if spend[2].Total() != 67500 {
		t.Errorf("today's total %d", spend[2].Total())
	}
}
