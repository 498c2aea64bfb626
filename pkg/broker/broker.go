// Package broker makes every model call, a chick's (decision 2) and
// Mother's own: a chick asks over the nest, the broker picks the provider
// of the chick's tier with keys that never leave Mother; Mother's runs
// call her model through the provider MotherModel returns. Either way the
// broker refuses a call that could carry a cap past its limit, and meters
// tokens and their cost in a durable ledger.
//
// # Caps
//
// A cap is a limit in tokens, in US dollars or both on one scope:
//
//   - a chick's calls: its total (budgets.chickTokens, chickUSD), its
//     channel's, its tier's and its requester's today
//     (channelDailyTokens/USD, tierDailyTokens/USD, userDailyTokens/USD);
//   - Mother's own calls (her runs, their compaction, every retry and
//     fallback): hers today in all, in the run's channel today and for
//     the run's scheduled event today (budgets.mother.*). They also count,
//     in money only, against their channel's and their person's daily
//     money caps, which chicks and Mother share; the token caps of
//     channels and persons stay the chicks' own.
//
// A call's cost is its tokens at the price of the model that answers it
// (config prices; chicks.tiers.<name>.price for a tier's own model), in
// micro-dollars rounded up.
//
// # Reserve, then settle
//
// Caps cannot be raced: every call reserves its most possible cost before
// it is sent, and settles to its real usage after. The reservation is an
// upper bound of the prompt's tokens plus the output limit, and their cost
// at the model's price. The prompt's bound is EstimateInput (a token per
// byte), or less when a recent call of the same model shares a prefix with
// this one: the shared part counts what the provider reported for it, and
// only the messages added since count by their bytes (prefix.go). When
// that bound would refuse the call or lower its output limit, and the
// provider counts prompts itself (model.TokenCounter: Anthropic's
// /v1/messages/count_tokens, vLLM's /tokenize), its count plus 2% and 16 tokens bounds the
// prompt instead, if it is less; a count that fails or takes more than 3
// seconds leaves the bound as it was (count.go). A call with room is sent
// without counting. The output limit is a tier's maxOutputTokens, lowered by the chick's own
// max_output_tokens when that is smaller (model.maxOutputTokens for
// Mother's own calls), and lowered again to what every cap has left after
// the prompt's bound (admitLocked). That limit is what the provider is
// sent (Ollama's num_predict, max_tokens elsewhere), so the answer cannot
// be longer than what was reserved, and a budget is spent to about one
// prompt of its end.
//
// A model with fallbacks is a chain of metered providers: each model the
// chain tries reserves and settles on its own, at its own price, so a
// call that a fallback takes counts the first model's attempt too.
//
// Admission, under one lock, for every cap that applies to the call, in
// each of its units, with used the settled amount, reserved the
// reservations of the calls in flight and r this call's reservation:
//
// (r here is the prompt's bound and the least output, minOutput; the
// output limit is then lowered to fit what is left.)
//
//   - used + r > cap: refused with a model.BudgetError (matching
//     model.ErrBudgetExhausted) naming the cap and when it resets (the
//     call could not fit even if every call in flight cost nothing);
//   - used + reserved + r > cap: refused as a transient error matching
//     model.ErrBusy (it may fit once the calls in flight settle; the
//     caller retries);
//   - otherwise reserved += r and the call is sent.
//
// So at every admission used + reserved <= cap, whatever the concurrency.
// When a call ends, reserved -= r and used += its real usage: what the
// provider reported on success (or on failure, if it reported any); zero
// for a call that failed on the provider's side (refused, unreachable, an
// error status); the whole reservation for a call its caller abandoned
// (the chick hung up, its deadline passed, a fallback chain gave up
// waiting for a first token: the provider may have generated up to the
// limit and nobody reports it, so nobody gets answers free by cancelling
// them near their end).
//
// The bound is exact for the output (a provider does not exceed the limit
// it is sent) and for text in the prompt: EstimateInput counts a token per
// UTF-8 byte, and a byte-level BPE or byte-fallback tokenizer never makes
// more tokens than bytes, plus allowances for what the provider adds (a
// chat template's markers per message, a tool-use system prompt). It is an
// estimate, not a bound, for images (counted by their size, ImageTokens), for a
// model's hidden template text beyond the allowances and for a provider's
// count (an estimate by the provider's own word): only there can a
// call cost more than it reserved, and the excess carries a cap past its
// limit by at most the sum of the excesses of the calls in flight at that
// moment, never by whole calls. The price of the byte count is pessimism:
// a typical prompt has 3 to 4 bytes per token, so the last reservation's
// worth of a cap (about the prompt's bytes plus the output limit) may go
// unused when the next call cannot fit.
//
// A chick has at most chicks.maxModelCallsPerChick calls in flight
// (default 2); a further call is refused at once, before anything is
// reserved or sent, as a transient error matching model.ErrBusy: a
// chick's agent makes one call at a time and retries transient errors, so
// only a chick racing its own calls meets it, and a flood of calls never
// waits inside Mother. Mother's own calls in flight are bounded by
// model.maxParallel.
//
// # Warnings
//
// When a call's settlement brings a daily cap to 80% of its limit, and
// when a daily cap first refuses a call, the broker hands a Notice to the
// notifier (SetNotifier: Mother says it in the channel concerned), once
// per cap, unit and level per day. The marks are ledger lines, so a
// restart does not say them again.
//
// # The ledger, and restarts
//
// The ledger is one JSONL file per day under <dir>/usage/YYYY-MM-DD.jsonl.
// A call writes a reservation line ("kind":"reserve", or "mother-reserve"
// for Mother's own, with its call id and reserved "rin"/"rout" and
// "rcostMicroUSD") before it is sent, and a settlement line (the same call
// id, real "in"/"out" and "costMicroUSD"; kind empty for a chick's call,
// "mother" for Mother's own) when it ends; only settlement lines count as
// usage (lines of older Mothers, without a call id or a cost, are
// settlements that cost nothing; older Mothers skip the kinds they do not
// know). Both are written at once (a killed Mother loses neither) and
// fsynced within a second; a power loss may forget the last second's
// lines. Reservations live in memory; at start the broker reads the ledger
// back and charges every reservation without a settlement (a call that was
// in flight when Mother stopped or was killed, including one whose
// provider had answered before its settlement was written) at its whole
// reservation, writing the settlement ("unsettled":true) so the next start
// does not charge it again. So a restart never lets a call's tokens or
// cost go uncounted.
//
// Days are local days of Mother's host: the daily caps reset at local
// midnight. A chick's requester is the chat user whose message led to it,
// qualified by adapter ("slack-acme/U123"); chicks of scheduled events have
// none and count against no user's caps.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/jsonl"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/fallback"
)

