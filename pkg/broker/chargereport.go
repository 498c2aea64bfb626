package broker

import (
	"fmt"

	"github.com/mother-chat/mother/pkg/model"
)

// ChargeReport charges to chick c what Mother's model reads about it once
// it ended: text (its report, or its relayed result, logged in the
// channel for her next run), estimated as EstimateInput counts a message
// of it and priced as Mother's model's input. It is a settlement of the
// chick's (marked Report in the ledger): it counts in the chick's total
// and in its channel's, tier's and person's day, not in Mother's. It
// returns the tokens charged.
func (b *Broker) ChargeReport(c Caller, text string) (int64, error) {
	c.Kind = CallerChick
	tokens := int64(estMessage + len("user") + len(text))
	m := b.cfg.Model
	price, _ := b.cfg.PriceOf(m.Provider, m.ID)
	cost := price.MicroUSD(tokens, 0)
	u := model.Usage{InputTokens: tokens}
	b.mu.Lock()
	now := b.clock.Now()
	if err := b.rollLocked(now); err != nil {
		b.mu.Unlock()
		return 0, err
	}
	b.addLocked(c, u, cost)
	err := b.appendLocked(Entry{Time: now, Call: "report-" + c.ChickID, Report: true, Chick: c.ChickID, Channel: c.Channel, Tier: c.Tier, User: c.User,
		Provider: m.Provider, Model: m.ID, Input: tokens, Cost: cost})
	notes := b.thresholdsLocked(c, now)
	tell := b.notify
	b.mu.Unlock()
	deliver(tell, notes)
	if err != nil {
		return tokens, fmt.Errorf("broker: usage ledger: %w", err)
	}
	return tokens, nil
}
