// Package agent runs a model with tools until a goal is done, emitting
// platform-neutral events. Both the chick (full tool set) and Mother (safe
// tools only) use it; it knows nothing about chat platforms.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

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
// returns the new history (typically a summary plus the recent turns) and
// the summary text. The agent calls it when the provider reports a context
// overflow, then retries once; callers may also compact before a run.
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
	// Sleep waits between retries; tests inject a fake. Default: a timer
	// that honours ctx.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock for event timestamps and durations.
	Now func() time.Time
}

// Agent is a configured loop. It is safe for concurrent runs.
type Agent struct {
	cfg   Config
	tools map[string]Tool
	specs []model.ToolSpec
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
	if cfg.Sleep == nil {
		cfg.Sleep = sleepCtx
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a := &Agent{cfg: cfg, tools: map[string]Tool{}}
	for _, t := range cfg.Tools {
		s := t.Spec()
		if _, dup := a.tools[s.Name]; dup {
			return nil, fmt.Errorf("agent: tool %q twice", s.Name)
		}
		a.tools[s.Name] = t
		a.specs = append(a.specs, s)
	}
	sort.Slice(a.specs, func(i, j int) bool { return a.specs[i].Name < a.specs[j].Name })
	return a, nil
}

// Input is one run's starting point.
type Input struct {
	System string
	// History is the context so far, ending with the new user message(s).
	History []model.Message
	// OnMessage is called with every message the run adds (assistant turns
	// and tool results), in order, so the caller can persist them as they
	// happen. An error from it aborts the run.
	OnMessage func(model.Message) error
	// OnCompact is called after a compaction with the new history, so the
	// caller can rewrite its stored context.
	OnCompact func(kept []model.Message, summary string) error
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
}

// Run drives the loop until a final answer, an abort, the turn limit, the
// circuit breaker, or a provider error. It always emits run_end last.
func (a *Agent) Run(ctx context.Context, in Input) Output {
	emit := in.Emit
	if emit == nil {
		emit = func(Event) {}
	}
	onMsg := in.OnMessage
	if onMsg == nil {
		onMsg = func(model.Message) error { return nil }
	}
	history := append([]model.Message(nil), in.History...)
	var out Output
	finish := func(reason StopReason, err error) Output {
		out.StopReason, out.Err = reason, err
		ev := Event{Type: EventRunEnd, Time: a.cfg.Now(), StopReason: reason, Usage: out.Usage}
		if err != nil {
			ev.Err = err.Error()
		}
		emit(ev)
		return out
	}
	add := func(m model.Message) error {
		history = append(history, m)
		if err := onMsg(m); err != nil {
			return fmt.Errorf("record message: %w", err)
		}
		return nil
	}

	toolErrors := 0
	compacted := false
	for {
		if ctx.Err() != nil {
			return finish(StopAborted, nil)
		}
		if out.Turns >= a.cfg.MaxTurns {
			return finish(StopMaxTurns, fmt.Errorf("stopped after %d model turns", out.Turns))
		}
		out.Turns++
		emit(Event{Type: EventMessageStart, Time: a.cfg.Now()})
		req := model.Request{Model: a.cfg.Model, System: in.System, Messages: history, Tools: a.specs, MaxOutputTokens: a.cfg.MaxOutputTokens}
		resp, err := a.call(ctx, req, func(d string) {
			emit(Event{Type: EventMessageDelta, Time: a.cfg.Now(), Text: d})
		})
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return finish(StopAborted, nil)
			case errors.Is(err, model.ErrContextOverflow) && in.Compactor != nil && !compacted:
				compacted = true
				out.Turns--
				emit(Event{Type: EventCompactionStart, Time: a.cfg.Now()})
				kept, summary, cerr := in.Compactor.Compact(ctx, history)
				if cerr != nil {
					emit(Event{Type: EventCompactionEnd, Time: a.cfg.Now(), IsError: true, Err: cerr.Error()})
					return finish(StopError, fmt.Errorf("compaction after context overflow: %w", cerr))
				}
				history = kept
				if in.OnCompact != nil {
					if err := in.OnCompact(kept, summary); err != nil {
						return finish(StopError, err)
					}
				}
				emit(Event{Type: EventCompactionEnd, Time: a.cfg.Now(), Text: summary})
				continue
			case errors.Is(err, model.ErrBudgetExhausted):
				return finish(StopBudget, err)
			default:
				return finish(StopError, err)
			}
		}
		out.Usage = out.Usage.Add(resp.Usage)
		msg := resp.Message
		msg.Role = model.RoleAssistant
		emit(Event{Type: EventMessageEnd, Time: a.cfg.Now(), Text: msg.Content, Usage: resp.Usage})
		if err := add(msg); err != nil {
			return finish(StopError, err)
		}
		if strings.TrimSpace(msg.Content) != "" || len(msg.ToolCalls) == 0 {
			out.Final = msg.Content
		}
		if len(msg.ToolCalls) == 0 {
			return finish(StopDone, nil)
		}
		for _, call := range msg.ToolCalls {
			res := a.runTool(ctx, call, emit)
			if err := add(model.Message{Role: model.RoleTool, ToolCallID: call.ID, ToolName: call.Name, Content: res.Text, Images: res.Images, IsError: res.IsError}); err != nil {
				return finish(StopError, err)
			}
			if res.IsError {
				toolErrors++
			} else {
				toolErrors = 0
			}
		}
		if ctx.Err() != nil {
			return finish(StopAborted, nil)
		}
		if toolErrors >= a.cfg.MaxToolErrors {
			return finish(StopToolErrors, fmt.Errorf("%d consecutive tool errors", toolErrors))
		}
	}
}

