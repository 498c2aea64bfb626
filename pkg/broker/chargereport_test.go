package broker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// TestChargeReport: what Mother's model reads about an ended chick is
// charged to the chick (its total and its channel's day, not Mother's),
// and counted again after a restart from the ledger.
func TestChargeReport(t *testing.T) {
	t.Parallel()
	fake := ollamatest.NewFunc(exact)
	defer fake.Close()
	dir := t.TempDir()
	clk := clock.NewFake(time.Date(2026, 12, 6, 12, 0, 0, 0, time.Local))
	b := setup(t, config.Budgets{}, dir, clk, fake)
	c := broker.Caller{ChickID: "c-1", Channel: "cli/a", Tier: "big"}
	must(t, call(t, b, c))
	report := strings.Repeat("r", 4000)
	n, err := b.ChargeReport(c, report)
	must(t, err)
	if n < int64(len(report)) || n > int64(len(report))+64 {
		t.Errorf("ChargeReport of %d bytes = %d tokens, want about one a byte", len(report), n)
	}
	want := perCall + n
	if got := b.ChickUsage("c-1").Total(); got != want {
		t.Errorf("c-1 = %d tokens, want its call %d + its report %d", got, perCall, n)
	}
	channel := func() (ch, mother int64) {
		for _, bs := range b.Budgets() {
			switch bs.Scope {
			case "channel cli/a today":
				ch = bs.Used
			case "Mother today":
				mother = bs.Used
			}
		}
		return ch, mother
	}
	if ch, mo := channel(); ch != want || mo != 0 {
		t.Errorf("channel cli/a today %d, Mother today %d; want %d and 0", ch, mo, want)
	}
	must(t, b.Close())
	b = setup(t, config.Budgets{}, dir, clk, fake)
	if got := b.ChickUsage("c-1").Total(); got != want {
		t.Errorf("c-1 after restart = %d tokens, want %d", got, want)
	}
}
