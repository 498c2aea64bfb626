// Package broker makes every model call of every chick (decision 2): a
// chick asks over the nest, the broker picks the provider of the chick's
// tier with keys that never leave Mother, refuses a call that could carry
// a budget past its cap (per chick, per channel per day, per tier per day,
// per requester per day), and meters the tokens in a durable ledger.
//
// # Reserve, then settle
//
// Budgets cannot be raced: every call reserves its most possible cost
// before it is sent, and settles to its real usage after. The reservation
// is an upper estimate of the prompt's tokens (EstimateInput) plus the
// output limit, which Mother clamps: the tier's maxOutputTokens
// (chicks.tiers.<name>.maxOutputTokens, default 8192), lowered by the
// chick's own max_output_tokens when that is smaller. The clamped limit is
// what the provider is sent (Ollama's num_predict, Anthropic's max_tokens),
// so the answer cannot be longer than what was reserved.
//
// Admission, under one lock, for every cap that applies to the call (the
// chick's total, its channel's, its tier's and its requester's today),
// with used the settled tokens, reserved the reservations of the calls in
// flight and r this call's reservation:
//
//   - used + r > cap: refused with model.ErrBudgetExhausted naming the
//     budget (the call could not fit even if every call in flight cost
//     nothing);
//   - used + reserved + r > cap: refused as a transient error matching
//     model.ErrBusy (it may fit once the calls in flight settle; the chick
//     retries);
//   - otherwise reserved += r and the call is sent.
//
// So at every admission used + reserved <= cap, whatever the concurrency.
// When a call ends, reserved -= r and used += its real usage: what the
// provider reported on success (or on failure, if it reported any); zero
// for a call that failed on the provider's side (refused, unreachable, an
// error status); the whole reservation for a call its caller abandoned
// (the chick hung up or its deadline passed: the provider may have
// generated up to the limit and nobody reports it, so a chick cannot get
// answers free by cancelling them near their end).
//
// The bound is exact for the output (a provider does not exceed the limit
// it is sent) and for text in the prompt: EstimateInput counts a token per
// UTF-8 byte, and a byte-level BPE or byte-fallback tokenizer never makes
// more tokens than bytes, plus allowances for what the provider adds (a
// chat template's markers per message, a tool-use system prompt). It is an
// estimate, not a bound, for images (a fixed allowance each) and for a
// model's hidden template text beyond the allowances: only there can a
// call cost more than it reserved, and the excess carries a budget past
// its cap by at most the sum of the excesses of the calls in flight at
// that moment, never by whole calls. The price of the byte count is
// pessimism: a typical prompt has 3 to 4 bytes per token, so the last
// reservation's worth of a budget (about the prompt's bytes plus the
// output limit) may go unused when the next call cannot fit.
//
// A chick has at most chicks.maxModelCallsPerChick calls in flight
// (default 2); a further call is refused at once, before anything is
// reserved or sent, as a transient error matching model.ErrBusy: a
// chick's agent makes one call at a time and retries transient errors, so
// only a chick racing its own calls meets it, and a flood of calls never
// waits inside Mother.
//
// # The ledger, and restarts
//
// The ledger is one JSONL file per day under <dir>/usage/YYYY-MM-DD.jsonl.
// A call writes a reservation line ("kind":"reserve", with its call id and
// reserved "rin"/"rout") before it is sent, and a settlement line (the
// same call id, real "in"/"out") when it ends; only settlement lines count
// as usage (lines of older Mothers, without a call id, are settlements).
// Both are written at once (a killed Mother loses neither) and fsynced
// within a second; a power loss may forget the last second's lines.
// Reservations live in memory; at start the broker reads the ledger back
// and charges every reservation without a settlement (a call that was in
// flight when Mother stopped or was killed, including one whose provider
// had answered before its settlement was written) at its whole
// reservation, writing the settlement ("unsettled":true) so the next
// start does not charge it again. So a restart never lets a call's tokens
// go uncounted.
//
// Days are local days of Mother's host: the daily budgets reset at local
// midnight. A chick's requester is the chat user whose message led to it,
// qualified by adapter ("slack-acme/U123"); chicks of scheduled events have
// none and count against no user's budget.
package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
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

