package broker

import (
	"context"
	"time"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
)

// A provider that counts a prompt's tokens itself (model.TokenCounter:
// Anthropic's /v1/messages/count_tokens, vLLM's /tokenize) can tell a call's prompt more
// tightly than its bytes. Counting costs a round trip, so the broker asks
// only when the byte bound would refuse the call or send it with less
// than its full output limit: the common call, with room, is sent at
// once.

// countTimeout is how long the broker waits for a provider's count; past
// it the byte bound is used. The count answers in a fraction of a second
// when the API is well.
const countTimeout = 3 * time.Second

// countMargin is what the broker adds to a provider's count. Anthropic
// calls its count an estimate from which the call's usage "may differ by
// a small amount"; 2% and 16 tokens cover that. The count also holds
// tokens Anthropic adds and does not bill, so it errs high more than low.
// vLLM's is its own tokenizer over the chat template; the margin covers
// what a model's chat_template_kwargs (sent with the call, not with the
// count) change in the template. A call that costs more than it reserved is charged what it cost, as
// any other call.
func countMargin(n int64) int64 { return n/50 + 16 }

// tight reports whether c's call, with a prompt bound of in tokens and an
// output limit of out, would be refused by a cap or sent with a lower
// output limit. The reservation decides for real later; this only says
// whether counting could help.
func (b *Broker) tight(c Caller, in, out int64, price config.Price) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	if err := b.rollLocked(now); err != nil {
		return false // the call fails on it anyway
	}
	got, err := b.fitLocked(c, in, out, price, now, false)
	return err != nil || got < out
}

// counted is the prompt bound of req by tc's count plus countMargin when
// that is less than in, the bound the broker has; in when the count fails
// or says more.
func (b *Broker) counted(ctx context.Context, c Caller, prov string, tc model.TokenCounter, req model.Request, in int64) int64 {
	ctx, cancel := context.WithTimeout(ctx, countTimeout)
	defer cancel()
	start := b.clock.Now()
	n, err := tc.CountTokens(ctx, req)
	if err != nil {
		b.logger.Debug("the provider could not count a prompt's tokens: its bytes bound it", "provider", prov, "model", req.Model,
			"chick", c.ChickID, "mother", c.mother(), "bound", in, "err", err)
		return in
	}
	bound := int64(n) + countMargin(int64(n))
	b.logger.Debug("the provider counted a prompt's tokens", "provider", prov, "model", req.Model, "chick", c.ChickID, "mother", c.mother(),
		"count", n, "bound", min(in, bound), "bytes", in, "took", b.clock.Now().Sub(start))
	return min(in, bound)
}
