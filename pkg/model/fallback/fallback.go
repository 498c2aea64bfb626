// Package fallback is a model.Provider that tries a list of providers in
// turn: when the first is unreachable, overloaded (HTTP 429, 503, 529) or
// silent past its first-token timeout, the call goes to the next. A
// provider that keeps failing is skipped for a cool-down; Health tells
// which are down, for the status page and momctl status.
package fallback

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/model"
)

// Target is one model on one provider.
type Target struct {
	// Name is the provider as config names it ("ollama",
	// "openai:vllm"); Health keeps its state by this name.
	Name     string
	Model    string
	Provider model.Provider
}

func (t Target) String() string { return t.Name + "/" + t.Model }

// Health is the state of every provider of every chain: failures in a row
// and, after Failures of them, a cool-down during which chains skip it
// for their next target. It is safe for concurrent use.
type Health struct {
	clock    clock.Clock
	cooldown time.Duration
	failures int

	mu    sync.Mutex
	state map[string]*state
}

type state struct {
	failures  int
	downUntil time.Time
	since     time.Time // down since
	lastErr   string
	lastOK    time.Time
}

// NewHealth returns a Health that cools a provider down for cooldown
// after failures failed calls in a row (defaults: 1 minute, 2).
func NewHealth(clk clock.Clock, cooldown time.Duration, failures int) *Health {
	if clk == nil {
		clk = clock.Real{}
	}
	if cooldown <= 0 {
		cooldown = time.Minute
	}
	if failures <= 0 {
		failures = 2
	}
	return &Health{clock: clk, cooldown: cooldown, failures: failures, state: map[string]*state{}}
}

// Status is what Health knows of one provider.
type Status struct {
	Name string
	// Down is set while the provider cools down, until Until.
	Down  bool
	Since time.Time
	Until time.Time
	// Failures is the failed calls in a row; LastError the last one's.
	Failures  int
	LastError string
	// LastOK is when it last answered.
	LastOK time.Time
}

