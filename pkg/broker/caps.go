package broker

import (
	"fmt"
	"math"
	"time"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
)

// scope is what one cap caps: a chick, a channel today, Mother's own
// calls today...
type scope struct{ kind, name string }

// Scope kinds (model.BudgetError.Scope, Budget.Kind).
const (
	ScopeChick         = "chick"          // one chick's calls, all its life
	ScopeChannel       = "channel"        // a channel today: chicks' tokens, everyone's money
	ScopeTier          = "tier"           // a tier's chicks today
	ScopeUser          = "user"           // a person today: their chicks' tokens, their money
	ScopeMother        = "mother"         // Mother's own calls today
	ScopeMotherChannel = "mother-channel" // Mother's own calls in a channel today
	ScopeEvent         = "event"          // the runs of one scheduled event today
)

// daily reports whether the scope's caps reset every day.
func (s scope) daily() bool { return s.kind != ScopeChick }

// unit is what a cap counts.
type unit int

const (
	unitTokens unit = iota
	unitMoney
)

func (u unit) String() string {
	if u == unitMoney {
		return "usd"
	}
	return "tokens"
}

// show writes n of u for a person: "1200 tokens", "$0.42".
func (u unit) show(n int64) string {
	if u == unitMoney {
		return config.FormatMicroUSD(n)
	}
	return fmt.Sprintf("%d tokens", n)
}

// amount is tokens and micro-dollars.
type amount struct{ tokens, micro int64 }

func (a amount) add(o amount) amount { return amount{a.tokens + o.tokens, a.micro + o.micro} }
func (a amount) neg() amount         { return amount{-a.tokens, -a.micro} }
func (a amount) get(u unit) int64 {
	if u == unitMoney {
		return a.micro
	}
	return a.tokens
}

// member is a scope a call counts in, and in which units: Mother's own
// calls count in money only against channels and persons (their token
// caps are the chicks').
type member struct {
	s             scope
	tokens, money bool
}

func (m member) part(a amount) amount {
	if !m.tokens {
		a.tokens = 0
	}
	if !m.money {
		a.micro = 0
	}
	return a
}

func (m member) units() []unit {
	var out []unit
	if m.tokens {
		out = append(out, unitTokens)
	}
	if m.money {
		out = append(out, unitMoney)
	}
	return out
}

// members are the scopes c's calls count in.
func members(c Caller) []member {
	if c.mother() {
		out := []member{{scope{ScopeMother, ""}, true, true}}
		if c.Channel != "" {
			out = append(out, member{scope{ScopeMotherChannel, c.Channel}, true, true}, member{scope{ScopeChannel, c.Channel}, false, true})
		}
		if c.Event != "" {
			out = append(out, member{scope{ScopeEvent, c.Event}, true, true})
		}
		if c.User != "" {
			out = append(out, member{scope{ScopeUser, c.User}, false, true})
		}
		return out
	}
	out := []member{{scope{ScopeChick, c.ChickID}, true, true}, {scope{ScopeChannel, c.Channel}, true, true}, {scope{ScopeTier, c.Tier}, true, true}}
	if c.User != "" {
		out = append(out, member{scope{ScopeUser, c.User}, true, true})
	}
	return out
}

// capUSD is a money cap in micro-dollars (0: none).
func capUSD(u config.USD) int64 {
	if u.Capped() {
		return u.Micro()
	}
	return 0
}

// limit is s's caps (0: none).
func (b *Broker) limit(s scope) amount {
	bg := b.budgets
	switch s.kind {
	case ScopeChick:
		return amount{bg.ChickTokens.Int64(), capUSD(bg.ChickUSD)}
	case ScopeChannel:
		return amount{bg.ChannelDailyTokens.Int64(), capUSD(bg.ChannelDailyUSD)}
	case ScopeTier:
		return amount{bg.TierDailyTokens[s.name].Int64(), capUSD(bg.TierDailyUSD[s.name])}
	case ScopeUser:
		return amount{bg.UserDailyTokens.Int64(), capUSD(bg.UserDailyUSD)}
	case ScopeMother:
		return amount{bg.Mother.DailyTokens.Int64(), capUSD(bg.Mother.DailyUSD)}
	case ScopeMotherChannel:
		return amount{bg.Mother.ChannelDailyTokens.Int64(), capUSD(bg.Mother.ChannelDailyUSD)}
	case ScopeEvent:
		return amount{bg.Mother.EventDailyTokens.Int64(), capUSD(bg.Mother.EventDailyUSD)}
	}
	return amount{}
}