// CallerKind says whose a call is.
type CallerKind string

// Caller kinds.
const (
	// CallerChick is a chick's call (also an empty Kind).
	CallerChick CallerKind = "chick"
	// CallerMother is one of Mother's own calls.
	CallerMother CallerKind = "mother"
)

// Caller says who makes a call.
type Caller struct {
	// Kind is CallerChick (the default) or CallerMother.
	Kind    CallerKind
	ChickID string
	// Channel is the qualified channel id.
	Channel string
	Tier    string
	// User is the requester, qualified by adapter ("discord/123"); empty
	// for a chick no person asked for (a scheduled event's) and for
	// Mother's runs of events.
	User string
	// Event is the event file of Mother's run of a scheduled event
	// ("backup.json").
	Event string
}

func (c Caller) mother() bool { return c.Kind == CallerMother }

// key names c's run of calls: a chick, or Mother's runs in a channel (for
// an event).
func (c Caller) key() string {
	if c.mother() {
		return "mother\x00" + c.Channel + "\x00" + c.Event
	}
	return "chick\x00" + c.ChickID
}

// ProviderFunc builds the provider named name ("ollama", "anthropic").
type ProviderFunc func(name string) (model.Provider, error)

// Options build a Broker.
type Options struct {
	Config *config.Config
	// Dir holds the ledger (<data>/chicks).
	Dir string
	// Providers builds providers by name.
	Providers ProviderFunc
	// Health, when set, keeps the state of the providers of models with
	// fallbacks (shared with the status page); FirstTokenTimeout is how
	// long such a call waits for its first token before it goes to the
	// next.
	Health            *fallback.Health
	FirstTokenTimeout time.Duration
	Logger            *slog.Logger
	// Clock tells the time (default clock.Real).
	Clock clock.Clock
	// LookbackDays of ledger are read at start to rebuild each chick's
	// total (default 2: a chick may span midnight).
	LookbackDays int
	// Metrics hears every metered call (nil: nothing is counted).
	Metrics Metrics
}

