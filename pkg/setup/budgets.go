package setup

import (
	"fmt"
	"strconv"

	"github.com/mother-chat/mother/pkg/config"
)

var budgetFields = []struct {
	field, label string
	def          int64
}{
	{"chickTokens", "Tokens one chick may use", config.DefaultChickTokenBudget},
	{"channelDailyTokens", "Chick tokens per channel per day (0: no cap)", DefaultChannelDailyTokens},
	{"userDailyTokens", "Chick tokens per user per day (0: no cap)", DefaultUserDailyTokens},
}

func (r *run) budgets() error {
	r.section("Budgets")
	flags := map[string]string{"chickTokens": r.f.ChickTokens, "channelDailyTokens": r.f.ChannelDailyTokens, "userDailyTokens": r.f.UserDailyTokens}
	for _, b := range budgetFields {
		cur, set := r.cfg.num("budgets", b.field)
		def := b.def
		switch {
		case set:
			def = cur
		case r.exists && b.field != "chickTokens":
			def = 0 // what the existing configuration means
		}
		answer := flags[b.field]
		for {
			if answer == "" {
				answer = tokens(def)
				if r.o.Interactive {
					var err error
					if answer, err = r.p.ask(b.label, tokens(def)); err != nil {
						return err
					}
				}
			}
			n, err := parseTokens(answer)
			if err == nil {
				// What the configuration means now: its value, or the
				// daemon's default (no cap but for chickTokens).
				effective := cur
				if !set && b.field == "chickTokens" {
					effective = config.DefaultChickTokenBudget
				}
				if !r.exists || n != effective {
					r.put(n, "budgets", b.field)
				}
				break
			}
			r.say("  ✗ budgets.%s: %v", b.field, err)
			if !r.o.Interactive {
				return fmt.Errorf("budgets.%s: %v: %w", b.field, err, ErrNotVerified)
			}
			answer = ""
		}
	}
	return nil
}

// tokens writes a count the way parseTokens reads it back ("2m", "500k").
func tokens(n int64) string {
	switch {
	case n != 0 && n%1_000_000 == 0:
		return strconv.FormatInt(n/1_000_000, 10) + "m"
	case n != 0 && n%1_000 == 0:
		return strconv.FormatInt(n/1_000, 10) + "k"
	}
	return strconv.FormatInt(n, 10)
}

// parseTokens reads "2000000", "2_000_000", "2m" or "500k".
func parseTokens(s string) (int64, error) {
	t, err := config.ParseTokens(s)
	if err != nil {
		return 0, fmt.Errorf("want a token count such as 2000000, 2m or 500k")
	}
	return t.Int64(), nil
}
