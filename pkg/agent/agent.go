// Package agent runs a model with tools until a goal is done, emitting
// platform-neutral events. Both the chick (full tool set) and Mother (safe
// tools only) use it; it knows nothing about chat platforms.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/model"
)

// Tool is one capability offered to the model.
type Tool interface {
	Spec() model.ToolSpec
	// Run executes one call. A returned error becomes an error result the
	// model sees; ctx is cancelled when the run is aborted.
	Run(ctx context.Context, args json.RawMessage) (Result, error)
}

// Result is what a tool call returns to the model.
type Result struct {
	Text    string
	Images  []model.Image
	IsError bool
}

// Compactor shrinks a history that no longer fits the model's window. It
// returns the recent messages to keep verbatim (never starting with a tool
// result) and a summary of everything before them; the agent continues with
// SummaryMessage(summary) followed by kept. The agent itself is the default
// Compactor (see Agent.Compact).
type Compactor interface {
	Compact(ctx context.Context, history []model.Message) (kept []model.Message, summary string, err error)
}

// Config tunes a loop.
type Config struct {
	Provider model.Provider
	Model    string
	Tools    []Tool
	// MaxTurns caps model calls per run (default 50).
	MaxTurns int
	// MaxToolErrors is the circuit breaker: that many consecutive tool
	// errors end the run (default 5).
	MaxToolErrors int
	// Attempts per model call on transient errors (default 3).
	Attempts int
	// Backoff before retry n (1-based) is Backoff * 2^(n-1) (default 1s).
	Backoff time.Duration
	// MaxOutputTokens per call (0: provider default).
	MaxOutputTokens int
	// Think is whether the model is asked to think before it answers
	// (model.ThinkAuto when empty; compaction never asks).
	Think model.Think
	// MaxImages and MaxImageBytes bound the images of one call: only the
	// history's latest images within both are sent (latestImages); 0: no
	// bound.
	MaxImages     int
	MaxImageBytes int64

	// ContextWindow is the model's window in tokens; 0 asks the provider
	// (model.ContextWindower) at the start of each run. With a known window
	// the agent compacts before a call that would come within ReserveTokens
	// of it.
	ContextWindow int
	// ReserveTokens stay free for the answer (default 4096).
	ReserveTokens int
	// KeepRecentTokens are kept verbatim by a compaction (default 8192).
	KeepRecentTokens int
	// CompactChunkTokens bounds one summarisation request (default 16384);
	// longer histories are summarised piece by piece.
	CompactChunkTokens int
	// Compactor replaces the default compaction (the agent's own model
	// summarising older turns); Input.Compactor overrides both per run.
	Compactor Compactor
	// NoCompaction turns compaction off (an overflow then ends the run).
	NoCompaction bool

	// Sleep waits between retries; tests inject a fake. Default:
	// clock.Sleep on Clock (it honours ctx).
	Sleep func(ctx context.Context, d time.Duration) error
	// Clock times events and durations and, by default, the retry waits
	// (default clock.Real).
	Clock clock.Clock
}

// Agent is a configured loop. It is safe for concurrent runs.
type Agent struct {
	cfg    Config
	tools  map[string]Tool
	specs  []model.ToolSpec
	byName map[string]model.ToolSpec
	// checks are the schemas a call's arguments are checked against
	// (labelOptional).
	checks map[string]json.RawMessage
}