// field is the config field of s's cap in u.
func (s scope) field(u unit) string {
	suffix := "Tokens"
	if u == unitMoney {
		suffix = "USD"
	}
	switch s.kind {
	case ScopeChick:
		return "budgets.chick" + suffix
	case ScopeChannel:
		return "budgets.channelDaily" + suffix
	case ScopeTier:
		return "budgets.tierDaily" + suffix + "." + s.name
	case ScopeUser:
		return "budgets.userDaily" + suffix
	case ScopeMother:
		return "budgets.mother.daily" + suffix
	case ScopeMotherChannel:
		return "budgets.mother.channelDaily" + suffix
	case ScopeEvent:
		return "budgets.mother.eventDaily" + suffix
	}
	return "budgets"
}

// words names s for a person: "channel slack/C1", "Mother's own calls".
func (s scope) words() string {
	switch s.kind {
	case ScopeMother:
		return "Mother's own calls"
	case ScopeMotherChannel:
		return "Mother's own calls in channel " + s.name
	}
	return s.kind + " " + s.name
}

// usedLocked is s's settled amount (today's, for a daily scope).
func (b *Broker) usedLocked(s scope) amount {
	if s.kind == ScopeChick {
		t := b.chick[s.name]
		return amount{t.usage.Total(), t.micro}
	}
	return b.daily[s]
}

// minOutput is the least output limit a call is sent with (or the
// call's own limit, when that is smaller): a call with less room than
// this for its answer is refused, not sent to be cut off at once.
const minOutput = 256

// admitLocked reserves c's call of at most in prompt tokens and an output
// limit of out, lowered to what every cap has left after the prompt; it
// returns the reservation and the output limit to send. It says why the
// call may not be sent when not even the prompt and minOutput fit: a
// *model.BudgetError when a cap cannot take them, a transient busy error
// when calls in flight hold what is left. Callers hold b.mu.
func (b *Broker) admitLocked(c Caller, in, out int64, price config.Price, now time.Time) (amount, int64, error) {
	out, err := b.fitLocked(c, in, out, price, now, true)
	if err != nil {
		return amount{}, 0, err
	}
	r := amount{in + out, price.MicroUSD(in, out)}
	b.reserveLocked(c, r)
	return r, out, nil
}

// fitLocked is admitLocked without the reservation: the output limit the
// caps leave c's call, or why it may not be sent. flight says whether a
// chick's calls in flight are counted too. Callers hold b.mu.
func (b *Broker) fitLocked(c Caller, in, out int64, price config.Price, now time.Time, flight bool) (int64, error) {
	least := min(out, minOutput)
	need := amount{in + least, price.MicroUSD(in, least)}
	ms := members(c)
	for _, m := range ms {
		lim, used := b.limit(m.s), b.usedLocked(m.s)
		for _, u := range m.units() {
			if l := lim.get(u); l > 0 && used.get(u)+need.get(u) > l {
				return 0, b.exhausted(m.s, u, used.get(u), l, need.get(u), now)
			}
		}
	}
	if flight && !c.mother() {
		if n := b.inFlight[c.ChickID]; n >= b.maxCalls {
			return 0, &model.TransientError{Err: model.Wrap(model.ErrBusy, "busy: chick %s has %d model calls in flight, as many as chicks.maxModelCallsPerChick allows", c.ChickID, n)}
		}
	}
	for _, m := range ms {
		lim, used, held := b.limit(m.s), b.usedLocked(m.s), b.res[m.s]
		for _, u := range m.units() {
			l := lim.get(u)
			if l <= 0 {
				continue
			}
			room := l - used.get(u) - held.get(u)
			if need.get(u) > room {
				return 0, &model.TransientError{Err: model.Wrap(model.ErrBusy, "busy: %s has %s of its %s left and calls in flight hold %s of it; this call needs at least %s",
					m.s.words(), u.show(l-used.get(u)), u.show(l), u.show(held.get(u)), u.show(need.get(u)))}
			}
			out = min(out, outputRoom(room, in, price, u))
		}
	}
	return out, nil
}

// outputRoom is the most output tokens a call of in prompt tokens can
// have within room of unit u (room holds at least the prompt).
func outputRoom(room, in int64, price config.Price, u unit) int64 {
	if u == unitTokens {
		return room - in
	}
	if price.OutputPerMTok <= 0 {
		return math.MaxInt64
	}
	// A token of output costs OutputPerMTok micro-dollars; MicroUSD
	// rounds the sum up, so step down until it fits.
	o := int64(math.Floor((float64(room) - float64(in)*price.InputPerMTok) / price.OutputPerMTok))
	for o > 0 && price.MicroUSD(in, o) > room {
		o--
	}
	return max(o, 0)
}

