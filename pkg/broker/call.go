package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
)

type callerKey struct{}

// withCaller returns ctx carrying c, for the metered providers under a
// chain.
func withCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

func callerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// meter is one model on one provider, as a tier or Mother's model (or one
// of their fallbacks) calls it: every call through it is reserved before
// it is sent and settled after, at the model's price.
type meter struct {
	b *Broker
	// name is the provider as config names it; p the provider.
	name string
	p    model.Provider
	// price is what the model's tokens cost.
	price config.Price
	// caller tells who makes a call the context does not say (Mother's
	// own calls: her run's channel, person and event).
	caller func(context.Context) Caller
	// maxOut clamps the output limit (Mother's model.maxOutputTokens; 0:
	// the request's own, which Generate has clamped).
	maxOut int
}

var (
	_ model.Provider        = (*meter)(nil)
	_ model.ContextWindower = (*meter)(nil)
	_ model.ImageSupporter  = (*meter)(nil)
)

func (m *meter) Chat(ctx context.Context, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	c, ok := callerFrom(ctx)
	if !ok {
		if m.caller == nil {
			return model.Response{}, errors.New("broker: a model call without a caller")
		}
		c = m.caller(ctx)
		c.Kind = CallerMother
	}
	if m.maxOut > 0 && (req.MaxOutputTokens <= 0 || req.MaxOutputTokens > m.maxOut) {
		req.MaxOutputTokens = m.maxOut
	}
	if req.MaxOutputTokens <= 0 {
		// Nothing to reserve the answer against without a limit.
		req.MaxOutputTokens = config.DefaultTierMaxOutputTokens
	}
	return m.b.call(ctx, c, m.name, m.p, m.price, req, onDelta)
}

var errUnsupported = errors.New("not reported by this provider")

// ContextWindow passes through to the provider when it can tell.
func (m *meter) ContextWindow(ctx context.Context, id string) (int, error) {
	if cw, ok := m.p.(model.ContextWindower); ok {
		return cw.ContextWindow(ctx, id)
	}
	return 0, errUnsupported
}

// SupportsImages passes through to the provider when it can tell.
func (m *meter) SupportsImages(ctx context.Context, id string) (bool, error) {
	if is, ok := m.p.(model.ImageSupporter); ok {
		return is.SupportsImages(ctx, id)
	}
	return false, errUnsupported
}

// call makes one metered call of c to p: reserve, send, settle.
func (b *Broker) call(ctx context.Context, c Caller, prov string, p model.Provider, price config.Price, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	// The prompt's bound: its bytes, or a recent call's reported tokens
	// for the part of it that is unchanged (prefix.go).
	key, who := prov+"/"+req.Model, c.key()
	hs := b.prefixes.hashes(req)
	in := b.prefixes.bound(key, req, hs)
	// When that bound leaves the call short, the provider's own count,
	// if it has one (count.go).
	if tc, ok := p.(model.TokenCounter); ok && b.tight(c, in, int64(req.MaxOutputTokens), price) {
		in = b.counted(ctx, c, prov, tc, req, in)
		if err := ctx.Err(); err != nil {
			return model.Response{}, err // gone while counting: nothing reserved or sent
		}
	}
	id, err := newCallID()
	if err != nil {
		return model.Response{}, err
	}

	b.mu.Lock()
	now := b.clock.Now()
	if err := b.rollLocked(now); err != nil {
		b.mu.Unlock()
		return model.Response{}, err
	}
	r, out, err := b.admitLocked(c, in, int64(req.MaxOutputTokens), price, now)
	if err != nil {
		notes := b.refusedLocked(c, err, now)
		tell := b.notify
		b.mu.Unlock()
		b.logger.Warn("call refused", "chick", c.ChickID, "mother", c.mother(), "channel", c.Channel, "tier", c.Tier, "event", c.Event, "err", err)
		b.metrics.ModelCall(c, model.Usage{}, 0, err)
		deliver(tell, notes)
		return model.Response{}, err
	}
	// The output limit sent is what the caps have left after the prompt:
	// the provider cannot answer past what was reserved.
	req.MaxOutputTokens = int(out)
	res := model.Usage{InputTokens: in, OutputTokens: out}
	// The reservation is in the ledger before the call is sent: a Mother
	// killed during the call charges it at her next start.
	line := reservation(now, id, c, prov, req.Model, res, r.micro)
	if err := b.appendLocked(line); err != nil {
		b.reserveLocked(c, r.neg())
		b.mu.Unlock()
		b.logger.Error("cannot record a reservation: call refused", "chick", c.ChickID, "mother", c.mother(), "err", err)
		return model.Response{}, fmt.Errorf("broker: usage ledger: %w", err)
	}
	b.mu.Unlock()

	resp, err := p.Chat(ctx, req, onDelta)
	charged := resp.Usage
	if err != nil && charged.Total() == 0 && ctx.Err() != nil {
		// Abandoned by its caller: the provider may have spent up to the
		// reservation, and nobody reports what.
		charged = res
	}
	if err == nil {
		b.prefixes.note(key, who, hs, charged)
	}
	cost := price.MicroUSD(charged.InputTokens, charged.OutputTokens)
	b.metrics.ModelCall(c, charged, cost, err)
	if rerr := b.settle(c, line, r, charged, cost); rerr != nil {
		b.logger.Error("cannot record usage", "chick", c.ChickID, "mother", c.mother(), "err", rerr)
	}
	return resp, err
}

// newCallID names a call in the ledger (unique across restarts).
func newCallID() (string, error) {
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", fmt.Errorf("broker: call id: %w", err)
	}
	return hex.EncodeToString(r[:]), nil
}

// settle ends the call of reservation line rl: its reservation r is
// released and u, costing cost, charged, in memory at once (so the caps
// hold even if the ledger cannot be written) and in the ledger. The
// notices the settlement brings are delivered after.
func (b *Broker) settle(c Caller, rl Entry, r amount, u model.Usage, cost int64) error {
	b.mu.Lock()
	b.reserveLocked(c, r.neg())
	now := b.clock.Now()
	rerr := b.rollLocked(now)
	b.addLocked(c, u, cost)
	var notes []Notice
	if rerr == nil {
		rerr = b.appendLocked(rl.settlement(now, u, cost))
		notes = b.thresholdsLocked(c, now)
	}
	// Closed: the reservation line stays without its settlement, and the
	// next start charges it whole.
	tell := b.notify
	b.mu.Unlock()
	deliver(tell, notes)
	return rerr
}