// Statuses returns every provider a chain has called, sorted by name.
func (h *Health) Statuses() []Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.clock.Now()
	out := make([]Status, 0, len(h.state))
	for name, s := range h.state {
		st := Status{Name: name, Failures: s.failures, LastError: s.lastErr, LastOK: s.lastOK}
		if now.Before(s.downUntil) {
			st.Down, st.Since, st.Until = true, s.since, s.downUntil
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// down reports whether name is cooling down.
func (h *Health) down(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.state[name]
	return s != nil && h.clock.Now().Before(s.downUntil)
}

func (h *Health) get(name string) *state {
	s := h.state[name]
	if s == nil {
		s = &state{}
		h.state[name] = s
	}
	return s
}

func (h *Health) ok(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.get(name)
	s.failures, s.downUntil, s.since, s.lastOK = 0, time.Time{}, time.Time{}, h.clock.Now()
}

// failed counts a failure; it reports whether the provider went down.
func (h *Health) failed(name string, err error) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.get(name)
	now := h.clock.Now()
	s.failures++
	s.lastErr = err.Error()
	if s.failures < h.failures {
		return false
	}
	if !now.Before(s.downUntil) {
		s.since = now
	}
	s.downUntil = now.Add(h.cooldown)
	return true
}

// Chain tries its targets in turn.
type Chain struct {
	targets    []Target
	health     *Health
	firstToken time.Duration
	clock      clock.Clock
	// OnFallback, if set, hears of each call that went to the next
	// target, and why.
	OnFallback func(from, to Target, err error)
}

var (
	_ model.Provider        = (*Chain)(nil)
	_ model.ContextWindower = (*Chain)(nil)
	_ model.ImageSupporter  = (*Chain)(nil)
)

// New returns a chain over targets (the first is the primary). A call
// waits at most firstToken for its first token when a target is left to
// go to (0: no limit).
func New(h *Health, firstToken time.Duration, targets ...Target) *Chain {
	return &Chain{targets: targets, health: h, firstToken: firstToken, clock: h.clock}
}

// askTimeout bounds a question about a model (its window, its images)
// put to one provider of the chain.
const askTimeout = 10 * time.Second

// errNoFirstToken is a call that said nothing for too long.
var errNoFirstToken = errors.New("no first token")

// Chat implements model.Provider: the request goes to the first target
// not cooling down; a failure that a fallback can help (unreachable,
// overloaded, no first token in time) before any of the answer streamed
// sends it to the next. req.Model is each target's own.
func (c *Chain) Chat(ctx context.Context, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	order := c.order()
	var errs []error
	for i, t := range order {
		last := i == len(order)-1
		resp, streamed, err := c.try(ctx, t, req, onDelta, !last)
		if err == nil {
			c.health.ok(t.Name)
			if t.Name != c.targets[0].Name || t.Model != c.targets[0].Model {
				resp.AnsweredBy = t.String()
			}
			return resp, nil
		}
		if ctx.Err() != nil || streamed || !worthFallback(err) {
			if worthFallback(err) && ctx.Err() == nil {
				c.health.failed(t.Name, err)
			}
			return model.Response{}, err
		}
		c.health.failed(t.Name, err)
		errs = append(errs, fmt.Errorf("%s: %w", t, err))
		if !last && c.OnFallback != nil {
			c.OnFallback(t, order[i+1], err)
		}
	}
	// Every target failed: the first target's kind of error, with all
	// of them said.
	joined := errors.Join(errs...)
	if len(errs) == 1 {
		return model.Response{}, errs[0]
	}
	return model.Response{}, &chainError{first: errs[0], all: joined}
}

// chainError matches what its first error matches (so an unreachable
// primary still reads as unreachable), and says every target's error.
type chainError struct {
	first, all error
}

func (e *chainError) Error() string { return "every model failed: " + e.all.Error() }
func (e *chainError) Unwrap() error { return e.first }

// order is the targets, those cooling down moved to the end (tried only
// when every other one failed too).
func (c *Chain) order() []Target {
	if len(c.targets) == 1 {
		return c.targets
	}
	var up, down []Target
	for _, t := range c.targets {
		if c.health.down(t.Name) {
			down = append(down, t)
		} else {
			up = append(up, t)
		}
	}
	return append(up, down...)
}

// try makes the call on one target. streamed tells whether any of the
// answer reached onDelta (then it is too late for another target).
func (c *Chain) try(ctx context.Context, t Target, req model.Request, onDelta func(model.Delta), limit bool) (model.Response, bool, error) {
	req.Model = t.Model
	if !limit || c.firstToken <= 0 {
		var streamed bool
		resp, err := t.Provider.Chat(ctx, req, func(d model.Delta) {
			streamed = true
			if onDelta != nil {
				onDelta(d)
			}
		})
		return resp, streamed, err
	}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu       sync.Mutex
		streamed bool
	)
	timer := c.clock.AfterFunc(c.firstToken, func() {
		mu.Lock()
		defer mu.Unlock()
		if !streamed {
			cancel(errNoFirstToken)
		}
	})
	defer timer.Stop()
	resp, err := t.Provider.Chat(cctx, req, func(d model.Delta) {
		mu.Lock()
		streamed = true
		mu.Unlock()
		if onDelta != nil {
			onDelta(d)
		}
	})
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(cctx), errNoFirstToken) {
		err = &model.TransientError{Err: model.Wrap(errNoFirstToken, "%s said nothing for %s", t, c.firstToken)}
	}
	mu.Lock()
	defer mu.Unlock()
	return resp, streamed, err
}

// worthFallback reports whether another provider may answer where this
// one failed: it could not be reached, it is overloaded, or it said
// nothing in time. Errors of the request itself (too long, refused on a
// budget, an unknown model, a bad key) would fail the same elsewhere or
// are the owner's to fix.
func worthFallback(err error) bool {
	return errors.Is(err, model.ErrUnreachable) || errors.Is(err, model.ErrOverloaded) || errors.Is(err, errNoFirstToken)
}

// ContextWindow is the smallest window of the chain's models that tell
// one: the context is planned to fit whichever answers.
func (c *Chain) ContextWindow(ctx context.Context, _ string) (int, error) {
	best := 0
	for _, t := range c.targets {
		cw, ok := t.Provider.(model.ContextWindower)
		if !ok || c.health.down(t.Name) {
			continue // a provider cooling down is not asked
		}
		// A server that hangs must not hold up a run its fallback could
		// answer.
		tctx, cancel := context.WithTimeout(ctx, askTimeout)
		n, err := cw.ContextWindow(tctx, t.Model)
		cancel()
		if err == nil && n > 0 && (best == 0 || n < best) {
			best = n
		}
	}
	if best == 0 {
		return 0, errors.New("no model of the chain reports its context window")
	}
	return best, nil
}

// SupportsImages is true when every model of the chain takes images
// (a fallback that does not would fail the call otherwise).
func (c *Chain) SupportsImages(ctx context.Context, _ string) (bool, error) {
	for _, t := range c.targets {
		is, ok := t.Provider.(model.ImageSupporter)
		if !ok {
			return false, nil
		}
		tctx, cancel := context.WithTimeout(ctx, askTimeout)
		yes, err := is.SupportsImages(tctx, t.Model)
		cancel()
		if err != nil || !yes {
			return false, err
		}
	}
	return true, nil
}