// New checks cfg and returns an agent.
func New(cfg Config) (*Agent, error) {
	if cfg.Provider == nil {
		return nil, errors.New("agent: no provider")
	}
	if cfg.MaxTurns <= 0 {
		cfg.MaxTurns = 50
	}
	if cfg.MaxToolErrors <= 0 {
		cfg.MaxToolErrors = 5
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 3
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if cfg.ReserveTokens <= 0 {
		cfg.ReserveTokens = 4096
	}
	if cfg.KeepRecentTokens <= 0 {
		cfg.KeepRecentTokens = 8192
	}
	if cfg.CompactChunkTokens <= 0 {
		cfg.CompactChunkTokens = 16384
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Sleep == nil {
		clk := cfg.Clock
		cfg.Sleep = func(ctx context.Context, d time.Duration) error { return clock.Sleep(ctx, clk, d) }
	}
	a := &Agent{cfg: cfg, tools: map[string]Tool{}, byName: map[string]model.ToolSpec{}, checks: map[string]json.RawMessage{}}
	for _, t := range cfg.Tools {
		s := t.Spec()
		if _, dup := a.tools[s.Name]; dup {
			return nil, fmt.Errorf("agent: tool %q twice", s.Name)
		}
		a.tools[s.Name] = t
		a.byName[s.Name] = s
		a.checks[s.Name] = labelOptional(s.Parameters)
		a.specs = append(a.specs, s)
	}
	sort.Slice(a.specs, func(i, j int) bool { return a.specs[i].Name < a.specs[j].Name })
	return a, nil
}

// Tools returns the specs of the agent's tools, sorted by name.
func (a *Agent) Tools() []model.ToolSpec { return append([]model.ToolSpec(nil), a.specs...) }

// Input is one run's starting point.
type Input struct {
	System string
	// History is the context so far, ending with the new user message(s).
	History []model.Message
	// OnMessage is called with every message the run adds (assistant turns
	// and tool results), in order, so the caller can persist them as they
	// happen. An error from it aborts the run.
	OnMessage func(model.Message) error
	// OnCompact is called after a compaction with the messages kept
	// verbatim and the summary of the rest, so the caller can rewrite its
	// stored context. An error from it ends the run.
	OnCompact func(kept []model.Message, summary string) error
	// Compactor overrides the configured compaction for this run.
	Compactor Compactor
	// Emit receives events; it must not block for long.
	Emit func(Event)
}

// Output is how a run ended.
type Output struct {
	// Final is the last assistant text (the answer), possibly empty.
	Final      string
	StopReason StopReason
	Err        error
	Usage      model.Usage
	Turns      int
	// Compactions counts the compactions done during the run.
	Compactions int
	// AnsweredBy are the fallbacks that answered some of the run's calls
	// ("<provider>/<model>"), in the order they first did.
	AnsweredBy []string
}

// run is the state of one Run.
type run struct {
	a       *Agent
	in      Input
	emit    func(Event)
	history []model.Message
	out     Output
	window  int
	images  bool
	// lastTokens is the input+output tokens of the last call and lastLen
	// the history length then: the base of the next estimate.
	lastTokens int
	lastLen    int

	// nudge, when set, follows the history in the next request only: the
	// last reply could not be used, and the model is asked again.
	nudge []model.Message
	// raw, problem and cutShort describe the last reply read: its text
	// without thinking, what was wrong with a call written in it, and
	// whether it ended at the output limit.
	raw, problem string
	cutShort     bool
	// loops watches for a model going round in circles (loops.go).
	loops loopGuard
}

// Run drives the loop until a final answer, an abort, the turn limit, the
// circuit breaker, or a provider error. It always emits run_end last.
func (a *Agent) Run(ctx context.Context, in Input) Output {
	r := &run{a: a, in: in, emit: in.Emit, images: true}
	if r.emit == nil {
		r.emit = func(Event) {}
	}
	r.history = Repair(in.History)
	r.window = a.window(ctx)
	if is, ok := a.cfg.Provider.(model.ImageSupporter); ok {
		if yes, err := is.SupportsImages(ctx, a.cfg.Model); err == nil {
			r.images = yes
		}
	}
	return r.loop(ctx)
}

// window returns the context window to plan with, or 0 if unknown.
func (a *Agent) window(ctx context.Context) int {
	if a.cfg.ContextWindow > 0 {
		return a.cfg.ContextWindow
	}
	if cw, ok := a.cfg.Provider.(model.ContextWindower); ok {
		if n, err := cw.ContextWindow(ctx, a.cfg.Model); err == nil && n > 0 {
			return n
		}
	}
	return 0
}

func (r *run) compactor() Compactor {
	switch {
	case r.in.Compactor != nil:
		return r.in.Compactor
	case r.a.cfg.NoCompaction:
		return nil
	case r.a.cfg.Compactor != nil:
		return r.a.cfg.Compactor
	}
	return r.a
}

func (r *run) finish(reason StopReason, err error) Output {
	r.out.StopReason, r.out.Err = reason, err
	ev := Event{Type: EventRunEnd, Time: r.a.cfg.Clock.Now(), StopReason: reason, Usage: r.out.Usage, AnsweredBy: strings.Join(r.out.AnsweredBy, ", ")}
	if err != nil {
		ev.Err = err.Error()
	}
	r.emit(ev)
	return r.out
}

func (r *run) add(onMsg func(model.Message) error, m model.Message) error {
	r.history = append(r.history, m)
	if onMsg == nil {
		return nil
	}
	if err := onMsg(m); err != nil {
		return fmt.Errorf("record message: %w", err)
	}
	return nil
}

// estimate approximates the tokens the next request takes: the provider's
// count for the last call plus an estimate of what was added since, or the
// plain estimate when that is larger (or there was no call yet).
func (r *run) estimate(req model.Request) int {
	est := EstimateRequest(req)
	if r.lastTokens > 0 && r.lastLen <= len(r.history) {
		if n := r.lastTokens + EstimateMessages(r.history[r.lastLen:]); n > est {
			return n
		}
	}
	return est
}

// errStoreCompaction marks a compaction whose result could not be stored.
var errStoreCompaction = errors.New("store compacted context")

// compact runs one compaction and installs its result.
func (r *run) compact(ctx context.Context, c Compactor, reason string) error {
	a := r.a
	r.emit(Event{Type: EventCompactionStart, Time: a.cfg.Clock.Now(), Text: reason})
	kept, summary, err := c.Compact(ctx, r.history)
	if err != nil {
		r.emit(Event{Type: EventCompactionEnd, Time: a.cfg.Clock.Now(), IsError: true, Err: err.Error()})
		return err
	}
	if r.in.OnCompact != nil {
		if err := r.in.OnCompact(kept, summary); err != nil {
			err = fmt.Errorf("%w: %w", errStoreCompaction, err)
			r.emit(Event{Type: EventCompactionEnd, Time: a.cfg.Clock.Now(), IsError: true, Err: err.Error()})
			return err
		}
	}
	before := len(r.history)
	r.history = append([]model.Message{SummaryMessage(summary)}, kept...)
	r.lastTokens, r.lastLen = 0, 0
	r.loops.compacted()
	r.out.Compactions++
	r.emit(Event{Type: EventCompactionEnd, Time: a.cfg.Clock.Now(), Text: summary,
		Result: fmt.Sprintf("%d messages summarised, %d kept", before-len(kept), len(kept))})
	return nil
}

func (r *run) loop(ctx context.Context) Output {
	a := r.a
	toolErrors := 0
	// compacted is set by a compaction and cleared by the next successful
	// call: one compaction per call, then the call's own error stands.
	compacted := false
	for {
		if ctx.Err() != nil {
			return r.finish(StopAborted, nil)
		}
		if r.out.Turns >= a.cfg.MaxTurns {
			return r.finish(StopMaxTurns, fmt.Errorf("stopped after %d model turns", r.out.Turns))
		}
		c := r.compactor()
		req := r.request()
		if c != nil && !compacted && r.window > 0 && r.estimate(req) > r.window-a.cfg.ReserveTokens &&
			SplitForCompaction(r.history, a.cfg.KeepRecentTokens) > 0 {
			// Proactive: compact before the call would come near the window.
			compacted = true
			reason := fmt.Sprintf("the context (about %d tokens) is close to the model's window of %d", r.estimate(req), r.window)
			if err := r.compact(ctx, c, reason); err != nil {
				if ctx.Err() != nil {
					return r.finish(StopAborted, nil)
				}
				if errors.Is(err, errStoreCompaction) {
					return r.finish(StopError, err)
				}
				// Go on: the call may still fit; an overflow ends the run.
			}
			req = r.request()
		}
		r.out.Turns++
		resp, err := r.callModel(ctx, req)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return r.finish(StopAborted, nil)
			case errors.Is(err, model.ErrContextOverflow) && c != nil && !compacted:
				r.out.Turns--
				compacted = true
				if cerr := r.compact(ctx, c, "the model reported a context overflow"); cerr != nil {
					if ctx.Err() != nil {
						return r.finish(StopAborted, nil)
					}
					return r.finish(StopError, fmt.Errorf("%w (compaction could not make room: %v)", err, cerr))
				}
				continue
			case errors.Is(err, model.ErrBudgetExhausted):
				return r.finish(StopBudget, err)
			default:
				return r.finish(StopError, err)
			}
		}
		compacted = false
		r.out.Usage = r.out.Usage.Add(resp.Usage)
		if by := resp.AnsweredBy; by != "" && !slices.Contains(r.out.AnsweredBy, by) {
			r.out.AnsweredBy = append(r.out.AnsweredBy, by)
		}
		msg, unusable := r.readReply(resp)
		r.emit(Event{Type: EventMessageEnd, Time: a.cfg.Clock.Now(), Text: msg.Content, Usage: resp.Usage, AnsweredBy: resp.AnsweredBy})
		if unusable != "" {
			if r.nudge != nil {
				return r.giveUp(unusable) // the second unusable reply in a row
			}
			// Asked again once, with a note the context does not keep.
			r.nudge = r.nudgeMessages(unusable)
			r.emit(Event{Type: EventRetry, Time: a.cfg.Clock.Now(), Attempt: 2, Err: unusableText[unusable]})
			continue
		}
		r.nudge = nil
		if err := r.add(r.in.OnMessage, msg); err != nil {
			return r.finish(StopError, err)
		}
		r.lastTokens, r.lastLen = int(resp.Usage.Total()), len(r.history)
		if strings.TrimSpace(msg.Content) != "" || len(msg.ToolCalls) == 0 {
			r.out.Final = msg.Content
		}
		if len(msg.ToolCalls) == 0 {
			return r.finish(StopDone, nil)
		}
		for i, call := range msg.ToolCalls {
			if r.loops.next(call) {
				// Going round in circles: not run, and the run ends.
				if err := r.skipCalls(msg.ToolCalls[i:], r.loops.notRun()); err != nil {
					return r.finish(StopError, err)
				}
				return r.stopRepeating()
			}
			res := a.runTool(ctx, call, r.emit)
			if note := r.loops.result(call, res); note != "" {
				res.Text += note
			}
			if err := r.add(r.in.OnMessage, model.Message{Role: model.RoleTool, ToolCallID: call.ID, ToolName: call.Name, Content: res.Text, Images: res.Images, IsError: res.IsError}); err != nil {
				return r.finish(StopError, err)
			}
			if res.IsError {
				toolErrors++
			} else {
				toolErrors = 0
			}
		}
		if ctx.Err() != nil {
			return r.finish(StopAborted, nil)
		}
		if toolErrors >= a.cfg.MaxToolErrors {
			return r.finish(StopToolErrors, fmt.Errorf("%d consecutive tool errors", toolErrors))
		}
	}
}

