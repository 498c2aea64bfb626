package prompt

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/config"
)

// MaxOwnFileKB is the size limit of one file Mother writes with her write
// and edit tools, stated in REFERENCE.md (pkg/mother enforces it).
const MaxOwnFileKB = 64

// Limits are the configured numbers the prompt and REFERENCE.md state, so
// what the model is told is what the configuration does. A zero field
// takes config's default.
type Limits struct {
	// MessageQueue is dispatch.queueSize: messages waiting per channel.
	MessageQueue int
	// EventQueue is events.maxQueuedPerChannel.
	EventQueue int
	// ChickMax, ChickPerChannel and ChickQueue are chicks.maxConcurrent,
	// chicks.maxPerChannel and chicks.queueSize.
	ChickMax, ChickPerChannel, ChickQueue int
	// ChickTokens is budgets.chickTokens; ChannelDailyTokens
	// budgets.channelDailyTokens (0: no cap); TierDailyTokens
	// budgets.tierDailyTokens.
	ChickTokens, ChannelDailyTokens int64
	TierDailyTokens                 map[string]int64
	// ChickTimeout and ChickMaxTurns are chicks.timeout and chicks.maxTurns.
	ChickTimeout  time.Duration
	ChickMaxTurns int
}

// LimitsFrom takes the numbers from a (defaulted) configuration.
func LimitsFrom(c *config.Config) Limits {
	if c == nil {
		return Limits{}.withDefaults()
	}
	return Limits{
		MessageQueue:       c.Dispatch.QueueSize,
		EventQueue:         c.Events.MaxQueuedPerChannel,
		ChickMax:           c.Chicks.MaxConcurrent,
		ChickPerChannel:    c.Chicks.MaxPerChannel,
		ChickQueue:         c.Chicks.QueueSize,
		ChickTokens:        c.Budgets.ChickTokens.Int64(),
		ChannelDailyTokens: c.Budgets.ChannelDailyTokens.Int64(),
		TierDailyTokens:    tierTokens(c.Budgets.TierDailyTokens),
		ChickTimeout:       c.Chicks.Timeout.Duration,
		ChickMaxTurns:      c.Chicks.MaxTurns,
	}.withDefaults()
}

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MessageQueue, config.DefaultDispatchQueue)
	def(&l.EventQueue, config.DefaultEventQueue)
	def(&l.ChickMax, config.DefaultMaxConcurrent)
	def(&l.ChickPerChannel, config.DefaultMaxPerChannel)
	def(&l.ChickQueue, config.DefaultChickQueue)
	def(&l.ChickMaxTurns, config.DefaultChickMaxTurns)
	if l.ChickTimeout <= 0 {
		l.ChickTimeout = config.DefaultChickTimeout
	}
	return l
}

// tokens renders a token budget ("2,000,000 tokens"), 0 as "no cap".
func tokens(n int64) string {
	if n <= 0 {
		return "no cap"
	}
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String() + " tokens"
}

// duration renders 30m0s as 30m and 1h0m0s as 1h.
func duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// chickLimits is REFERENCE.md's paragraph on chicks.
func (l Limits) chickLimits() string {
	var b strings.Builder
	fmt.Fprintf(&b, "- Chicks: at most %d run at once, %d per channel; up to %d more wait for a\n"+
		"  slot (all channels together) and start in order; past that spawn_chick\n"+
		"  refuses and you tell the person to try later. A chick runs for at most\n"+
		"  %s and %d model turns. Token budgets: one chick %s; a channel's chicks\n"+
		"  per day %s.\n",
		l.ChickMax, l.ChickPerChannel, l.ChickQueue, duration(l.ChickTimeout), l.ChickMaxTurns, tokens(l.ChickTokens), tokens(l.ChannelDailyTokens))
	if len(l.TierDailyTokens) > 0 {
		names := make([]string, 0, len(l.TierDailyTokens))
		for n := range l.TierDailyTokens {
			names = append(names, n)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = n + " " + tokens(l.TierDailyTokens[n])
		}
		fmt.Fprintf(&b, "  Per tier per day, all channels: %s.\n", strings.Join(parts, ", "))
	}
	return b.String()
}

// tierTokens is the tiers' daily caps as plain counts.
func tierTokens(m map[string]config.Tokens) map[string]int64 {
	if m == nil {
		return nil
	}
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v.Int64()
	}
	return out
}
