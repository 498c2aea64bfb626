package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
)

// Kinds of the ledger lines of embedding calls (recall's index): KindEmbedReserve
// the reservation, KindEmbed the settlement. They are Mother's calls: they
// count in her caps and her day, not in any chick's.
const (
	KindEmbed        = "embed"
	KindEmbedReserve = "embed-reserve"
)

// Embedder is an embedding model reached through the broker (Embedder).
type Embedder struct {
	b        *Broker
	provider string
	model    string
	price    config.Price
	p        model.Embedder
}

// Embedder returns the embedding model id of provider ("ollama",
// "openai:<name>"), each call of which is reserved against Mother's caps
// before it is sent and settled after, in the ledger as kind embed.
func (b *Broker) Embedder(provider, id string) (*Embedder, error) {
	b.mu.Lock()
	p, err := b.providerLocked(provider)
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	e, ok := p.(model.Embedder)
	if !ok {
		return nil, fmt.Errorf("provider %s serves no embeddings", provider)
	}
	price, _ := b.cfg.PriceOf(provider, id)
	return &Embedder{b: b, provider: provider, model: id, price: price, p: e}, nil
}

// embedCaller is who the embedding calls are charged to: Mother, for no
// channel (the index serves them all).
var embedCaller = Caller{Kind: CallerMother, Tier: "recall"}

// Embed returns the vectors of texts: one metered call.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	b, c := e.b, embedCaller
	// The input's bound: a token per byte would be far too much; text
	// runs at about four bytes a token, a few more for the framing.
	var in int64
	for _, t := range texts {
		in += int64(len(t))/3 + 8
	}
	id, err := newCallID()
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	now := b.clock.Now()
	if err := b.rollLocked(now); err != nil {
		b.mu.Unlock()
		return nil, err
	}
	r, _, err := b.admitLocked(c, in, 0, e.price, now)
	if err != nil {
		notes := b.refusedLocked(c, err, now)
		tell := b.notify
		b.mu.Unlock()
		b.metrics.ModelCall(c, model.Usage{}, 0, err)
		deliver(tell, notes)
		return nil, err
	}
	line := reservation(now, id, c, e.provider, e.model, model.Usage{InputTokens: in}, r.micro)
	line.Kind = KindEmbedReserve
	if err := b.appendLocked(line); err != nil {
		b.reserveLocked(c, r.neg())
		b.mu.Unlock()
		return nil, fmt.Errorf("broker: usage ledger: %w", err)
	}
	b.mu.Unlock()

	vecs, u, err := e.p.Embed(ctx, e.model, texts)
	charged := model.Usage{InputTokens: u.InputTokens}
	if err != nil && ctx.Err() != nil {
		charged = model.Usage{InputTokens: in}
	}
	if err == nil && charged.InputTokens == 0 {
		// A server that reports no usage is charged the estimate.
		charged.InputTokens = in
	}
	cost := e.price.MicroUSD(charged.InputTokens, 0)
	b.metrics.ModelCall(c, charged, cost, err)
	if rerr := b.settle(c, line, r, charged, cost); rerr != nil {
		b.logger.Error("cannot record usage", "embed", e.model, "err", rerr)
	}
	if err != nil {
		return nil, err
	}
	if len(vecs) != len(texts) {
		return nil, errors.New("embed: wrong number of vectors")
	}
	return vecs, nil
}