// callModel makes one model call (with its retries), streaming its text
// to the run's events without the thinking, which shows as one thinking
// event per attempt.
func (r *run) callModel(ctx context.Context, req model.Request) (model.Response, error) {
	a := r.a
	var (
		filter  thinkFilter
		thought bool
	)
	start := func() {
		filter, thought = thinkFilter{}, false
		r.emit(Event{Type: EventMessageStart, Time: a.cfg.Clock.Now()})
	}
	thinking := func() {
		if !thought {
			thought = true
			r.emit(Event{Type: EventThinking, Time: a.cfg.Clock.Now()})
		}
	}
	text := func(s string) {
		if s != "" {
			r.emit(Event{Type: EventMessageDelta, Time: a.cfg.Clock.Now(), Text: s})
		}
	}
	start()
	resp, err := a.call(ctx, req, func(d model.Delta) {
		if d.Thinking != "" {
			thinking()
		}
		if d.Text == "" {
			return
		}
		visible, th := filter.feed(d.Text)
		if th {
			thinking()
		}
		text(visible)
	}, func(attempt int, err error, wait time.Duration) {
		r.emit(Event{Type: EventRetry, Time: a.cfg.Clock.Now(), Attempt: attempt, Err: err.Error(), Duration: wait})
		start()
	})
	if err == nil {
		text(filter.flush())
	}
	return resp, err
}

