// Package broker makes every model call of every chick (decision 2): a
// chick asks over the nest, the broker picks the provider of the chick's
// tier with keys that never leave Mother, refuses a call once a budget is
// spent (per chick, per channel per day, per tier per day, per requester
// per day), and meters the tokens in a durable ledger.
//
// The ledger is one JSONL file per day under <dir>/usage/YYYY-MM-DD.jsonl,
// each call one fsynced line, so usage survives a restart. A call is
// refused when a budget is already reached; the call that crosses a budget
// completes (its size is not known in advance), so a budget can be
// overshot by at most one call.
//
// Days are local days of Mother's host: the daily budgets reset at local
// midnight. A chick's requester is the chat user whose message led to it,
// qualified by adapter ("slack-acme/U123"); chicks of scheduled events have
// none and count against no user's budget.
package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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
	Logger    *slog.Logger
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
	// cost (zero for a failed call), err its error (nil: success).
	ModelCall(tier string, usage model.Usage, err error)
}

type nopMetrics struct{}

func (nopMetrics) ModelCall(string, model.Usage, error) {}

// Broker is safe for concurrent use.
type Broker struct {
	tiers    map[string]config.Tier
	budgets  config.Budgets
	dir      string
	mkProv   ProviderFunc
	metrics  Metrics
	logger   *slog.Logger
	clock    clock.Clock
	lookback int

	mu        sync.Mutex
	providers map[string]model.Provider
	day       string
	ledger    *jsonl.File
	channel   map[string]int64
	tier      map[string]int64
	user      map[string]int64
	chick     map[string]model.Usage
	calls     map[string]int
}

// Entry is one ledger line.
type Entry struct {
	Time    time.Time `json:"ts"`
	Chick   string    `json:"chick"`
	Channel string    `json:"channel"`
	Tier    string    `json:"tier"`
	User    string    `json:"user,omitempty"`
	Model   string    `json:"model"`
	Input   int64     `json:"in"`
	Output  int64     `json:"out"`
}

// New opens the ledger and rebuilds today's totals.
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
	b := &Broker{
		tiers: opts.Config.Chicks.Tiers, budgets: opts.Config.Budgets, dir: filepath.Join(opts.Dir, "usage"),
		mkProv: opts.Providers, metrics: opts.Metrics, logger: opts.Logger.With("component", "broker"), clock: opts.Clock, lookback: opts.LookbackDays,
		providers: map[string]model.Provider{}, chick: map[string]model.Usage{}, calls: map[string]int{},
	}
	if err := os.MkdirAll(b.dir, 0o700); err != nil {
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
	return b, nil
}

func dayOf(t time.Time) string { return t.Local().Format("2006-01-02") }

func (b *Broker) path(day string) string { return filepath.Join(b.dir, day+".jsonl") }