// Caller says who makes a call.
type Caller struct {
	ChickID string
	// Channel is the qualified channel id.
	Channel string
	Tier    string
	// User is the requester, qualified by adapter ("discord/123"); empty
	// for a chick no person asked for (a scheduled event's).
	User string
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
	// Health, when set, keeps the state of the providers of tiers with
	// fallbacks (shared with Mother's own model, for the status page);
	// FirstTokenTimeout is how long such a call waits for its first token
	// before it goes to the next.
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
	// ModelCall: a chick's call through tier ended; usage is what it
	// was charged (zero for a call refused or failed on the provider's
	// side), err its error (nil: success).
	ModelCall(tier string, usage model.Usage, err error)
}

type nopMetrics struct{}

func (nopMetrics) ModelCall(string, model.Usage, error) {}

// Broker is safe for concurrent use.
type Broker struct {
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
	// Settled usage: today's per channel, tier and user, and each chick's
	// total.
	channel map[string]int64
	tier    map[string]int64
	user    map[string]int64
	chick   map[string]model.Usage
	calls   map[string]int
	// Reservations of the calls in flight (not per day: a call admitted
	// before midnight and settled after counts against the new day until
	// it settles), and each chick's calls in flight.
	resChick, resChannel, resTier, resUser map[string]int64
	inFlight                               map[string]int
	// pending collects reservation lines without their settlement while
	// New reads the ledger back; nil afterwards.
	pending map[string]Entry
}

// Entry is one ledger line: a settlement (Kind empty: real usage) or a
// reservation (Kind "reserve": what a call in flight may cost).
type Entry struct {
	Time    time.Time `json:"ts"`
	Kind    string    `json:"kind,omitempty"`
	Call    string    `json:"call,omitempty"`
	Chick   string    `json:"chick"`
	Channel string    `json:"channel"`
	Tier    string    `json:"tier"`
	User    string    `json:"user,omitempty"`
	Model   string    `json:"model"`
	Input   int64     `json:"in"`
	Output  int64     `json:"out"`
	// ReserveIn and ReserveOut, on a reservation, are the prompt's
	// estimate and the output limit.
	ReserveIn  int64 `json:"rin,omitempty"`
	ReserveOut int64 `json:"rout,omitempty"`
	// Unsettled marks the settlement written at start for a reservation
	// that had none: charged whole.
	Unsettled bool `json:"unsettled,omitempty"`
}

// KindReserve marks a reservation line of the ledger.
const KindReserve = "reserve"

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
		tiers: opts.Config.Chicks.Tiers, budgets: opts.Config.Budgets, maxCalls: maxCalls, dir: filepath.Join(opts.Dir, "usage"),
		mkProv: opts.Providers, metrics: opts.Metrics, logger: opts.Logger.With("component", "broker"), clock: opts.Clock, lookback: opts.LookbackDays,
		providers: map[string]model.Provider{}, byTier: map[string]model.Provider{}, answeredBy: map[string][]string{},
		health: opts.Health, firstToken: opts.FirstTokenTimeout, chick: map[string]model.Usage{}, calls: map[string]int{},
		resChick: map[string]int64{}, resChannel: map[string]int64{}, resTier: map[string]int64{}, resUser: map[string]int64{}, inFlight: map[string]int{},
		pending: map[string]Entry{},
	}
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
		e := Entry{Time: today, Call: r.Call, Chick: r.Chick, Channel: r.Channel, Tier: r.Tier, User: r.User, Model: r.Model,
			Input: r.ReserveIn, Output: r.ReserveOut, Unsettled: true}
		b.addLocked(Caller{ChickID: e.Chick, Channel: e.Channel, Tier: e.Tier, User: e.User}, model.Usage{InputTokens: e.Input, OutputTokens: e.Output})
		if _, _, err := b.ledger.AppendDeferred(e); err != nil {
			b.ledger.Close()
			return nil, fmt.Errorf("broker: settle a call left in flight: %w", err)
		}
		b.logger.Warn("a model call was in flight when Mother stopped: charged its whole reservation", "chick", e.Chick, "call", e.Call, "tokens", e.Input+e.Output)
	}
	return b, nil
}

