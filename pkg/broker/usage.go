package broker

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/mother-chat/mother/pkg/jsonl"
)

// What a usage report groups by.
const (
	ByDay     = "day"
	ByChannel = "channel"
	ByTier    = "tier"
	ByUser    = "user"
	ByEvent   = "event"
	ByModel   = "model"
)

// UsageBys are the groupings Usage knows, the default first.
var UsageBys = []string{ByDay, ByChannel, ByTier, ByUser, ByEvent, ByModel}

// MotherKey is the key of Mother's own calls where a report groups by
// tier (they have none).
const MotherKey = "(Mother's own)"

// noneKey is the key of calls that have nothing to group by (no user, no
// event).
const noneKey = "(none)"

// UsageRow sums settled calls.
type UsageRow struct {
	Key          string `json:"key"`
	Calls        int64  `json:"calls"`
	InputTokens  int64  `json:"inputTokens"`
	OutputTokens int64  `json:"outputTokens"`
	CostMicroUSD int64  `json:"costMicroUSD"`
}

func (r *UsageRow) add(e Entry) {
	r.Calls++
	r.InputTokens += e.Input
	r.OutputTokens += e.Output
	r.CostMicroUSD += e.Cost
}

// Usage is what the ledger holds for the days From to To (local days,
// today included): the settled calls summed by By, costliest first, and
// in all.
type Usage struct {
	From, To string
	By       string
	Rows     []UsageRow
	Total    UsageRow
}

// DaySpend is one day's cost in micro-dollars: the chicks' by tier, and
// Mother's own.
type DaySpend struct {
	Day    string
	Tiers  map[string]int64
	Mother int64
}

// Total is the day's cost.
func (d DaySpend) Total() int64 {
	t := d.Mother
	for _, c := range d.Tiers {
		t += c
	}
	return t
}

// errBy: a grouping Usage does not know.
var errBy = errors.New("broker: unknown grouping")

// Usage reports the settled calls of the last days days (today
// included; at least 1), grouped by by (one of UsageBys; empty: ByDay),
// read from the ledger on disk.
func (b *Broker) Usage(days int, by string) (Usage, error) {
	if by == "" {
		by = ByDay
	}
	if !slices.Contains(UsageBys, by) {
		return Usage{}, fmt.Errorf("%w %q: one of %v", errBy, by, UsageBys)
	}
	days = max(days, 1)
	rows := map[string]*UsageRow{}
	u := Usage{By: by}
	err := b.eachSettled(days, func(day string, e Entry) {
		k := usageKey(by, day, e)
		r := rows[k]
		if r == nil {
			r = &UsageRow{Key: k}
			rows[k] = r
		}
		r.add(e)
		u.Total.add(e)
	})
	if err != nil {
		return Usage{}, err
	}
	for _, r := range rows {
		u.Rows = append(u.Rows, *r)
	}
	slices.SortFunc(u.Rows, func(x, y UsageRow) int {
		if by == ByDay {
			return cmp.Compare(x.Key, y.Key)
		}
		if c := cmp.Compare(y.CostMicroUSD, x.CostMicroUSD); c != 0 {
			return c
		}
		if c := cmp.Compare(y.InputTokens+y.OutputTokens, x.InputTokens+x.OutputTokens); c != 0 {
			return c
		}
		return cmp.Compare(x.Key, y.Key)
	})
	u.Total.Key = "total"
	now := b.clock.Now()
	u.From, u.To = dayOf(now.AddDate(0, 0, -(days-1))), dayOf(now)
	return u, nil
}

// DailySpend is the cost of each of the last days days (today included,
// oldest first; a day without calls is there with nothing), the chicks'
// by tier and Mother's own.
func (b *Broker) DailySpend(days int) ([]DaySpend, error) {
	days = max(days, 1)
	now := b.clock.Now()
	out := make([]DaySpend, days)
	index := map[string]int{}
	for i := range out {
		d := dayOf(now.AddDate(0, 0, i-(days-1)))
		out[i] = DaySpend{Day: d, Tiers: map[string]int64{}}
		index[d] = i
	}
	err := b.eachSettled(days, func(day string, e Entry) {
		i, ok := index[day]
		if !ok {
			return
		}
		if e.Kind == KindMother {
			out[i].Mother += e.Cost
		} else {
			out[i].Tiers[e.Tier] += e.Cost
		}
	})
	return out, err
}

// eachSettled calls f with every settlement line of the last days days,
// oldest day first, in the order of the ledger.
func (b *Broker) eachSettled(days int, f func(day string, e Entry)) error {
	now := b.clock.Now()
	for i := days - 1; i >= 0; i-- {
		day := dayOf(now.AddDate(0, 0, -i))
		err := jsonl.Scan(b.path(day), 0, -1, func(line []byte, _, _ int64) error {
			var e Entry
			if json.Unmarshal(line, &e) != nil {
				return nil
			}
			if e.Kind == "" || e.Kind == KindMother {
				f(day, e)
			}
			return nil
		})
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("broker: read ledger %s: %w", day, err)
		}
	}
	return nil
}

// usageKey is what e is summed under.
func usageKey(by, day string, e Entry) string {
	or := func(s string) string {
		if s == "" {
			return noneKey
		}
		return s
	}
	switch by {
	case ByChannel:
		return or(e.Channel)
	case ByTier:
		if e.Kind == KindMother {
			return MotherKey
		}
		return or(e.Tier)
	case ByUser:
		return or(e.User)
	case ByEvent:
		return or(e.Event)
	case ByModel:
		if e.Provider == "" {
			return or(e.Model)
		}
		return e.Provider + "/" + e.Model
	}
	return day
}
