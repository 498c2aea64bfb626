package broker

import (
	"errors"
	"fmt"
	"time"

	"github.com/mother-chat/mother/pkg/model"
)

// Notice is what Mother says about a daily cap: that it is 80% spent
// (Level 80), or that it stopped a call (Level 100). Each is given once per
// cap, unit and level per day, and the marks survive a restart (they are
// ledger lines).
type Notice struct {
	// Level is 80 or 100.
	Level int
	// Scope and Name are the cap's (Budget.Kind and Name); Unit "tokens"
	// or "usd"; Field its config field.
	Scope, Name, Unit, Field string
	// Channel is where to say it: the cap's own channel, or the channel of
	// the call that crossed it (empty: a call outside any channel).
	Channel string
	// Admins marks a cap that is not one channel's (Mother's own daily
	// cap, a tier's): it is said for the admins.
	Admins bool
	// Used and Limit are in the unit (tokens or micro-dollars).
	Used, Limit int64
	// Reset is when the cap resets.
	Reset time.Time
	// Text says it for a person.
	Text string
}

// warnLevel is the share of a daily cap, in percent, at which Mother
// warns.
const warnLevel = 80

func warnKey(s scope, unit string, level int) string {
	return fmt.Sprintf("%s\x00%s\x00%s\x00%d", s.kind, s.name, unit, level)
}

// deliver hands notes to f (nil: nobody listens).
func deliver(f func(Notice), notes []Notice) {
	if f == nil {
		return
	}
	for _, n := range notes {
		f(n)
	}
}

// thresholdsLocked gives the 80% notices c's settled call brings: every
// daily cap c counts in, in every unit, that is at 80% or more and has not
// been warned about today.
func (b *Broker) thresholdsLocked(c Caller, now time.Time) []Notice {
	var out []Notice
	for _, m := range members(c) {
		if !m.s.daily() {
			continue
		}
		lim, used := b.limit(m.s), b.usedLocked(m.s)
		for _, u := range m.units() {
			l, n := lim.get(u), used.get(u)
			if l <= 0 || n*100 < l*warnLevel {
				continue
			}
			if note, ok := b.markLocked(c, m.s, u, warnLevel, n, l, now); ok {
				out = append(out, note)
			}
		}
	}
	return out
}

// refusedLocked gives the 100% notice of a call refused on a daily cap
// (err a *model.BudgetError), once a day.
func (b *Broker) refusedLocked(c Caller, err error, now time.Time) []Notice {
	var be *model.BudgetError
	if !errors.As(err, &be) || be.Reset.IsZero() {
		return nil
	}
	s := scope{be.Scope, be.Name}
	lim, used := b.limit(s), b.usedLocked(s)
	u := unitTokens
	if be.Unit == unitMoney.String() {
		u = unitMoney
	}
	// A cap that stops calls no longer needs its 80% warning.
	b.markOnly(s, u, warnLevel, now)
	note, ok := b.markLocked(c, s, u, 100, used.get(u), lim.get(u), now)
	if !ok {
		return nil
	}
	return []Notice{note}
}

// markOnly records level as said for s in u without saying it.
func (b *Broker) markOnly(s scope, u unit, level int, now time.Time) {
	k := warnKey(s, u.String(), level)
	if b.warned[k] {
		return
	}
	b.warned[k] = true
	_ = b.appendLocked(Entry{Time: now, Kind: KindWarned, Scope: s.kind, Name: s.name, Unit: u.String(), Level: level})
}

// markLocked records notice level for s in u, and returns it, unless it
// was given today already.
func (b *Broker) markLocked(c Caller, s scope, u unit, level int, used, limit int64, now time.Time) (Notice, bool) {
	k := warnKey(s, u.String(), level)
	if b.warned[k] {
		return Notice{}, false
	}
	b.warned[k] = true
	if err := b.appendLocked(Entry{Time: now, Kind: KindWarned, Scope: s.kind, Name: s.name, Unit: u.String(), Level: level}); err != nil {
		b.logger.Warn("cannot record a spend notice: it may be given again after a restart", "err", err)
	}
	n := Notice{Level: level, Scope: s.kind, Name: s.name, Unit: u.String(), Field: s.field(u), Channel: c.Channel, Used: used, Limit: limit, Reset: ResetAt(now)}
	switch s.kind {
	case ScopeChannel, ScopeMotherChannel:
		n.Channel = s.name
	case ScopeMother, ScopeTier:
		n.Admins = true
	}
	n.Text = noticeText(n, s, u, now)
	b.logger.Warn("spend notice", "level", level, "cap", s.field(u), "scope", s.words(), "used", u.show(used), "limit", u.show(limit), "channel", n.Channel)
	return n, true
}

// noticeText says a notice for a person in n.Channel.
func noticeText(n Notice, s scope, u unit, now time.Time) string {
	subject, stops := s.words(), ""
	switch s.kind {
	case ScopeChannel:
		subject = "This channel"
		stops = "my own model calls here and the chicks' of this channel"
		if u == unitTokens {
			stops = "the chicks' model calls in this channel"
		}
	case ScopeMotherChannel:
		subject, stops = "My own model use in this channel", "my own model calls in this channel"
	case ScopeMother:
		subject, stops = "My own model use", "my own model calls in every channel"
	case ScopeEvent:
		subject, stops = "Event "+s.name, "the runs of event "+s.name
	case ScopeTier:
		subject, stops = "Tier "+s.name, "the model calls of tier "+s.name+"'s chicks"
	case ScopeUser:
		subject, stops = "User "+s.name, "the chicks of "+s.name
		if u == unitMoney {
			stops += " and my answers to them"
		}
	}
	reset := resetText(now)
	if n.Level < 100 {
		return fmt.Sprintf("Spend warning: %s has used %d%% of its daily cap (%s of %s, %s). At the cap, %s stop until it resets %s.",
			subject, n.Used*100/n.Limit, u.show(n.Used), u.show(n.Limit), n.Field, stops, reset)
	}
	return fmt.Sprintf("Spend cap reached: %s has used %s of its %s for today (%s), and the next call could pass it, so %s are stopped until it resets %s.",
		subject, u.show(n.Used), u.show(n.Limit), n.Field, stops, reset)
}
