// Package runview renders one agent run on a chat platform the way users
// want to read it: a main message that shows progress ("→ label" for the
// running tool, a working indicator) and is replaced by the final answer;
// tool details and usage in a thread under it; long answers split at the
// platform's limit. Edits of the main message are throttled (coalesced to
// the newest state) and the final answer is never lost to a throttle.
//
// The platform side is a small Surface each adapter implements; the view
// does all platform calls from one goroutine per run, so the agent loop
// that emits events never waits for the network.
package runview

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/render"
)

// Surface is the platform side of one run's rendering.
type Surface interface {
	// PostMain posts the main message; working says it shows progress
	// (platforms may add a stop button). It returns the message id.
	PostMain(ctx context.Context, text string, working bool) (string, error)
	// EditMain replaces the main message's text.
	EditMain(ctx context.Context, id, text string, working bool) error
	// DeleteMain removes the main message (a silent run).
	DeleteMain(ctx context.Context, id string) error
	// PostDetail posts into the detail thread under the main message,
	// creating the thread on first use.
	PostDetail(ctx context.Context, mainID, text string) error
	// PostMore posts a further part of a long answer after the main
	// message and returns its id.
	PostMore(ctx context.Context, text string) (string, error)
}

// RateLimitError is returned by a Surface when the platform asked to wait
// (HTTP 429 with retry_after) and the call was not retried.
type RateLimitError struct {
	After time.Duration
	Err   error
}

func (e *RateLimitError) Error() string {
	return "rate limited, retry after " + e.After.String() + ": " + e.Err.Error()
}

func (e *RateLimitError) Unwrap() error { return e.Err }

// Retry runs f, waiting out up to three RateLimitErrors, each for at least
// floor; it logs each wait as "rate limited by PLATFORM; waiting" with the
// wait under key.
func Retry(ctx context.Context, clk clock.Clock, lg *slog.Logger, platform, key string, floor time.Duration, f func() error) error {
	var err error
	for range 4 {
		err = f()
		var rl *RateLimitError
		if err == nil || !errors.As(err, &rl) {
			return err
		}
		lg.Info("rate limited by "+platform+"; waiting", key, rl.After)
		if clock.Sleep(ctx, clk, max(rl.After, floor)) != nil {
			return ctx.Err()
		}
	}
	return err
}

// Options shape one view.
type Options struct {
	// Dialect is the platform's format. What the view renders (labels,
	// details, the model's answer) is inert: it mentions nobody.
	Dialect render.Dialect
	// Title names the run's source ("chick c-7f3a"); shown on top.
	Title string
	// Limit is the most runes one message may hold.
	Limit int
	// ThreadOverflow: an answer longer than Limit keeps its first part in
	// the main message, with a pointer, and goes whole into the thread
	// (Slack). Otherwise the rest follows as more messages (Discord).
	ThreadOverflow bool
	// Details shows tool details and usage in the thread.
	Details bool
	// MinEdit is the least time between two edits of the main message.
	MinEdit time.Duration
	// Grace is how long a run may take before the working message is
	// posted; quicker answers arrive as one message. Tool activity posts
	// it at once.
	Grace time.Duration
	// FinalAttempts bounds the tries to deliver the final answer when the
	// platform rate-limits (each waits the platform's retry_after).
	FinalAttempts int
	Logger        *slog.Logger
	// Clock times the grace, the edit throttle and rate-limit waits
	// (default clock.Real).
	Clock clock.Clock
}

// View is one run's rendering; it implements chat.Reply.
type View struct {
	s    Surface
	opts Options
	lg   *slog.Logger
	ctx  context.Context

	mu       sync.Mutex
	status   string // current progress line
	running  map[string]string
	order    []string // running tool call ids, in start order
	dirty    bool     // status changed since the last edit
	needMain bool     // post the working message now
	details  []string
	final    *string
	result   chan finishResult

	wake chan struct{}
	done chan struct{}
}

type finishResult struct {
	id  string
	err error
}

var _ chat.Reply = (*View)(nil)