// Metrics hears what the broker can count; pkg/metrics implements it.
type Metrics interface {
	// ModelCall: a call of c ended; usage is what it was charged (zero
	// for a call refused or failed on the provider's side) and cost its
	// price in micro-dollars, err its error (nil: success).
	ModelCall(c Caller, usage model.Usage, costMicroUSD int64, err error)
}

type nopMetrics struct{}

func (nopMetrics) ModelCall(Caller, model.Usage, int64, error) {}

// Broker is safe for concurrent use.
type Broker struct {
	cfg      *config.Config
	tiers    map[string]config.Tier
	budgets  config.Budgets
	maxCalls int
	dir      string
	mkProv   ProviderFunc
	metrics  Metrics
	logger   *slog.Logger
	clock    clock.Clock
	lookback int

	health     *fallback.Health
	firstToken time.Duration

	mu        sync.Mutex
	closed    bool
	providers map[string]model.Provider // by provider name
	byTier    map[string]model.Provider // a tier's, with its fallbacks
	// answeredBy are the fallbacks that answered each chick's calls.
	answeredBy map[string][]string
	day        string
	ledger     *jsonl.File
	// chick is each chick's settled total (over the lookback days);
	// daily the settled amounts of today's daily scopes.
	chick map[string]tally
	daily map[scope]amount
	// res are the reservations of the calls in flight per scope (not per
	// day: a call admitted before midnight and settled after counts
	// against the new day until it settles), and inFlight each chick's
	// calls in flight.
	res      map[scope]amount
	inFlight map[string]int
	// warned are today's notices already given (notices.go).
	warned map[string]bool
	notify func(Notice)
	// pending collects reservation lines without their settlement while
	// New reads the ledger back; nil afterwards.
	pending map[string]Entry
	// prefixes bound a prompt by what recent calls were charged.
	prefixes *prefixes
}

// tally is one chick's settled calls.
type tally struct {
	usage model.Usage
	micro int64
	calls int
}

// errClosed: the broker was closed (Mother is stopping).
var errClosed = errors.New("broker: closed")

