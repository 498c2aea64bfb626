package broker

import (
	"cmp"
	"slices"
)

// Budget is one budget's state.
type Budget struct {
	// Scope says it in words: "tier local today".
	Scope string
	// Kind is "tier", "channel", "user", "mother", "mother-channel" or
	// "event"; Name the tier, the qualified channel, the qualified user,
	// the event file (empty for Mother's own).
	Kind, Name string
	// Used is settled tokens; Reserved what calls in flight may still add.
	Used, Reserved int64
	// Limit is 0 when there is no token cap.
	Limit int64
	// UsedMicroUSD, ReservedMicroUSD and LimitMicroUSD are the same in
	// money (micro-dollars; LimitMicroUSD 0: no money cap).
	UsedMicroUSD, ReservedMicroUSD, LimitMicroUSD int64
}

// Budgets reports today's daily budgets: every tier's, Mother's own, and
// those of the channels, persons and events that spent or hold something.
func (b *Broker) Budgets() []Budget {
	b.mu.Lock()
	defer b.mu.Unlock()
	_ = b.rollLocked(b.clock.Now())
	seen := map[scope]bool{}
	for t := range b.tiers {
		seen[scope{ScopeTier, t}] = true
	}
	seen[scope{ScopeMother, ""}] = true
	for s := range b.daily {
		seen[s] = true
	}
	for s := range b.res {
		if s.daily() {
			seen[s] = true
		}
	}
	order := map[string]int{ScopeTier: 0, ScopeChannel: 1, ScopeUser: 2, ScopeMother: 3, ScopeMotherChannel: 4, ScopeEvent: 5}
	scopes := make([]scope, 0, len(seen))
	for s := range seen {
		if _, ok := order[s.kind]; ok {
			scopes = append(scopes, s)
		}
	}
	slices.SortFunc(scopes, func(x, y scope) int {
		if c := cmp.Compare(order[x.kind], order[y.kind]); c != 0 {
			return c
		}
		return cmp.Compare(x.name, y.name)
	})
	out := make([]Budget, 0, len(scopes))
	for _, s := range scopes {
		used, held, lim := b.daily[s], b.res[s], b.limit(s)
		out = append(out, Budget{Scope: s.words() + " today", Kind: s.kind, Name: s.name,
			Used: used.tokens, Reserved: held.tokens, Limit: lim.tokens,
			UsedMicroUSD: used.micro, ReservedMicroUSD: held.micro, LimitMicroUSD: lim.micro})
	}
	return out
}
