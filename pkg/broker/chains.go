package broker

import (
	"context"
	"fmt"
	"slices"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/fallback"
)

// providerLocked is the provider named name, built once.
func (b *Broker) providerLocked(name string) (model.Provider, error) {
	if p, ok := b.providers[name]; ok {
		return p, nil
	}
	p, err := b.mkProv(name)
	if err != nil {
		return nil, err
	}
	b.providers[name] = p
	return p, nil
}

// chainLocked is a model with its fallbacks: each a meter at its own
// price (primary at first), chained when there are fallbacks. what names
// it in the log ("tier big", "mother").
func (b *Broker) chainLocked(what, provider, id string, first config.Price, fallbacks []config.Fallback, caller func(context.Context) Caller, maxOut int) (model.Provider, error) {
	p, err := b.providerLocked(provider)
	if err != nil {
		return nil, err
	}
	primary := &meter{b: b, name: provider, p: p, price: first, caller: caller, maxOut: maxOut}
	if len(fallbacks) == 0 {
		return primary, nil
	}
	targets := []fallback.Target{{Name: provider, Model: id, Provider: primary}}
	for _, fb := range fallbacks {
		fp, err := b.providerLocked(fb.Provider)
		if err != nil {
			return nil, fmt.Errorf("fallback %s: %w", fb.Provider, err)
		}
		price, _ := b.cfg.PriceOf(fb.Provider, fb.Model)
		targets = append(targets, fallback.Target{Name: fb.Provider, Model: fb.Model, Provider: &meter{b: b, name: fb.Provider, p: fp, price: price, caller: caller, maxOut: maxOut}})
	}
	h := b.health
	if h == nil {
		h = fallback.NewHealth(b.clock, 0, 0)
		b.health = h
	}
	chain := fallback.New(h, b.firstToken, targets...)
	chain.OnFallback = func(from, to fallback.Target, err error) {
		b.logger.Warn("model call goes to a fallback", "for", what, "from", from.String(), "to", to.String(), "err", err)
	}
	return chain, nil
}

// tierProviderLocked is tier's provider: its own, or a chain of it and
// its fallbacks, each metered. Each is built once.
func (b *Broker) tierProviderLocked(name string, t config.Tier) (model.Provider, error) {
	if p, ok := b.byTier[name]; ok {
		return p, nil
	}
	price, _ := b.cfg.TierPrice(name)
	p, err := b.chainLocked("tier "+name, t.Provider, t.Model, price, t.Fallbacks, nil, 0)
	if err != nil {
		return nil, err
	}
	b.byTier[name] = p
	return p, nil
}

// MotherModel is the provider of Mother's own model (config model: its
// provider, id and fallbacks). Every call through it, her runs' turns,
// their compaction, every retry and every fallback, is reserved against
// her caps before it is sent and settled after (see the package comment),
// with its output limit clamped to model.maxOutputTokens; caller tells
// whose call it is from its context (the run's channel, person and
// event). A refused call fails with the broker's errors, as a chick's
// does.
func (b *Broker) MotherModel(caller func(context.Context) Caller) (model.Provider, error) {
	if caller == nil {
		caller = func(context.Context) Caller { return Caller{} }
	}
	m := b.cfg.Model
	price, known := b.cfg.PriceOf(m.Provider, m.ID)
	if !known && m.Provider != "ollama" {
		b.logger.Warn("Mother's model has no price: her calls cost nothing in the money caps (set prices in config.json)", "model", m.Provider+"/"+m.ID)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.chainLocked("mother", m.Provider, m.ID, price, m.Fallbacks, caller, m.MaxOutputTokens)
}

// ProviderStatuses is the health of the providers that fallback chains
// call, Mother's own model's included when they share a Health.
func (b *Broker) ProviderStatuses() []fallback.Status {
	b.mu.Lock()
	h := b.health
	b.mu.Unlock()
	if h == nil {
		return nil
	}
	return h.Statuses()
}

// noteAnswered records that a fallback answered one of chick id's calls.
func (b *Broker) noteAnswered(id, by string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !slices.Contains(b.answeredBy[id], by) {
		b.answeredBy[id] = append(b.answeredBy[id], by)
	}
}

// ChickAnsweredBy is the fallbacks that answered chick id's calls, in the
// order they first did (none when its tier's own model answered every
// call).
func (b *Broker) ChickAnsweredBy(id string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.answeredBy[id])
}