func dayOf(t time.Time) string { return t.Local().Format("2006-01-02") }

func (b *Broker) path(day string) string { return filepath.Join(b.dir, day+".jsonl") }

// scan adds one day's settlements to the chick totals (and, for today, to
// the daily totals), and tracks reservations without their settlement in
// b.pending.
func (b *Broker) scan(day string, today bool) error {
	err := jsonl.Scan(b.path(day), 0, -1, func(line []byte, _, _ int64) error {
		var e Entry
		if json.Unmarshal(line, &e) != nil {
			return nil
		}
		if e.Kind == KindReserve {
			if e.Call != "" && b.pending != nil {
				b.pending[e.Call] = e
			}
			return nil
		}
		if e.Kind != "" {
			return nil // a kind of line this Mother does not know
		}
		if e.Call != "" && b.pending != nil {
			delete(b.pending, e.Call)
		}
		u := model.Usage{InputTokens: e.Input, OutputTokens: e.Output}
		b.chick[e.Chick] = b.chick[e.Chick].Add(u)
		b.calls[e.Chick]++
		if today {
			b.channel[e.Channel] += u.Total()
			b.tier[e.Tier] += u.Total()
			if e.User != "" {
				b.user[e.User] += u.Total()
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("broker: read ledger %s: %w", day, err)
	}
	return nil
}

// rollLocked switches to the day of t, opening its ledger.
func (b *Broker) rollLocked(t time.Time) error {
	if b.closed {
		return errClosed
	}
	day := dayOf(t)
	if day == b.day && b.ledger != nil {
		return nil
	}
	if b.ledger != nil {
		b.ledger.Close()
		b.ledger = nil
	}
	j, torn, err := jsonl.OpenWith(b.path(day), jsonl.Options{Sync: true, Kind: fsync.KindUsage, FlushAfter: ledgerFlushAfter, Clock: clock.Real{}})
	if err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	if torn > 0 {
		b.logger.Warn("repaired torn last line of the usage ledger", "day", day, "bytes", torn)
	}
	b.channel, b.tier, b.user = map[string]int64{}, map[string]int64{}, map[string]int64{}
	if b.day == "" {
		// First open: today's lines count for the daily budgets and the
		// chicks.
		if err := b.scan(day, true); err != nil {
			j.Close()
			return err
		}
	}
	b.day, b.ledger = day, j
	return nil
}

// budgetCap is one cap that applies to a call, with its state.
type budgetCap struct {
	kind, name            string // "chick" "c-1", "channel" "cli/a", "tier" "big", "user" "slack/U1"
	used, reserved, limit int64
}

// capsLocked lists the caps that apply to c. Callers hold b.mu.
func (b *Broker) capsLocked(c Caller) []budgetCap {
	var out []budgetCap
	if lim := b.budgets.ChickTokens.Int64(); lim > 0 {
		out = append(out, budgetCap{"chick", c.ChickID, b.chick[c.ChickID].Total(), b.resChick[c.ChickID], lim})
	}
	if lim := b.budgets.ChannelDailyTokens.Int64(); lim > 0 {
		out = append(out, budgetCap{"channel", c.Channel, b.channel[c.Channel], b.resChannel[c.Channel], lim})
	}
	if lim, ok := b.budgets.TierDailyTokens[c.Tier]; ok && lim > 0 {
		out = append(out, budgetCap{"tier", c.Tier, b.tier[c.Tier], b.resTier[c.Tier], lim.Int64()})
	}
	if lim := b.budgets.UserDailyTokens.Int64(); lim > 0 && c.User != "" {
		out = append(out, budgetCap{"user", c.User, b.user[c.User], b.resUser[c.User], lim})
	}
	return out
}

// exhausted says that k is spent for a call that may cost need (0: a
// spawn's check).
func (b *Broker) exhausted(k budgetCap, need int64) error {
	var call string
	if need > 0 {
		call = fmt.Sprintf("; this call may cost up to %d", need)
	}
	switch k.kind {
	case "chick":
		return model.Wrap(model.ErrBudgetExhausted, "budget exhausted: chick %s used %d of its %d tokens (budgets.chickTokens)%s", k.name, k.used, k.limit, call)
	case "channel":
		return model.Wrap(model.ErrBudgetExhausted, "budget exhausted: channel %s used %d of its %d chick tokens today (budgets.channelDailyTokens)%s", k.name, k.used, k.limit, call)
	case "tier":
		return model.Wrap(model.ErrBudgetExhausted, "budget exhausted: tier %s used %d of its %d tokens today (budgets.tierDailyTokens.%s)%s", k.name, k.used, k.limit, k.name, call)
	}
	return model.Wrap(model.ErrBudgetExhausted, "budget exhausted: user %s used %d of their %d chick tokens today (budgets.userDailyTokens)%s; it resets %s",
		k.name, k.used, k.limit, call, resetText(b.clock.Now()))
}

// admitLocked reserves r for c's call, or says why it may not be sent.
// Callers hold b.mu.
func (b *Broker) admitLocked(c Caller, r int64) error {
	caps := b.capsLocked(c)
	for _, k := range caps {
		if k.used+r > k.limit {
			return b.exhausted(k, r)
		}
	}
	if n := b.inFlight[c.ChickID]; n >= b.maxCalls {
		return &model.TransientError{Err: model.Wrap(model.ErrBusy, "busy: chick %s has %d model calls in flight, as many as chicks.maxModelCallsPerChick allows", c.ChickID, n)}
	}
	for _, k := range caps {
		if k.used+k.reserved+r > k.limit {
			return &model.TransientError{Err: model.Wrap(model.ErrBusy, "busy: %s %s has %d of its %d tokens left and calls in flight hold %d of them; this call may cost up to %d",
				k.kind, k.name, k.limit-k.used, k.limit, k.reserved, r)}
		}
	}
	b.reserveLocked(c, r)
	return nil
}

// reserveLocked adds r (negative: releases) to c's reservations.
func (b *Broker) reserveLocked(c Caller, r int64) {
	step := 1
	if r < 0 {
		step = -1
	}
	bump := func(m map[string]int64, k string) {
		if m[k] += r; m[k] == 0 {
			delete(m, k)
		}
	}
	bump(b.resChick, c.ChickID)
	bump(b.resChannel, c.Channel)
	bump(b.resTier, c.Tier)
	if c.User != "" {
		bump(b.resUser, c.User)
	}
	if b.inFlight[c.ChickID] += step; b.inFlight[c.ChickID] <= 0 {
		delete(b.inFlight, c.ChickID)
	}
}

// addLocked adds settled usage u to c's totals.
func (b *Broker) addLocked(c Caller, u model.Usage) {
	b.chick[c.ChickID] = b.chick[c.ChickID].Add(u)
	b.calls[c.ChickID]++
	b.channel[c.Channel] += u.Total()
	b.tier[c.Tier] += u.Total()
	if c.User != "" {
		b.user[c.User] += u.Total()
	}
}

// ResetAt is when the daily budgets of the day of t reset: the next local
// midnight.
func ResetAt(t time.Time) time.Time {
	l := t.Local()
	return time.Date(l.Year(), l.Month(), l.Day()+1, 0, 0, 0, 0, time.Local)
}

// resetText says when the daily budgets reset, for a person: "at 00:00
// CET (2026-11-24), in 5h12m0s".
func resetText(now time.Time) string {
	r := ResetAt(now)
	return fmt.Sprintf("at %s (%s), in %s", r.Format("15:04 MST"), r.Format("2006-01-02"), r.Sub(now).Truncate(time.Minute))
}

// CheckUser returns an error matching model.ErrBudgetExhausted, saying
// when it resets, when user (qualified by adapter) has spent today's
// budgets.userDailyTokens; nil when they may start another chick, or
// when user is empty. The hatchery asks it before a spawn.
func (b *Broker) CheckUser(user string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.rollLocked(b.clock.Now()); err != nil {
		return err
	}
	lim := b.budgets.UserDailyTokens.Int64()
	if user == "" || lim <= 0 {
		return nil
	}
	if used := b.user[user]; used >= lim {
		return b.exhausted(budgetCap{kind: "user", name: user, used: used, limit: lim}, 0)
	}
	return nil
}

// Prompt estimate allowances (EstimateInput), in tokens.
const (
	// estRequest: a request's fixed part (begin/end markers, a model's
	// short default system text).
	estRequest = 64
	// estMessage: a chat template's markers around one message (role
	// headers, end of turn).
	estMessage = 8
	// estToolCall: the markup around one tool call in the context.
	estToolCall = 16
	// estTools: a provider's own tool-use instructions when tools are
	// offered (Anthropic's is 346 tokens on its current models).
	estTools = 512
	// estTool: the JSON wrapping of one tool's description.
	estTool = 32
	// estImage: one image. Not a bound: Anthropic charges at most about
	// 1,600 tokens an image, most local vision models a fixed 256 to
	// 1,600; a model that tiles large images can charge more.
	estImage = 2048
)

// EstimateInput is the broker's upper estimate of req's prompt tokens:
// one token per UTF-8 byte of every text the prompt holds (system text,
// messages, tool calls and their arguments, tool descriptions and
// schemas; no byte-level tokenizer makes more tokens than bytes), plus
// allowances for what the provider adds around them and a fixed allowance
// per image.
func EstimateInput(req model.Request) int64 {
	n := int64(estRequest + len(req.System))
	for _, m := range req.Messages {
		n += int64(estMessage + len(m.Role) + len(m.Content) + len(m.ToolCallID) + len(m.ToolName))
		for _, tc := range m.ToolCalls {
			n += int64(estToolCall + len(tc.ID) + len(tc.Name) + len(tc.Args))
		}
		n += int64(estImage * len(m.Images))
	}
	if len(req.Tools) > 0 {
		n += estTools
	}
	for _, t := range req.Tools {
		n += int64(estTool + len(t.Name) + len(t.Description) + len(t.Parameters))
	}
	return n
}

// OutputLimit is the output limit a call of tier t is sent with: the
// tier's maxOutputTokens (default 8192), lowered by the caller's own
// limit when that is positive and smaller.
func OutputLimit(t config.Tier, requested int) int {
	limit := t.MaxOutputTokens
	if limit <= 0 {
		limit = config.DefaultTierMaxOutputTokens
	}
	if requested > 0 && requested < limit {
		limit = requested
	}
	return limit
}

// Generate runs one model call for c through the provider of c's tier.
// The call reserves its most possible cost first (see the package
// comment): it fails with an error matching model.ErrBudgetExhausted when
// that does not fit in a budget, and with a transient error matching
// model.ErrBusy when the chick has as many calls in flight as it may or
// the rest of a budget is held by calls in flight. The request's output
// limit is clamped to the tier's.
func (b *Broker) Generate(ctx context.Context, c Caller, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	t, ok := b.tiers[c.Tier]
	if !ok {
		return model.Response{}, fmt.Errorf("broker: unknown tier %q", c.Tier)
	}
	req.Model = t.Model
	req.MaxOutputTokens = OutputLimit(t, req.MaxOutputTokens)
	// Whether the model thinks is the tier's to say, not the chick's.
	req.Think = model.Think(t.Think)
	res := model.Usage{InputTokens: EstimateInput(req), OutputTokens: int64(req.MaxOutputTokens)}
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
	p, err := b.tierProviderLocked(c.Tier, t)
	if err != nil {
		b.mu.Unlock()
		return model.Response{}, fmt.Errorf("broker: tier %s: %w", c.Tier, err)
	}
	if err := b.admitLocked(c, res.Total()); err != nil {
		b.mu.Unlock()
		b.logger.Warn("call refused", "chick", c.ChickID, "channel", c.Channel, "tier", c.Tier, "err", err)
		b.metrics.ModelCall(c.Tier, model.Usage{}, err)
		return model.Response{}, err
	}
	// The reservation is in the ledger before the call is sent: a Mother
	// killed during the call charges it at her next start.
	if _, _, err := b.ledger.AppendDeferred(Entry{Time: now, Kind: KindReserve, Call: id, Chick: c.ChickID, Channel: c.Channel, Tier: c.Tier, User: c.User, Model: t.Model,
		ReserveIn: res.InputTokens, ReserveOut: res.OutputTokens}); err != nil {
		b.reserveLocked(c, -res.Total())
		b.mu.Unlock()
		b.logger.Error("cannot record a reservation: call refused", "chick", c.ChickID, "err", err)
		return model.Response{}, fmt.Errorf("broker: usage ledger: %w", err)
	}
	b.mu.Unlock()

	resp, err := p.Chat(ctx, req, onDelta)
	if err == nil && resp.AnsweredBy != "" {
		b.noteAnswered(c.ChickID, resp.AnsweredBy)
	}
	charged := resp.Usage
	if err != nil && charged.Total() == 0 && ctx.Err() != nil {
		// Abandoned by its caller: the provider may have spent up to the
		// reservation, and nobody reports what.
		charged = res
	}
	b.metrics.ModelCall(c.Tier, charged, err)
	if rerr := b.settle(c, id, t.Model, res, charged); rerr != nil {
		b.logger.Error("cannot record usage", "chick", c.ChickID, "err", rerr)
	}
	if err != nil {
		return resp, err
	}
	return resp, nil
}

// newCallID names a call in the ledger (unique across restarts).
func newCallID() (string, error) {
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", fmt.Errorf("broker: call id: %w", err)
	}
	return hex.EncodeToString(r[:]), nil
}

// ledgerFlushAfter bounds how long a ledger line stays without fsync.
const ledgerFlushAfter = time.Second

// settle ends call id of c: its reservation res is released and u is
// charged, in memory at once (so the budgets hold even if the ledger
// cannot be written) and in the ledger. The line is written at once (a
// killed process loses none) and fsynced within ledgerFlushAfter, not
// before the call returns: nobody is told about it, the budgets are
// enforced from the totals in memory, and a fsync under b.mu would hold
// every other chick's model call behind it. A power loss may forget the
// last second's lines, which then do not count against the day's budgets.
func (b *Broker) settle(c Caller, id, modelID string, res, u model.Usage) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reserveLocked(c, -res.Total())
	now := b.clock.Now()
	rerr := b.rollLocked(now)
	b.addLocked(c, u)
	if rerr != nil {
		// Closed: the reservation line stays without its settlement, and
		// the next start charges it whole.
		return rerr
	}
	_, _, err := b.ledger.AppendDeferred(Entry{Time: now, Call: id, Chick: c.ChickID, Channel: c.Channel, Tier: c.Tier, User: c.User, Model: modelID, Input: u.InputTokens, Output: u.OutputTokens})
	return err
}

// ChickUsage is the tokens chick id used so far (settled calls).
func (b *Broker) ChickUsage(id string) model.Usage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.chick[id]
}