// request builds the next model call from the current history.
func (r *run) request() model.Request {
	msgs := r.history
	if !r.images {
		msgs = withoutImages(msgs)
	}
	msgs = latestImages(msgs, r.a.cfg.MaxImages, r.a.cfg.MaxImageBytes)
	if r.nudge != nil {
		msgs = append(msgs[:len(msgs):len(msgs)], r.nudge...)
	}
	return model.Request{Model: r.a.cfg.Model, System: r.in.System, Messages: msgs, Tools: r.a.specs,
		MaxOutputTokens: r.a.cfg.MaxOutputTokens, ContextWindow: r.window, Think: r.a.cfg.Think}
}

// withoutImages replaces images with a note, for models that take none.
func withoutImages(msgs []model.Message) []model.Message {
	var out []model.Message
	for i, m := range msgs {
		if len(m.Images) == 0 {
			if out != nil {
				out = append(out, m)
			}
			continue
		}
		if out == nil {
			out = append(make([]model.Message, 0, len(msgs)), msgs[:i]...)
		}
		m.Content = strings.TrimRight(m.Content, "\n") + fmt.Sprintf("\n[%d image(s) not shown: this model does not accept images]", len(m.Images))
		m.Images = nil
		out = append(out, m)
	}
	if out == nil {
		return msgs
	}
	return out
}

