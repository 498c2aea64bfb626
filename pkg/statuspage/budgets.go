package statuspage

import (
	"strconv"

	"github.com/mother-chat/mother/pkg/config"
)

// Budget is one of today's budgets, in tokens or in money.
type Budget struct {
	Scope string `json:"scope"`
	// Unit is "tokens", or "usd" for a money budget, whose Used and Limit
	// are micro-dollars.
	Unit string `json:"unit"`
	Used int64  `json:"used"`
	// Limit is 0 when there is no cap.
	Limit int64 `json:"limit"`
	// Percent is Used of Limit in whole percent, rounded down (so 100
	// means the cap is reached); it passes 100 when calls in flight
	// settled beyond the cap. 0 when there is no cap.
	Percent int64 `json:"percent"`
}

// WarnPercent is the share of a cap from which the page shows a budget
// in the warning colour; at 100 it shows it full.
const WarnPercent = 80

func newBudget(scope, unit string, used, limit int64) Budget {
	b := Budget{Scope: scope, Unit: unit, Used: used, Limit: limit}
	if limit > 0 {
		b.Percent = max(0, used) * 100 / limit
	}
	return b
}

// Amount writes n in the budget's unit: "120,400" tokens, "$1.25".
func (b Budget) Amount(n int64) string {
	if b.Unit == "usd" {
		return config.FormatMicroUSD(n)
	}
	return Thousands(n)
}

// UnitWord is what follows an amount: " tokens", or nothing for dollars.
func (b Budget) UnitWord() string {
	if b.Unit == "usd" {
		return ""
	}
	return " tokens"
}

// ID names the budget's row: its scope, and "usd" for money.
func (b Budget) ID() string {
	if b.Unit == "usd" {
		return b.Scope + " usd"
	}
	return b.Scope
}

// Capped reports whether the budget has a cap.
func (b Budget) Capped() bool { return b.Limit > 0 }

// Left is what the cap leaves today (0 once it is reached).
func (b Budget) Left() int64 { return max(0, b.Limit-b.Used) }

// Level is how close the budget is to its cap: "ok", "warn" (at least
// WarnPercent of it used) or "full" (all of it); "none" without a cap.
func (b Budget) Level() string {
	switch {
	case b.Limit <= 0:
		return "none"
	case b.Used >= b.Limit:
		return "full"
	case b.Used*100 >= b.Limit*WarnPercent:
		return "warn"
	}
	return "ok"
}

// The bar is a <meter> from 0 to the cap whose optimum is 0: a browser
// colours it as good up to its low boundary, as a warning up to its high
// boundary and as bad beyond. The boundaries sit half a token below the
// first used count that is a warning (WarnPercent) and below the cap, so
// that the bar's colour changes exactly where Level does (counts are
// whole tokens).

// MeterValue is the bar's value: Used, within 0 and the cap.
func (b Budget) MeterValue() int64 { return min(max(0, b.Used), b.Limit) }

// MeterLow is the bar's low boundary.
func (b Budget) MeterLow() string {
	first := (b.Limit*WarnPercent + 99) / 100 // the first count at WarnPercent
	return strconv.FormatFloat(float64(first)-0.5, 'f', -1, 64)
}

// MeterHigh is the bar's high boundary.
func (b Budget) MeterHigh() string {
	return strconv.FormatFloat(float64(b.Limit)-0.5, 'f', -1, 64)
}