// reserveLocked adds r (negative: releases) to c's reservations.
func (b *Broker) reserveLocked(c Caller, r amount) {
	for _, m := range members(c) {
		if v := b.res[m.s].add(m.part(r)); v == (amount{}) {
			delete(b.res, m.s)
		} else {
			b.res[m.s] = v
		}
	}
	if c.mother() {
		return
	}
	step := 1
	if r.tokens < 0 || r.micro < 0 {
		step = -1
	}
	if b.inFlight[c.ChickID] += step; b.inFlight[c.ChickID] <= 0 {
		delete(b.inFlight, c.ChickID)
	}
}

// addLocked adds settled usage u costing micro to c's totals.
func (b *Broker) addLocked(c Caller, u model.Usage, micro int64) {
	if !c.mother() {
		b.addChickLocked(c.ChickID, u, micro)
	}
	b.addDailyLocked(c, u, micro)
}

func (b *Broker) addChickLocked(id string, u model.Usage, micro int64) {
	t := b.chick[id]
	t.usage, t.micro, t.calls = t.usage.Add(u), t.micro+micro, t.calls+1
	b.chick[id] = t
}

func (b *Broker) addDailyLocked(c Caller, u model.Usage, micro int64) {
	a := amount{u.Total(), micro}
	for _, m := range members(c) {
		if !m.s.daily() {
			continue
		}
		if p := m.part(a); p != (amount{}) {
			b.daily[m.s] = b.daily[m.s].add(p)
		}
	}
}

// exhausted is the refusal of a call that may cost need on s's cap in u
// (need 0: a spawn's check).
func (b *Broker) exhausted(s scope, u unit, used, limit, need int64, now time.Time) error {
	var call, reset string
	if need > 0 {
		call = "; the next call needs at least " + u.show(need)
	}
	e := &model.BudgetError{Scope: s.kind, Name: s.name, Unit: u.String()}
	if s.daily() {
		e.Reset = ResetAt(now)
		reset = "; it resets " + resetText(now)
	}
	if u == unitMoney {
		e.Msg = fmt.Sprintf("budget exhausted: %s spent %s of %s today (%s)%s%s", s.words(), u.show(used), u.show(limit), s.field(u), call, reset)
		if s.kind == ScopeChick {
			e.Msg = fmt.Sprintf("budget exhausted: chick %s spent %s of its %s (%s)%s", s.name, u.show(used), u.show(limit), s.field(u), call)
		}
		return e
	}
	switch s.kind {
	case ScopeChick:
		e.Msg = fmt.Sprintf("budget exhausted: chick %s used %d of its %d tokens (budgets.chickTokens)%s", s.name, used, limit, call)
	case ScopeChannel:
		e.Msg = fmt.Sprintf("budget exhausted: channel %s used %d of its %d chick tokens today (budgets.channelDailyTokens)%s%s", s.name, used, limit, call, reset)
	case ScopeTier:
		e.Msg = fmt.Sprintf("budget exhausted: tier %s used %d of its %d tokens today (budgets.tierDailyTokens.%s)%s%s", s.name, used, limit, s.name, call, reset)
	case ScopeUser:
		e.Msg = fmt.Sprintf("budget exhausted: user %s used %d of their %d chick tokens today (budgets.userDailyTokens)%s%s", s.name, used, limit, call, reset)
	default:
		e.Msg = fmt.Sprintf("budget exhausted: %s used %d of their %d tokens today (%s)%s%s", s.words(), used, limit, s.field(u), call, reset)
	}
	return e
}

// ResetAt is when the daily caps of the day of t reset: the next local
// midnight.
func ResetAt(t time.Time) time.Time {
	l := t.Local()
	return time.Date(l.Year(), l.Month(), l.Day()+1, 0, 0, 0, 0, time.Local)
}

// resetText says when the daily caps reset, for a person: "at 00:00
// CET (2026-11-24), in 5h12m0s".
func resetText(now time.Time) string {
	r := ResetAt(now)
	return fmt.Sprintf("at %s (%s), in %s", r.Format("15:04 MST"), r.Format("2006-01-02"), r.Sub(now).Truncate(time.Minute))
}

// CheckUser returns an error matching model.ErrBudgetExhausted, saying
// when it resets, when user (qualified by adapter) has spent today's
// budgets.userDailyTokens or budgets.userDailyUSD; nil when they may
// start another chick, or when user is empty. The hatchery asks it before
// a spawn.
func (b *Broker) CheckUser(user string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	if err := b.rollLocked(now); err != nil {
		return err
	}
	if user == "" {
		return nil
	}
	s := scope{ScopeUser, user}
	lim, used := b.limit(s), b.usedLocked(s)
	for _, u := range []unit{unitTokens, unitMoney} {
		if l := lim.get(u); l > 0 && used.get(u) >= l {
			return b.exhausted(s, u, used.get(u), l, 0, now)
		}
	}
	return nil
}