// scan adds one day's ledger to the chick totals (and, for today, to the
// daily totals).
func (b *Broker) scan(day string, today bool) error {
	err := jsonl.Scan(b.path(day), 0, -1, func(line []byte, _, _ int64) error {
		var e Entry
		if json.Unmarshal(line, &e) != nil {
			return nil
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

// check returns a budget error when c may not make another call. Callers
// hold b.mu.
func (b *Broker) check(c Caller) error {
	if lim := b.budgets.ChickTokens; lim > 0 {
		if used := b.chick[c.ChickID].Total(); used >= lim {
			return model.Wrap(model.ErrBudgetExhausted, "budget exhausted: chick %s used %d of its %d tokens", c.ChickID, used, lim)
		}
	}
	if lim := b.budgets.ChannelDailyTokens; lim > 0 {
		if used := b.channel[c.Channel]; used >= lim {
			return model.Wrap(model.ErrBudgetExhausted, "budget exhausted: channel %s used %d of its %d chick tokens today", c.Channel, used, lim)
		}
	}
	if lim, ok := b.budgets.TierDailyTokens[c.Tier]; ok && lim > 0 {
		if used := b.tier[c.Tier]; used >= lim {
			return model.Wrap(model.ErrBudgetExhausted, "budget exhausted: tier %s used %d of its %d tokens today", c.Tier, used, lim)
		}
	}
	return b.checkUser(c.User)
}

// checkUser returns a budget error when user has spent today's tokens.
// Callers hold b.mu.
func (b *Broker) checkUser(user string) error {
	lim := b.budgets.UserDailyTokens
	if user == "" || lim <= 0 {
		return nil
	}
	if used := b.user[user]; used >= lim {
		return model.Wrap(model.ErrBudgetExhausted, "budget exhausted: user %s used %d of their %d chick tokens today (budgets.userDailyTokens); it resets %s",
			user, used, lim, resetText(b.clock.Now()))
	}
	return nil
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
	return b.checkUser(user)
}

// Generate runs one model call for c through the provider of c's tier.
// It fails with an error matching model.ErrBudgetExhausted when a budget
// is spent.
func (b *Broker) Generate(ctx context.Context, c Caller, req model.Request, onDelta func(string)) (model.Response, error) {
	t, ok := b.tiers[c.Tier]
	if !ok {
		return model.Response{}, fmt.Errorf("broker: unknown tier %q", c.Tier)
	}
	b.mu.Lock()
	if err := b.rollLocked(b.clock.Now()); err != nil {
		b.mu.Unlock()
		return model.Response{}, err
	}
	if err := b.check(c); err != nil {
		b.mu.Unlock()
		b.logger.Warn("call refused", "chick", c.ChickID, "channel", c.Channel, "tier", c.Tier, "err", err)
		b.metrics.ModelCall(c.Tier, model.Usage{}, err)
		return model.Response{}, err
	}
	p, ok := b.providers[t.Provider]
	if !ok {
		var err error
		p, err = b.mkProv(t.Provider)
		if err != nil {
			b.mu.Unlock()
			return model.Response{}, fmt.Errorf("broker: tier %s: %w", c.Tier, err)
		}
		b.providers[t.Provider] = p
	}
	b.mu.Unlock()

	req.Model = t.Model
	resp, err := p.Chat(ctx, req, onDelta)
	b.metrics.ModelCall(c.Tier, resp.Usage, err)
	if err != nil {
		return resp, err
	}
	if rerr := b.record(c, t.Model, resp.Usage); rerr != nil {
		b.logger.Error("cannot record usage", "chick", c.ChickID, "err", rerr)
	}
	return resp, nil
}

// ledgerFlushAfter bounds how long a ledger line stays without fsync.
const ledgerFlushAfter = time.Second

// record meters one call. The ledger line is written at once (a killed
// process loses none) and fsynced within ledgerFlushAfter, not before the
// call returns: nobody is told about it, the budgets are enforced from
// the totals in memory, and a fsync under b.mu would hold every other
// chick's model call behind it. A power loss may forget the last second's
// usage, which then does not count against the day's budgets.
func (b *Broker) record(c Caller, modelID string, u model.Usage) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	if err := b.rollLocked(now); err != nil {
		return err
	}
	b.chick[c.ChickID] = b.chick[c.ChickID].Add(u)
	b.calls[c.ChickID]++
	b.channel[c.Channel] += u.Total()
	b.tier[c.Tier] += u.Total()
	if c.User != "" {
		b.user[c.User] += u.Total()
	}
	_, _, err := b.ledger.AppendDeferred(Entry{Time: now, Chick: c.ChickID, Channel: c.Channel, Tier: c.Tier, User: c.User, Model: modelID, Input: u.InputTokens, Output: u.OutputTokens})
	return err
}

// ChickUsage is the tokens chick id used so far.
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
	Used       int64
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
		out = append(out, Budget{Scope: "tier " + t + " today", Kind: "tier", Name: t, Used: b.tier[t], Limit: b.budgets.TierDailyTokens[t]})
	}
	for _, ch := range slices.Sorted(keys(b.channel)) {
		out = append(out, Budget{Scope: "channel " + ch + " today", Kind: "channel", Name: ch, Used: b.channel[ch], Limit: b.budgets.ChannelDailyTokens})
	}
	for _, u := range slices.Sorted(keys(b.user)) {
		out = append(out, Budget{Scope: "user " + u + " today", Kind: "user", Name: u, Used: b.user[u], Limit: b.budgets.UserDailyTokens})
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

// Close closes the ledger.
func (b *Broker) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ledger == nil {
		return nil
	}
	err := b.ledger.Close()
	b.ledger = nil
	return err
}
