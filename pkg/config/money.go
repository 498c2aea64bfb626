package config

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// USD is an amount of US dollars, kept in millionths of a dollar
// (micro-dollars) so that sums are exact. config.json writes it as a
// number of dollars (1.5) or a string ("$1.50", "0.25"); "unlimited" is
// no cap, for a cap that has a default (budgets.mother.eventDailyUSD).
type USD int64

// USDUnlimited is "unlimited": no cap.
const USDUnlimited USD = -1

// Dollars makes a USD of d dollars (rounded to the micro-dollar).
func Dollars(d float64) USD { return USD(math.Round(d * 1e6)) }

// Micro is u in micro-dollars.
func (u USD) Micro() int64 { return int64(u) }

// Capped reports whether u is a cap: more than zero, not unlimited.
func (u USD) Capped() bool { return u > 0 }

// String writes u as a person reads it: "$1.50", "$0.0042", "unlimited".
func (u USD) String() string {
	if u == USDUnlimited {
		return "unlimited"
	}
	return FormatMicroUSD(int64(u))
}

// FormatMicroUSD writes micro-dollars as dollars with two decimals, or
// with as many as a small amount needs to show ("$0.0042").
func FormatMicroUSD(micro int64) string {
	sign := ""
	if micro < 0 {
		sign, micro = "-", -micro
	}
	if micro == 0 || micro >= 10_000 {
		cents := (micro + 5_000) / 10_000
		return fmt.Sprintf("%s$%d.%02d", sign, cents/100, cents%100)
	}
	s := strings.TrimRight(fmt.Sprintf("%.6f", float64(micro)/1e6), "0")
	return sign + "$" + s
}

// MarshalJSON writes dollars as a number ("unlimited" for no cap).
func (u USD) MarshalJSON() ([]byte, error) {
	if u == USDUnlimited {
		return json.Marshal("unlimited")
	}
	return []byte(strconv.FormatFloat(float64(u)/1e6, 'f', -1, 64)), nil
}

// UnmarshalJSON takes a number of dollars, a string such as "$1.50" or
// "unlimited".
func (u *USD) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err == nil {
		return u.set(f, string(b))
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want an amount of US dollars such as 1.50 or \"$1.50\", not %s", b)
	}
	v, err := ParseUSD(s)
	if err != nil {
		return err
	}
	*u = v
	return nil
}

func (u *USD) set(f float64, in string) error {
	if f < 0 || math.IsNaN(f) || f > 1e12 {
		return fmt.Errorf("%s is not an amount of US dollars: write it like 1.50 (0: no cap)", in)
	}
	*u = Dollars(f)
	return nil
}

// ParseUSD reads "1.50", "$1.50", "0.25" or "unlimited".
func ParseUSD(s string) (USD, error) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, "unlimited") {
		return USDUnlimited, nil
	}
	t = strings.TrimPrefix(t, "$")
	f, err := strconv.ParseFloat(strings.ReplaceAll(t, "_", ""), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an amount of US dollars: write it like 1.50, \"$1.50\" or \"unlimited\"", s)
	}
	var u USD
	if err := u.set(f, strconv.Quote(s)); err != nil {
		return 0, err
	}
	return u, nil
}

// MicroUSD is what usage costs at price p, in micro-dollars, rounded up:
// a price in dollars per million tokens is micro-dollars per token.
func (p Price) MicroUSD(inputTokens, outputTokens int64) int64 {
	c := float64(inputTokens)*p.InputPerMTok + float64(outputTokens)*p.OutputPerMTok
	if c <= 0 {
		return 0
	}
	return int64(math.Ceil(c - 1e-9))
}

// Free reports whether p costs nothing.
func (p Price) Free() bool { return p.InputPerMTok == 0 && p.OutputPerMTok == 0 }

// DefaultPricesTaken is when DefaultPrices were read off Anthropic's
// public price list (https://claude.com/pricing, "API"). They are
// defaults: config.json's prices override them, and the owner should
// check them against the price list of the day.
const DefaultPricesTaken = "2025-11-25"

// DefaultPrices are the list prices, in US dollars per million tokens, of
// the Anthropic models the docs name and their neighbours, keyed as
// config.json's prices are ("<provider>/<model>"). A dated id
// ("claude-sonnet-4-5-20250929") and a "-latest" alias take the price of
// the id without the suffix. The prices are those of prompts up to 200,000
// tokens (Mother's context never reaches the long-context rates), without
// prompt caching or batches, which Mother does not use.
var DefaultPrices = map[string]Price{
	"anthropic/claude-opus-4-5":   {InputPerMTok: 5, OutputPerMTok: 25},
	"anthropic/claude-opus-4-1":   {InputPerMTok: 15, OutputPerMTok: 75},
	"anthropic/claude-opus-4-0":   {InputPerMTok: 15, OutputPerMTok: 75},
	"anthropic/claude-opus-4":     {InputPerMTok: 15, OutputPerMTok: 75},
	"anthropic/claude-sonnet-4-5": {InputPerMTok: 3, OutputPerMTok: 15},
	"anthropic/claude-sonnet-4-0": {InputPerMTok: 3, OutputPerMTok: 15},
	"anthropic/claude-sonnet-4":   {InputPerMTok: 3, OutputPerMTok: 15},
	"anthropic/claude-haiku-4-5":  {InputPerMTok: 1, OutputPerMTok: 5},
	"anthropic/claude-3-5-haiku":  {InputPerMTok: 0.8, OutputPerMTok: 4},
}

// datedSuffix is an Anthropic model id's date ("-20250929") or "-latest".
var datedSuffix = regexp.MustCompile(`-(\d{8}|latest)$`)

// PriceOf is what the calls of model on provider cost: prices of
// "<provider>/<model>", else of "<provider>/*" (every model of the
// provider: a local server's electricity), else the default list price of
// an Anthropic model (DefaultPrices). known is false when none applies:
// the calls then cost nothing in the money caps.
func (c *Config) PriceOf(provider, model string) (p Price, known bool) {
	prov := c.canonicalProvider(provider)
	find := func(m map[string]Price, key string) (Price, bool) {
		for k, v := range m {
			kp, km, ok := strings.Cut(k, "/")
			if ok && km == key && c.canonicalProvider(kp) == prov {
				return v, true
			}
		}
		return Price{}, false
	}
	if p, ok := find(c.Prices, model); ok {
		return p, true
	}
	if p, ok := find(c.Prices, "*"); ok {
		return p, true
	}
	if p, ok := DefaultPrices[prov+"/"+model]; ok {
		return p, true
	}
	if p, ok := DefaultPrices[prov+"/"+datedSuffix.ReplaceAllString(model, "")]; ok {
		return p, true
	}
	return Price{}, false
}

// TierPrice is what the calls of tier's own model cost: its price when it
// has one, else PriceOf its provider and model.
func (c *Config) TierPrice(tier string) (Price, bool) {
	t, ok := c.Chicks.Tiers[tier]
	if !ok {
		return Price{}, false
	}
	if t.Price != nil {
		return *t.Price, true
	}
	return c.PriceOf(t.Provider, t.Model)
}

// canonicalProvider names an OpenAI-compatible endpoint "openai:<name>"
// however it is written ("openai" for the only one).
func (c *Config) canonicalProvider(provider string) string {
	if provider == "openai" || strings.HasPrefix(provider, "openai:") {
		if name, err := c.Providers.OpenAIEndpoint(provider); err == nil {
			return "openai:" + name
		}
	}
	return provider
}