// New opens the ledger and rebuilds today's totals; a reservation the
// ledger holds without its settlement is charged whole.
func New(opts Options) (*Broker, error) {
	if opts.Config == nil || opts.Dir == "" || opts.Providers == nil {
		return nil, errors.New("broker: config, dir and providers are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.LookbackDays <= 0 {
		opts.LookbackDays = 2
	}
	if opts.Metrics == nil {
		opts.Metrics = nopMetrics{}
	}
	maxCalls := opts.Config.Chicks.MaxModelCallsPerChick
	if maxCalls <= 0 {
		maxCalls = config.DefaultMaxModelCallsPerChick
	}
	b := &Broker{
		cfg: opts.Config, tiers: opts.Config.Chicks.Tiers, budgets: opts.Config.Budgets, maxCalls: maxCalls, dir: filepath.Join(opts.Dir, "usage"),
		mkProv: opts.Providers, metrics: opts.Metrics, logger: opts.Logger.With("component", "broker"), clock: opts.Clock, lookback: opts.LookbackDays,
		providers: map[string]model.Provider{}, byTier: map[string]model.Provider{}, answeredBy: map[string][]string{},
		health: opts.Health, firstToken: opts.FirstTokenTimeout, chick: map[string]tally{},
		res: map[scope]amount{}, inFlight: map[string]int{}, pending: map[string]Entry{},
		prefixes: newPrefixes(),
	}
	b.warnUnpriced()
	if err := fsync.MkdirAll(b.dir, 0o700); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	today := b.clock.Now()
	for i := b.lookback; i >= 1; i-- {
		if err := b.scan(dayOf(today.AddDate(0, 0, -i)), false); err != nil {
			return nil, err
		}
	}
	if err := b.rollLocked(today); err != nil {
		return nil, err
	}
	// Calls in flight when Mother stopped: charged whole, and settled in
	// the ledger so that the next start does not charge them again.
	orphans := slices.SortedFunc(maps.Values(b.pending), func(x, y Entry) int { return x.Time.Compare(y.Time) })
	b.pending = nil
	for _, r := range orphans {
		e := r.settlement(today, model.Usage{InputTokens: r.ReserveIn, OutputTokens: r.ReserveOut}, r.ReserveCost)
		e.Unsettled = true
		b.addLocked(e.caller(), model.Usage{InputTokens: e.Input, OutputTokens: e.Output}, e.Cost)
		if _, _, err := b.ledger.AppendDeferred(e); err != nil {
			b.ledger.Close()
			return nil, fmt.Errorf("broker: settle a call left in flight: %w", err)
		}
		b.logger.Warn("a model call was in flight when Mother stopped: charged its whole reservation", "chick", e.Chick, "mother", e.Kind == KindMother, "channel", e.Channel,
			"call", e.Call, "tokens", e.Input+e.Output, "cost", config.FormatMicroUSD(e.Cost))
	}
	return b, nil
}

// warnUnpriced logs each model of a tier that costs nothing only because
// no price is known for it (a local server's are free unless priced).
func (b *Broker) warnUnpriced() {
	for _, name := range slices.Sorted(maps.Keys(b.tiers)) {
		t := b.tiers[name]
		if _, known := b.cfg.TierPrice(name); !known && t.Provider != "ollama" {
			b.logger.Warn("a tier's model has no price: its calls cost nothing in the money caps (set prices in config.json)", "tier", name, "model", t.Provider+"/"+t.Model)
		}
		for _, fb := range t.Fallbacks {
			if _, known := b.cfg.PriceOf(fb.Provider, fb.Model); !known && fb.Provider != "ollama" {
				b.logger.Warn("a tier's fallback has no price: its calls cost nothing in the money caps (set prices in config.json)", "tier", name, "model", fb.Provider+"/"+fb.Model)
			}
		}
	}
}

// SetNotifier sets who hears the spend notices (Mother, once she exists):
// f is called without the broker's lock, from the goroutine of the call
// that crossed the threshold, and should not block.
func (b *Broker) SetNotifier(f func(Notice)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.notify = f
}

// Generate runs one model call for chick caller c through the provider of
// c's tier. Each model it tries reserves its most possible cost first
// (see the package comment): the call fails with an error matching
// model.ErrBudgetExhausted when that does not fit in a cap, and with a
// transient error matching model.ErrBusy when the chick has as many calls
// in flight as it may or the rest of a cap is held by calls in flight.
// The request's output limit is clamped to the tier's.
func (b *Broker) Generate(ctx context.Context, c Caller, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	if c.mother() {
		return model.Response{}, errors.New("broker: Generate is for chicks; Mother's calls go through MotherModel")
	}
	c.Kind = CallerChick
	t, ok := b.tiers[c.Tier]
	if !ok {
		return model.Response{}, fmt.Errorf("broker: unknown tier %q", c.Tier)
	}
	req.Model = t.Model
	req.MaxOutputTokens = OutputLimit(t, req.MaxOutputTokens)
	// Whether the model thinks is the tier's to say, not the chick's.
	req.Think = model.Think(t.Think)
	b.mu.Lock()
	p, err := b.tierProviderLocked(c.Tier, t)
	b.mu.Unlock()
	if err != nil {
		return model.Response{}, fmt.Errorf("broker: tier %s: %w", c.Tier, err)
	}
	resp, err := p.Chat(withCaller(ctx, c), req, onDelta)
	if err == nil && resp.AnsweredBy != "" {
		b.noteAnswered(c.ChickID, resp.AnsweredBy)
	}
	return resp, err
}

// ChickUsage is the tokens chick id used so far (settled calls).
func (b *Broker) ChickUsage(id string) model.Usage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.chick[id].usage
}

// ChickCost is what chick id's settled calls cost so far, in
// micro-dollars.
func (b *Broker) ChickCost(id string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.chick[id].micro
}

// ChickCalls is how many model calls chick id made.
func (b *Broker) ChickCalls(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.chick[id].calls
}

// ForgetChick drops chick id's totals (hatchery.Forgetter): the hatchery
// forgot the ended chick, and nothing asks for them again. Its entries
// stay in the ledger.
func (b *Broker) ForgetChick(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.chick, id)
	delete(b.answeredBy, id)
	b.prefixes.forget(Caller{ChickID: id}.key())
}

// Close closes the ledger. Calls still in flight settle in memory only;
// their reservations stay in the ledger, and the next start charges them
// whole.
func (b *Broker) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if b.ledger == nil {
		return nil
	}
	err := b.ledger.Close()
	b.ledger = nil
	return err
}