func (a *Agent) runTool(ctx context.Context, call model.ToolCall, emit func(Event)) Result {
	label := LabelOf(call.Args)
	if label == "" {
		label = call.Name
	}
	start := a.cfg.Now()
	emit(Event{Type: EventToolStart, Time: start, ToolCallID: call.ID, ToolName: call.Name, Label: label, Args: call.Args})
	var res Result
	if ctx.Err() != nil {
		res = Result{Text: "aborted before the tool ran", IsError: true}
	} else if t, ok := a.tools[call.Name]; !ok {
		res = Result{Text: fmt.Sprintf("unknown tool %q; available: %s", call.Name, strings.Join(a.toolNames(), ", ")), IsError: true}
	} else {
		var err error
		res, err = t.Run(ctx, call.Args)
		if err != nil {
			res.IsError = true
			if res.Text == "" {
				res.Text = err.Error()
			} else {
				res.Text += "\n" + err.Error()
			}
		}
		if ctx.Err() != nil && !res.IsError {
			res.IsError = true
			res.Text += "\n(aborted)"
		}
	}
	emit(Event{Type: EventToolEnd, Time: a.cfg.Now(), ToolCallID: call.ID, ToolName: call.Name, Label: label, Args: call.Args,
		Result: res.Text, IsError: res.IsError, Duration: a.cfg.Now().Sub(start)})
	return res
}

func (a *Agent) toolNames() []string {
	names := make([]string, 0, len(a.specs))
	for _, s := range a.specs {
		names = append(names, s.Name)
	}
	return names
}

// call runs one model call with retries on transient errors.
func (a *Agent) call(ctx context.Context, req model.Request, onDelta func(string)) (model.Response, error) {
	var err error
	for attempt := 1; attempt <= a.cfg.Attempts; attempt++ {
		var resp model.Response
		resp, err = a.cfg.Provider.Chat(ctx, req, onDelta)
		if err == nil {
			return resp, nil
		}
		if !model.IsTransient(err) || attempt == a.cfg.Attempts {
			break
		}
		if serr := a.cfg.Sleep(ctx, a.cfg.Backoff<<(attempt-1)); serr != nil {
			return model.Response{}, serr
		}
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

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