// New starts rendering a run on s. ctx carries values only: rendering
// goes on after the run is cancelled, so "Stopped." is still shown.
func New(ctx context.Context, s Surface, opts Options) *View {
	if opts.Limit <= 0 {
		opts.Limit = 1900
	}
	if opts.FinalAttempts <= 0 {
		opts.FinalAttempts = 5
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	v := &View{
		s:       s,
		opts:    opts,
		lg:      opts.Logger,
		ctx:     context.WithoutCancel(ctx),
		status:  render.Italic(opts.Dialect, "Working…"),
		running: map[string]string{},
		result:  make(chan finishResult, 1),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	go v.loop()
	return v
}

func (v *View) signal() {
	select {
	case v.wake <- struct{}{}:
	default:
	}
}

// Event implements chat.Reply. It never blocks on the platform.
func (v *View) Event(_ context.Context, ev agent.Event) {
	d := v.opts.Dialect
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.final != nil {
		return
	}
	switch ev.Type {
	case agent.EventToolStart:
		label := ev.Label
		if label == "" {
			label = ev.ToolName
		}
		if _, ok := v.running[ev.ToolCallID]; !ok {
			v.order = append(v.order, ev.ToolCallID)
		}
		v.running[ev.ToolCallID] = label
		v.setStatus()
		v.needMain = true
	case agent.EventToolEnd:
		delete(v.running, ev.ToolCallID)
		for i, id := range v.order {
			if id == ev.ToolCallID {
				v.order = append(v.order[:i], v.order[i+1:]...)
				break
			}
		}
		v.setStatus()
		if v.opts.Details {
			v.details = append(v.details, render.ToolDetail(d, ev, v.opts.Limit))
		}
		v.needMain = true
	case agent.EventThinking:
		// Only that the model thinks is shown, never what.
		if len(v.order) == 0 {
			if st := render.Italic(d, "Thinking…"); st != v.status {
				v.status, v.dirty = st, true
			}
		}
	case agent.EventCompactionStart:
		v.status = render.Italic(d, "Compacting context…")
		v.dirty = true
		v.needMain = true
	case agent.EventCompactionEnd:
		v.setStatus()
		if v.opts.Details {
			msg := render.Italic(d, "Context compacted.")
			if ev.IsError {
				msg = render.Italic(d, "Context compaction failed: "+render.Plain(d, render.Truncate(ev.Err, 300)))
			}
			v.details = append(v.details, msg)
		}
	case agent.EventRunEnd:
		if v.opts.Details && (ev.Usage.Total() > 0 || ev.StopReason != agent.StopDone) {
			v.details = append(v.details, render.Usage(d, ev.Usage, ev.StopReason, ev.Err, ev.AnsweredBy))
		}
	default:
		return
	}
	v.signal()
}

// setStatus shows the newest running tool, or the working indicator.
func (v *View) setStatus() {
	d := v.opts.Dialect
	st := render.Italic(d, "Working…")
	if n := len(v.order); n > 0 {
		st = "→ " + render.Plain(d, v.running[v.order[n-1]])
	}
	if st != v.status {
		v.status = st
		v.dirty = true
	}
}

// Finish implements chat.Reply: it hands over the final answer and waits
// until it is on the platform (or ctx ends).
func (v *View) Finish(ctx context.Context, markdown string) (string, error) {
	v.mu.Lock()
	if v.final != nil {
		v.mu.Unlock()
		return "", errors.New("finish called twice")
	}
	v.final = &markdown
	v.mu.Unlock()
	v.signal()
	select {
	case r := <-v.result:
		return r.id, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Done is closed when the view has finished all its platform calls.
func (v *View) Done() <-chan struct{} { return v.done }

func (v *View) mainText(status string) string {
	if v.opts.Title == "" {
		return status
	}
	return render.Bold(v.opts.Dialect, render.Plain(v.opts.Dialect, v.opts.Title)) + "\n" + status
}

func (v *View) loop() {
	defer close(v.done)
	ctx := v.ctx
	var (
		mainID     string
		mainFailed bool
		lastEdit   time.Time
		start      = v.opts.Clock.Now()
		timer      *wakeTimer
	)
	defer func() {
		if timer != nil {
			timer.t.Stop()
		}
	}()
	for {
		v.mu.Lock()
		needMain := v.needMain || clock.Since(v.opts.Clock, start) >= v.opts.Grace
		final := v.final
		var detail string
		hasDetail := len(v.details) > 0 && mainID != ""
		if hasDetail {
			detail = v.details[0]
			v.details = v.details[1:]
		}
		status, dirty := v.status, v.dirty
		v.mu.Unlock()

		switch {
		case mainID == "" && !mainFailed && needMain && final == nil:
			id, err := v.s.PostMain(ctx, v.mainText(status), true)
			if err != nil {
				v.lg.Warn("cannot post working message", "err", err)
				mainFailed = true
				v.mu.Lock()
				v.details = nil
				v.mu.Unlock()
				continue
			}
			mainID, lastEdit = id, v.opts.Clock.Now()
			v.mu.Lock()
			if v.status == status {
				v.dirty = false
			}
			v.mu.Unlock()
			continue
		case hasDetail:
			if err := v.s.PostDetail(ctx, mainID, detail); err != nil {
				v.lg.Warn("cannot post tool detail", "err", err)
			}
			continue
		case final != nil:
			v.mu.Lock()
			v.details = nil // never posted: no main message to hang them on
			v.mu.Unlock()
			id, err := v.finish(ctx, mainID, lastEdit, *final)
			v.result <- finishResult{id, err}
			return
		case dirty && mainID != "":
			if wait := v.opts.MinEdit - clock.Since(v.opts.Clock, lastEdit); wait > 0 {
				timer = resetTimer(v.opts.Clock, timer, wait)
				break
			}
			v.mu.Lock()
			if v.status == status { // an event since the read keeps it dirty
				v.dirty = false
			}
			v.mu.Unlock()
			if err := v.s.EditMain(ctx, mainID, v.mainText(status), true); err != nil {
				var rl *RateLimitError
				if errors.As(err, &rl) {
					// Try again with the newest state once the platform allows.
					lastEdit = v.opts.Clock.Now().Add(rl.After - v.opts.MinEdit)
					v.mu.Lock()
					v.dirty = true
					v.mu.Unlock()
				} else {
					v.lg.Warn("cannot update working message", "err", err)
				}
				continue
			}
			lastEdit = v.opts.Clock.Now()
			continue
		case mainID == "" && !mainFailed:
			timer = resetTimer(v.opts.Clock, timer, v.opts.Grace-clock.Since(v.opts.Clock, start))
		}
		var tc <-chan struct{}
		if timer != nil {
			tc = timer.c
		}
		select {
		case <-v.wake:
		case <-tc:
			timer = nil
		}
	}
}

// wakeTimer is a pending wake-up of the loop: c is closed when it fires.
type wakeTimer struct {
	t clock.Timer
	c chan struct{}
}

// resetTimer stops t (if any) and returns a new wake-up after d.
func resetTimer(c clock.Clock, t *wakeTimer, d time.Duration) *wakeTimer {
	if d < 0 {
		d = 0
	}
	if t != nil {
		t.t.Stop()
	}
	fired := make(chan struct{})
	return &wakeTimer{t: c.AfterFunc(d, func() { close(fired) }), c: fired}
}

// finish delivers the final answer: the main message replaced by its first
// part, the rest after it (or whole in the thread), or the working message
// removed for an empty (silent) answer.
func (v *View) finish(ctx context.Context, mainID string, lastEdit time.Time, markdown string) (string, error) {
	d := v.opts.Dialect
	if markdown == "" {
		if mainID != "" {
			if err := v.retry(ctx, func() error { return v.s.DeleteMain(ctx, mainID) }); err != nil {
				return "", err
			}
		}
		return "", nil
	}
	text := render.Convert(d, markdown, nil)
	if v.opts.Title != "" {
		text = render.Bold(d, render.Plain(d, v.opts.Title)) + "\n" + text
	}
	limit := v.opts.Limit
	var note string
	if v.opts.ThreadOverflow && render.Len(text) > limit {
		note = "\n\n" + render.Italic(d, "(continued in the thread)")
		limit -= render.Len(note)
	}
	parts := render.Split(text, limit)
	if len(parts) == 0 {
		parts = []string{"…"}
	}
	first := parts[0] + note

	// The final edit respects the edit throttle too; it waits, never drops.
	if wait := v.opts.MinEdit - clock.Since(v.opts.Clock, lastEdit); mainID != "" && wait > 0 {
		if err := clock.Sleep(ctx, v.opts.Clock, wait); err != nil {
			return "", err
		}
	}
	id := mainID
	err := errors.New("no main message")
	if mainID != "" {
		err = v.retry(ctx, func() error { return v.s.EditMain(ctx, mainID, first, false) })
		if err != nil {
			v.lg.Warn("cannot replace working message with the answer; posting it anew", "err", err)
		}
	}
	if err != nil {
		err = v.retry(ctx, func() error {
			var perr error
			id, perr = v.s.PostMain(ctx, first, false)
			return perr
		})
		if err != nil {
			return "", err
		}
	}
	var errs []error
	if note != "" {
		for _, p := range render.Split(text, v.opts.Limit) {
			if err := v.retry(ctx, func() error { return v.s.PostDetail(ctx, id, p) }); err != nil {
				errs = append(errs, err)
			}
		}
	} else {
		for _, p := range parts[1:] {
			if err := v.retry(ctx, func() error { _, perr := v.s.PostMore(ctx, p); return perr }); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return id, errors.Join(errs...)
}

// retry runs f, waiting out rate limits up to FinalAttempts times.
func (v *View) retry(ctx context.Context, f func() error) error {
	var err error
	for range v.opts.FinalAttempts {
		err = f()
		var rl *RateLimitError
		if err == nil || !errors.As(err, &rl) {
			return err
		}
		v.lg.Info("rate limited; waiting", "retry_after", rl.After)
		if err := clock.Sleep(ctx, v.opts.Clock, rl.After); err != nil {
			return err
		}
	}
	return err
}