// Repair makes a stored history valid for any provider: every tool call
// gets a result (a crash or failure can leave calls unanswered) and tool
// results that answer no call (cut off by an older compaction) are dropped.
//
// A history that needs nothing is returned as it is (no copy: a run's
// messages are appended to it, into the room the caller left).
func Repair(history []model.Message) []model.Message {
	if wellFormed(history) {
		return history
	}
	out := make([]model.Message, 0, len(history))
	pending := map[string]string{} // open call id -> tool name
	var order []string
	closeOpen := func() {
		for _, id := range order {
			if name, ok := pending[id]; ok {
				out = append(out, model.Message{Role: model.RoleTool, ToolCallID: id, ToolName: name, IsError: true,
					Content: "(no result: the run ended before this tool call finished)"})
			}
		}
		pending, order = map[string]string{}, nil
	}
	for _, m := range history {
		switch m.Role {
		case model.RoleTool:
			if _, ok := pending[m.ToolCallID]; !ok {
				continue
			}
			delete(pending, m.ToolCallID)
			out = append(out, m)
		case model.RoleAssistant:
			closeOpen()
			out = append(out, m)
			for _, c := range m.ToolCalls {
				pending[c.ID] = c.Name
				order = append(order, c.ID)
			}
		default:
			closeOpen()
			out = append(out, m)
		}
	}
	closeOpen()
	return out
}

// wellFormed reports whether Repair would change nothing: every tool
// result answers an open call of the assistant message before it, and
// every call is answered before the next other message.
func wellFormed(history []model.Message) bool {
	var open map[string]bool
	for _, m := range history {
		switch m.Role {
		case model.RoleTool:
			if !open[m.ToolCallID] {
				return false
			}
			delete(open, m.ToolCallID)
		case model.RoleAssistant:
			if len(open) > 0 {
				return false
			}
			for _, c := range m.ToolCalls {
				if open == nil {
					open = map[string]bool{}
				}
				open[c.ID] = true
			}
		default:
			if len(open) > 0 {
				return false
			}
		}
	}
	return len(open) == 0
}