// ForgetChick drops chick id's totals (hatchery.Forgetter): the hatchery
// forgot the ended chick, and nothing asks for them again. Its entries
// stay in the ledger.
func (b *Broker) ForgetChick(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.chick, id)
	delete(b.calls, id)
	delete(b.answeredBy, id)
}

// tierProviderLocked is tier's provider: its own, or a chain of it and
// its fallbacks. Each is built once.
func (b *Broker) tierProviderLocked(name string, t config.Tier) (model.Provider, error) {
	if p, ok := b.byTier[name]; ok {
		return p, nil
	}
	byName := func(n string) (model.Provider, error) {
		if p, ok := b.providers[n]; ok {
			return p, nil
		}
		p, err := b.mkProv(n)
		if err != nil {
			return nil, err
		}
		b.providers[n] = p
		return p, nil
	}
	p, err := byName(t.Provider)
	if err != nil {
		return nil, err
	}
	if len(t.Fallbacks) > 0 {
		targets := []fallback.Target{{Name: t.Provider, Model: t.Model, Provider: p}}
		for _, fb := range t.Fallbacks {
			fp, err := byName(fb.Provider)
			if err != nil {
				return nil, fmt.Errorf("fallback %s: %w", fb.Provider, err)
			}
			targets = append(targets, fallback.Target{Name: fb.Provider, Model: fb.Model, Provider: fp})
		}
		h := b.health
		if h == nil {
			h = fallback.NewHealth(b.clock, 0, 0)
			b.health = h
		}
		chain := fallback.New(h, b.firstToken, targets...)
		chain.OnFallback = func(from, to fallback.Target, err error) {
			b.logger.Warn("model call goes to a fallback", "tier", name, "from", from.String(), "to", to.String(), "err", err)
		}
		p = chain
	}
	b.byTier[name] = p
	return p, nil
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

// ChickCalls is how many model calls chick id made.
func (b *Broker) ChickCalls(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[id]
}

// Budget is one budget's state.
type Budget struct {
	// Scope says it in words: "tier local today".
	Scope string
	// Kind is "tier", "channel" or "user"; Name the tier, the qualified
	// channel or the qualified user.
	Kind, Name string
	// Used is settled usage; Reserved what calls in flight may still add.
	Used, Reserved int64
	// Limit is 0 when there is no cap.
	Limit int64
}

// Budgets reports today's daily budgets (and per-channel and per-user
// usage).
func (b *Broker) Budgets() []Budget {
	b.mu.Lock()
	defer b.mu.Unlock()
	_ = b.rollLocked(b.clock.Now())
	var out []Budget
	for _, t := range slices.Sorted(keys(b.tiers)) {
		out = append(out, Budget{Scope: "tier " + t + " today", Kind: "tier", Name: t, Used: b.tier[t], Reserved: b.resTier[t], Limit: b.budgets.TierDailyTokens[t].Int64()})
	}
	for _, ch := range slices.Sorted(keys(union(b.channel, b.resChannel))) {
		out = append(out, Budget{Scope: "channel " + ch + " today", Kind: "channel", Name: ch, Used: b.channel[ch], Reserved: b.resChannel[ch], Limit: b.budgets.ChannelDailyTokens.Int64()})
	}
	for _, u := range slices.Sorted(keys(union(b.user, b.resUser))) {
		out = append(out, Budget{Scope: "user " + u + " today", Kind: "user", Name: u, Used: b.user[u], Reserved: b.resUser[u], Limit: b.budgets.UserDailyTokens.Int64()})
	}
	return out
}

func union(a, b map[string]int64) map[string]int64 {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]int64{}
	}
	for k := range b {
		out[k] += 0
	}
	return out
}

func keys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
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