func (a *Agent) runTool(ctx context.Context, call model.ToolCall, emit func(Event)) Result {
	label := LabelOf(call.Args)
	if label == "" {
		label = call.Name
	}
	start := a.cfg.Clock.Now()
	emit(Event{Type: EventToolStart, Time: start, ToolCallID: call.ID, ToolName: call.Name, Label: label, Args: call.Args})
	var res Result
	if ctx.Err() != nil {
		res = Result{Text: "aborted before the tool ran", IsError: true}
	} else if t, ok := a.tools[call.Name]; !ok {
		res = Result{Text: unknownToolProblem(call.Name, a.byName) + "; your tools: " + strings.Join(a.toolNames(), ", "), IsError: true}
	} else if args, problem := CheckArgs(a.checks[call.Name], call.Args); problem != "" {
		res = Result{Text: fmt.Sprintf("The arguments of this %s call are not right, so it was not run:\n%s\nCall it again with corrected arguments.", call.Name, problem), IsError: true}
	} else {
		res = runSafely(withCall(ctx, call), t, args)
		if ctx.Err() != nil && !res.IsError {
			res.IsError = true
			res.Text += "\n(aborted)"
		}
	}
	emit(Event{Type: EventToolEnd, Time: a.cfg.Clock.Now(), ToolCallID: call.ID, ToolName: call.Name, Label: label, Args: call.Args,
		Result: res.Text, IsError: res.IsError, Duration: a.cfg.Clock.Now().Sub(start)})
	return res
}

type callKey struct{}

// withCall returns ctx carrying the call a tool runs for.
func withCall(ctx context.Context, call model.ToolCall) context.Context {
	return context.WithValue(ctx, callKey{}, call.ID)
}

// CallID is the id of the tool call a tool's Run is running for (as the
// model's reply gave it, or as the agent made it up for a call written
// as text): the assistant message in the history that holds the call
// has it. Empty outside a tool's Run. Providers reuse ids across turns
// ("call_1" in every reply), so an id names a call only within its
// assistant message.
func CallID(ctx context.Context) string {
	id, _ := ctx.Value(callKey{}).(string)
	return id
}

// runSafely runs a tool, turning an error or a panic into an error result
// the model sees: a broken tool must not take the daemon down.
func runSafely(ctx context.Context, t Tool, args json.RawMessage) (res Result) {
	defer func() {
		if p := recover(); p != nil {
			res = Result{Text: fmt.Sprintf("the tool failed unexpectedly: %v", p), IsError: true}
		}
	}()
	res, err := t.Run(ctx, args)
	if err != nil {
		res.IsError = true
		if res.Text == "" {
			res.Text = err.Error()
		} else {
			res.Text += "\n" + err.Error()
		}
	}
	return res
}

func (a *Agent) toolNames() []string {
	names := make([]string, 0, len(a.specs))
	for _, s := range a.specs {
		names = append(names, s.Name)
	}
	return names
}

// call runs one model call with retries on transient errors. onRetry, if
// set, hears about each retry before its wait.
func (a *Agent) call(ctx context.Context, req model.Request, onDelta func(model.Delta), onRetry func(attempt int, err error, wait time.Duration)) (model.Response, error) {
	var err error
	for attempt := 1; attempt <= a.cfg.Attempts; attempt++ {
		var resp model.Response
		resp, err = a.cfg.Provider.Chat(ctx, req, onDelta)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil || !model.IsTransient(err) || attempt == a.cfg.Attempts {
			break
		}
		wait := a.cfg.Backoff << (attempt - 1)
		if onRetry != nil {
			onRetry(attempt+1, err, wait)
		}
		if serr := a.cfg.Sleep(ctx, wait); serr != nil {
			return model.Response{}, serr
		}
	}
	if model.IsTransient(err) && a.cfg.Attempts > 1 {
		err = fmt.Errorf("%w (gave up after %d attempts)", err, a.cfg.Attempts)
	}
	return model.Response{}, err
}

// LabelOf returns the "label" argument of a tool call, if any.
func LabelOf(args json.RawMessage) string {
	var v struct {
		Label string `json:"label"`
	}
	if json.Unmarshal(args, &v) != nil {
		return ""
	}
	return v.Label
}
