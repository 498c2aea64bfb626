package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/anthropic"
	"github.com/mother-chat/mother/pkg/model/anthropic/anthropictest"
	"github.com/mother-chat/mother/pkg/model/ollama"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/tools"
)

// step is one scripted model answer, independent of the provider.
type step struct {
	text   string
	calls  []call
	status int    // HTTP error status
	errMsg string // error message with status
	inTok  int
}

type call struct {
	name string
	args map[string]any
}

// backend is a wire-level fake model server with the real client on it.
type backend struct {
	name     string
	provider model.Provider
	// sent returns, per request received, its messages as role:content
	// lines (tool results as "tool:<content>").
	sent func() [][]string
	// images counts the images in the last request.
	images func() int
	push   func(...step)
	close  func()
}

func ollamaBackend(t *testing.T, steps ...step) (*backend, *ollamatest.Server) {
	t.Helper()
	fake := ollamatest.New()
	toTurn := func(s step) ollamatest.Turn {
		tr := ollamatest.Turn{Text: s.text, Status: s.status, Error: s.errMsg, PromptTokens: s.inTok}
		for _, c := range s.calls {
			tr.Calls = append(tr.Calls, ollamatest.Call{Name: c.name, Args: c.args})
		}
		return tr
	}
	for _, s := range steps {
		fake.Push(toTurn(s))
	}
	p, err := ollama.New(fake.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{name: "ollama", provider: p, close: fake.Close}
	b.push = func(ss ...step) {
		for _, s := range ss {
			fake.Push(toTurn(s))
		}
	}
	b.sent = func() [][]string {
		var out [][]string
		for _, r := range fake.Requests() {
			var lines []string
			for _, m := range r.Messages {
				lines = append(lines, m.Role+":"+m.Content)
			}
			out = append(out, lines)
		}
		return out
	}
	b.images = func() int {
		rs := fake.Requests()
		n := 0
		for _, m := range rs[len(rs)-1].Messages {
			n += len(m.Images)
		}
		return n
	}
	return b, fake
}

func anthropicBackend(t *testing.T, steps ...step) (*backend, *anthropictest.Server) {
	t.Helper()
	fake := anthropictest.New()
	toTurn := func(s step) anthropictest.Turn {
		tr := anthropictest.Turn{Text: s.text, Status: s.status, Error: s.errMsg, InputTokens: s.inTok}
		if s.status == 400 {
			tr.ErrorType = "invalid_request_error"
		}
		for _, c := range s.calls {
			tr.Calls = append(tr.Calls, anthropictest.Call{Name: c.name, Args: c.args})
		}
		return tr
	}
	for _, s := range steps {
		fake.Push(toTurn(s))
	}
	p, err := anthropic.New(anthropictest.APIKey, fake.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{name: "anthropic", provider: p, close: fake.Close}
	b.push = func(ss ...step) {
		for _, s := range ss {
			fake.Push(toTurn(s))
		}
	}
	b.sent = func() [][]string {
		var out [][]string
		for _, r := range fake.Requests() {
			var lines []string
			if r.SystemText() != "" {
				lines = append(lines, "system:"+r.SystemText())
			}
			for _, m := range r.Messages {
				for _, bl := range m.Content {
					switch bl.Type {
					case "text":
						lines = append(lines, m.Role+":"+bl.Text)
					case "tool_result":
						text := ""
						for _, c := range bl.Content {
							text += c.Text
						}
						lines = append(lines, "tool:"+text)
					case "tool_use":
						lines = append(lines, "assistant:")
					}
				}
			}
			out = append(out, lines)
		}
		return out
	}
	b.images = func() int {
		rs := fake.Requests()
		n := 0
		for _, m := range rs[len(rs)-1].Messages {
			for _, bl := range m.Content {
				if bl.Type == "image" {
					n++
				}
				for _, c := range bl.Content {
					if c.Type == "image" {
						n++
					}
				}
			}
		}
		return n
	}
	return b, fake
}

var backends = map[string]func(*testing.T, ...step) *backend{
	"ollama":    func(t *testing.T, s ...step) *backend { b, _ := ollamaBackend(t, s...); return b },
	"anthropic": func(t *testing.T, s ...step) *backend { b, _ := anthropicBackend(t, s...); return b },
}

// recorder collects events and persisted messages.
type recorder struct {
	mu     sync.Mutex
	events []agent.Event
	msgs   []model.Message
	sleeps []time.Duration
}

func (r *recorder) emit(ev agent.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recorder) onMessage(m model.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, m)
	return nil
}

func (r *recorder) sleep(_ context.Context, d time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sleeps = append(r.sleeps, d)
	return nil
}

func (r *recorder) types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ev := range r.events {
		if ev.Type == agent.EventMessageDelta {
			if n := len(out); n > 0 && out[n-1] == "delta" {
				continue
			}
			out = append(out, "delta")
			continue
		}
		out = append(out, string(ev.Type))
	}
	return out
}

func (r *recorder) of(typ agent.EventType) []agent.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []agent.Event
	for _, ev := range r.events {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

func chickAgent(t *testing.T, p model.Provider, rec *recorder, mod func(*agent.Config)) (*agent.Agent, string) {
	t.Helper()
	root := t.TempDir()
	ts, err := tools.ChickWith(root, nil, tools.Options{BashTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	cfg := agent.Config{Provider: p, Model: "test-model", Tools: ts, Sleep: rec.sleep}
	if mod != nil {
		mod(&cfg)
	}
	a, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a, root
}

func userMsg(s string) []model.Message { return []model.Message{{Role: model.RoleUser, Content: s}} }

// TestMultiStepToolRun drives write, bash and read through each provider's
// wire and checks what the model is fed back and what events come out.
func TestMultiStepToolRun(t *testing.T) {
	for name, mk := range backends {
		t.Run(name, func(t *testing.T) {
			b := mk(t,
				step{text: "I will write it.", calls: []call{{"write", map[string]any{"label": "Writing the note", "path": "notes/a.txt", "content": "alpha\nbeta\n"}}}},
				step{calls: []call{{"bash", map[string]any{"label": "Counting lines", "command": "wc -l < notes/a.txt"}}, {"read", map[string]any{"label": "Reading it back", "path": "notes/a.txt", "offset": 2}}}},
				step{text: "The note has 2 lines; the second is beta."},
			)
			defer b.close()
			rec := &recorder{}
			a, root := chickAgent(t, b.provider, rec, nil)
			out := a.Run(t.Context(), agent.Input{System: "You are a chick.", History: userMsg("write a note"), Emit: rec.emit, OnMessage: rec.onMessage})
			if out.StopReason != agent.StopDone || out.Err != nil {
				t.Fatalf("run ended %s: %v", out.StopReason, out.Err)
			}
			if out.Final != "The note has 2 lines; the second is beta." || out.Turns != 3 {
				t.Errorf("final %q after %d turns", out.Final, out.Turns)
			}
			if got, _ := os.ReadFile(filepath.Join(root, "notes/a.txt")); string(got) != "alpha\nbeta\n" {
				t.Errorf("file = %q", got)
			}
			want := []string{
				"message_start", "delta", "message_end", "tool_start", "tool_end",
				"message_start", "message_end", "tool_start", "tool_end", "tool_start", "tool_end",
				"message_start", "delta", "message_end", "run_end",
			}
			if got := rec.types(); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("events:\n got %v\nwant %v", got, want)
			}
			starts, ends := rec.of(agent.EventToolStart), rec.of(agent.EventToolEnd)
			if starts[0].Label != "Writing the note" || starts[1].Label != "Counting lines" || starts[2].ToolName != "read" {
				t.Errorf("tool starts = %+v", starts)
			}
			var args map[string]any
			json.Unmarshal(starts[1].Args, &args)
			if args["command"] != "wc -l < notes/a.txt" {
				t.Errorf("tool start args = %s", starts[1].Args)
			}
			if strings.TrimSpace(ends[1].Result) != "2" || ends[1].IsError || ends[2].Result != "beta\n" || ends[0].Duration < 0 {
				t.Errorf("tool ends = %+v", ends)
			}
			for _, ev := range rec.of(agent.EventMessageEnd) {
				if ev.Usage.InputTokens == 0 || ev.Usage.OutputTokens == 0 {
					t.Errorf("message_end without usage: %+v", ev)
				}
			}
			runEnd := rec.of(agent.EventRunEnd)[0]
			if runEnd.StopReason != agent.StopDone || runEnd.Usage != out.Usage || out.Usage.InputTokens == 0 {
				t.Errorf("run_end = %+v, output usage %+v", runEnd, out.Usage)
			}
			// The model saw each tool's result before answering.
			sent := b.sent()
			if len(sent) != 3 {
				t.Fatalf("%d model calls", len(sent))
			}
			last := strings.Join(sent[2], "\n")
			for _, want := range []string{"tool:Wrote notes/a.txt", "tool:2", "tool:beta"} {
				if !strings.Contains(last, want) {
					t.Errorf("last request lacks %q:\n%s", want, last)
				}
			}
			// Persisted: three assistant turns and three tool results.
			if len(rec.msgs) != 6 || rec.msgs[1].Role != model.RoleTool || rec.msgs[1].ToolCallID == "" {
				t.Errorf("persisted %d messages: %+v", len(rec.msgs), rec.msgs)
			}
		})
	}
}

// TestAbortMidTool cancels the run while bash waits on a background child;
// the whole process group must be gone and the run must say aborted.
func TestAbortMidTool(t *testing.T) {
	for name, mk := range backends {
		t.Run(name, func(t *testing.T) {
			b := mk(t, step{calls: []call{
				{"bash", map[string]any{"label": "Long job", "command": "sleep 300 & echo $! > child.pid; wait"}},
				{"bash", map[string]any{"label": "Never runs", "command": "touch never"}},
			}})
			defer b.close()
			rec := &recorder{}
			a, root := chickAgent(t, b.provider, rec, nil)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			pidFile := filepath.Join(root, "child.pid")
			go func() {
				for {
					if data, err := os.ReadFile(pidFile); err == nil && bytes.HasSuffix(data, []byte("\n")) {
						cancel()
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
			out := a.Run(ctx, agent.Input{History: userMsg("run it"), Emit: rec.emit, OnMessage: rec.onMessage})
			if out.StopReason != agent.StopAborted {
				t.Fatalf("stop = %s (%v)", out.StopReason, out.Err)
			}
			data, _ := os.ReadFile(pidFile)
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil {
				t.Fatal(err)
			}
			waitGone(t, pid)
			if _, err := os.Stat(filepath.Join(root, "never")); err == nil {
				t.Error("the second tool call ran after the abort")
			}
			// Both calls got a result persisted, so the context stays valid.
			var results []string
			for _, m := range rec.msgs {
				if m.Role == model.RoleTool {
					results = append(results, m.Content)
				}
			}
			if len(results) != 2 || !strings.Contains(results[0], "aborted") || !strings.Contains(results[1], "aborted before the tool ran") {
				t.Errorf("tool results = %q", results)
			}
			if ev := rec.of(agent.EventRunEnd); ev[0].StopReason != agent.StopAborted {
				t.Errorf("run_end = %+v", ev[0])
			}
		})
	}
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("child process %d still runs after the abort", pid)
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestRetriesTransientErrors(t *testing.T) {
	for name, mk := range backends {
		t.Run(name, func(t *testing.T) {
			b := mk(t,
				step{status: 500, errMsg: "internal error"},
				step{status: 503, errMsg: "loading model"},
				step{text: "third time lucky"},
			)
			defer b.close()
			rec := &recorder{}
			a, _ := chickAgent(t, b.provider, rec, nil)
			out := a.Run(t.Context(), agent.Input{History: userMsg("hi"), Emit: rec.emit})
			if out.StopReason != agent.StopDone || out.Final != "third time lucky" {
				t.Fatalf("run = %s %q %v", out.StopReason, out.Final, out.Err)
			}
			if fmt.Sprint(rec.sleeps) != "[1s 2s]" {
				t.Errorf("backoff = %v, want [1s 2s]", rec.sleeps)
			}
			retries := rec.of(agent.EventRetry)
			if len(retries) != 2 || retries[0].Attempt != 2 || retries[1].Attempt != 3 || !strings.Contains(retries[0].Err, "internal error") {
				t.Errorf("retry events = %+v", retries)
			}
			if len(b.sent()) != 3 {
				t.Errorf("%d calls, want 3", len(b.sent()))
			}

			// Three failures in a row end the run with the error.
			b.push(step{status: 500, errMsg: "boom"}, step{status: 500, errMsg: "boom"}, step{status: 500, errMsg: "boom"}, step{text: "not reached"})
			rec2 := &recorder{}
			a2, _ := chickAgent(t, b.provider, rec2, nil)
			out = a2.Run(t.Context(), agent.Input{History: userMsg("hi"), Emit: rec2.emit})
			if out.StopReason != agent.StopError || !strings.Contains(out.Err.Error(), "gave up after 3 attempts") {
				t.Errorf("after 3 failures: %s %v", out.StopReason, out.Err)
			}
		})
	}
}

// TestOverflowCompactsAndRetries: the provider reports a context overflow;
// the agent summarises the older turns with the model, hands the new
// context to OnCompact, and retries once with it.
func TestOverflowCompactsAndRetries(t *testing.T) {
	overflow := map[string]step{
		"ollama":    {status: 500, errMsg: "input length exceeds the context length"},
		"anthropic": {status: 400, errMsg: "prompt is too long: 250000 tokens > 200000 maximum"},
	}
	for name, mk := range backends {
		t.Run(name, func(t *testing.T) {
			b := mk(t, overflow[name], step{text: "- mario asked about the boiler\n- answer: 60 degrees"}, step{text: "Still 60 degrees."})
			defer b.close()
			rec := &recorder{}
			a, _ := chickAgent(t, b.provider, rec, func(c *agent.Config) { c.KeepRecentTokens = 8 })
			hist := []model.Message{
				agent.SummaryMessage("- earlier: mario introduced himself"),
				{Role: model.RoleUser, Content: "what temperature is the boiler? " + strings.Repeat("details ", 100)},
				{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "bash", Args: json.RawMessage(`{"command":"cat boiler"}`)}}},
				{Role: model.RoleTool, ToolCallID: "c1", ToolName: "bash", Content: strings.Repeat("60\n", 400)},
				{Role: model.RoleAssistant, Content: "It is set to 60 degrees."},
				{Role: model.RoleUser, Content: "and now?"},
			}
			var gotKept []model.Message
			var gotSummary string
			out := a.Run(t.Context(), agent.Input{History: hist, Emit: rec.emit, OnCompact: func(kept []model.Message, summary string) error {
				gotKept, gotSummary = kept, summary
				return nil
			}})
			if out.StopReason != agent.StopDone || out.Final != "Still 60 degrees." || out.Compactions != 1 {
				t.Fatalf("run = %s %q %v (%d compactions)", out.StopReason, out.Final, out.Err, out.Compactions)
			}
			if gotSummary != "- mario asked about the boiler\n- answer: 60 degrees" || len(gotKept) != 1 || gotKept[0].Content != "and now?" {
				t.Errorf("OnCompact got summary %q, kept %+v", gotSummary, gotKept)
			}
			sent := b.sent()
			if len(sent) != 3 {
				t.Fatalf("%d calls, want overflow, summary, retry", len(sent))
			}
			summaryReq := strings.Join(sent[1], "\n")
			for _, want := range []string{"mario introduced himself", "what temperature", "[tool bash result]", "characters cut", "It is set to 60"} {
				if !strings.Contains(summaryReq, want) {
					t.Errorf("summary request lacks %q", want)
				}
			}
			if strings.Contains(summaryReq, "and now?") {
				t.Error("the kept message was summarised too")
			}
			retry := sent[2]
			joined := strings.Join(retry, "\n")
			if !strings.Contains(joined, agent.SummaryPrefix+"- mario asked") || !strings.Contains(joined, "user:and now?") || strings.Contains(joined, "what temperature") {
				t.Errorf("retried request:\n%s", joined)
			}
			if types := strings.Join(rec.types(), " "); !strings.Contains(types, "message_start compaction_start compaction_end message_start") {
				t.Errorf("events = %s", types)
			}
			if end := rec.of(agent.EventCompactionEnd)[0]; end.Text != gotSummary || end.IsError {
				t.Errorf("compaction_end = %+v", end)
			}
		})
	}
}

// TestOverflowTwiceEndsRun: one compaction per call, then the error.
func TestOverflowTwiceEndsRun(t *testing.T) {
	b, _ := ollamaBackend(t,
		step{status: 500, errMsg: "context length exceeded"},
		step{text: "summary"},
		step{status: 500, errMsg: "context length exceeded"},
	)
	defer b.close()
	rec := &recorder{}
	a, _ := chickAgent(t, b.provider, rec, func(c *agent.Config) { c.KeepRecentTokens = 10 })
	hist := []model.Message{{Role: model.RoleUser, Content: "one"}, {Role: model.RoleAssistant, Content: "two"}, {Role: model.RoleUser, Content: "three"}}
	out := a.Run(t.Context(), agent.Input{History: hist, Emit: rec.emit})
	if out.StopReason != agent.StopError || !errors.Is(out.Err, model.ErrContextOverflow) {
		t.Errorf("run = %s %v", out.StopReason, out.Err)
	}
}

// TestProactiveCompaction: /api/show reports a small window; the history
// is compacted before the first call instead of waiting for an overflow.
func TestProactiveCompaction(t *testing.T) {
	b, fake := ollamaBackend(t, step{text: "short summary"}, step{text: "answer"})
	defer b.close()
	fake.SetContextLength(3000)
	rec := &recorder{}
	a, _ := chickAgent(t, b.provider, rec, func(c *agent.Config) { c.ReserveTokens = 500; c.KeepRecentTokens = 200 })
	var hist []model.Message
	for i := range 20 {
		hist = append(hist, model.Message{Role: model.RoleUser, Content: fmt.Sprintf("question %d %s", i, strings.Repeat("x", 400))},
			model.Message{Role: model.RoleAssistant, Content: fmt.Sprintf("answer %d", i)})
	}
	hist = append(hist, model.Message{Role: model.RoleUser, Content: "latest question"})
	compacted := false
	out := a.Run(t.Context(), agent.Input{History: hist, Emit: rec.emit, OnCompact: func([]model.Message, string) error { compacted = true; return nil }})
	if out.StopReason != agent.StopDone || out.Final != "answer" || !compacted {
		t.Fatalf("run = %s %q %v compacted=%v", out.StopReason, out.Final, out.Err, compacted)
	}
	types := rec.types()
	if types[0] != "compaction_start" || types[1] != "compaction_end" {
		t.Errorf("events = %v", types)
	}
	if start := rec.of(agent.EventCompactionStart)[0]; !strings.Contains(start.Text, "window of 3000") {
		t.Errorf("compaction_start = %q", start.Text)
	}
	reqs := fake.Requests()
	if n, ok := reqs[1].Options["num_ctx"].(float64); !ok || n != 3000 {
		t.Errorf("num_ctx sent = %v", reqs[1].Options["num_ctx"])
	}
	if len(reqs[1].Messages) > 8 {
		t.Errorf("answer request still has %d messages", len(reqs[1].Messages))
	}
}

func TestCircuitBreakerAndMaxTurns(t *testing.T) {
	var steps []step
	for i := range 6 {
		// Each a different command: the same one again would be a loop
		// (TestRepetitionIsStopped), not a run of errors.
		steps = append(steps, step{calls: []call{{"bash", map[string]any{"label": "fail", "command": fmt.Sprintf("exit %d", i+1)}}}})
	}
	b, _ := ollamaBackend(t, steps...)
	defer b.close()
	rec := &recorder{}
	a, _ := chickAgent(t, b.provider, rec, nil)
	out := a.Run(t.Context(), agent.Input{History: userMsg("go"), Emit: rec.emit})
	if out.StopReason != agent.StopToolErrors || out.Turns != 5 {
		t.Errorf("breaker: %s after %d turns (%v)", out.StopReason, out.Turns, out.Err)
	}

	b2, _ := ollamaBackend(t, steps...)
	defer b2.close()
	a2, _ := chickAgent(t, b2.provider, &recorder{}, func(c *agent.Config) { c.MaxTurns = 2 })
	out = a2.Run(t.Context(), agent.Input{History: userMsg("go")})
	if out.StopReason != agent.StopMaxTurns || out.Turns != 2 {
		t.Errorf("max turns: %s after %d", out.StopReason, out.Turns)
	}
}

// TestImagesFollowTheModel: a read image reaches a vision model and is
// replaced by a note for one without vision.
func TestImagesFollowTheModel(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	for _, vision := range []bool{true, false} {
		t.Run(fmt.Sprint("vision=", vision), func(t *testing.T) {
			b, fake := ollamaBackend(t, step{calls: []call{{"read", map[string]any{"label": "Looking", "path": "pic.png"}}}}, step{text: "a pixel"})
			defer b.close()
			if vision {
				fake.SetCapabilities("completion", "tools", "vision")
			}
			a, root := chickAgent(t, b.provider, &recorder{}, nil)
			os.WriteFile(filepath.Join(root, "pic.png"), png, 0o644)
			out := a.Run(t.Context(), agent.Input{History: userMsg("what is it?")})
			if out.StopReason != agent.StopDone {
				t.Fatalf("run = %s %v", out.StopReason, out.Err)
			}
			last := fake.Requests()[1]
			toolMsg := last.Messages[len(last.Messages)-1]
			if vision && (len(toolMsg.Images) != 1 || strings.Contains(toolMsg.Content, "not shown")) {
				t.Errorf("vision model got %+v", toolMsg)
			}
			if !vision && (len(toolMsg.Images) != 0 || !strings.Contains(toolMsg.Content, "1 image(s) not shown")) {
				t.Errorf("text model got %+v", toolMsg)
			}
		})
	}
	// Anthropic takes images in tool results.
	b, _ := anthropicBackend(t, step{calls: []call{{"read", map[string]any{"label": "Looking", "path": "pic.png"}}}}, step{text: "a pixel"})
	defer b.close()
	a, root := chickAgent(t, b.provider, &recorder{}, nil)
	os.WriteFile(filepath.Join(root, "pic.png"), png, 0o644)
	if out := a.Run(t.Context(), agent.Input{History: userMsg("what is it?")}); out.StopReason != agent.StopDone || b.images() != 1 {
		t.Errorf("anthropic image run = %s %v, %d images sent", out.StopReason, out.Err, b.images())
	}
}

// TestRepairedHistoryIsAccepted: a context left with an unanswered tool
// call (crash mid-tool) still makes a valid request.
func TestRepairedHistoryIsAccepted(t *testing.T) {
	b, _ := anthropicBackend(t, step{text: "ok"})
	defer b.close()
	a, _ := chickAgent(t, b.provider, &recorder{}, nil)
	hist := []model.Message{
		{Role: model.RoleUser, Content: "start"},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "x1", Name: "bash", Args: json.RawMessage(`{}`)}}},
		{Role: model.RoleTool, ToolCallID: "stray", Content: "orphan"},
		{Role: model.RoleUser, Content: "are you there?"},
	}
	out := a.Run(t.Context(), agent.Input{History: hist})
	if out.StopReason != agent.StopDone {
		t.Fatalf("run = %s %v", out.StopReason, out.Err)
	}
	sent := strings.Join(b.sent()[0], "\n")
	if !strings.Contains(sent, "tool:(no result: the run ended") || strings.Contains(sent, "orphan") {
		t.Errorf("sent:\n%s", sent)
	}
}

// TestRepair: a well-formed history comes back as it is, not copied; each
// kind of damage is repaired.
func TestRepair(t *testing.T) {
	call := func(ids ...string) model.Message {
		m := model.Message{Role: model.RoleAssistant}
		for _, id := range ids {
			m.ToolCalls = append(m.ToolCalls, model.ToolCall{ID: id, Name: "bash"})
		}
		return m
	}
	result := func(id string) model.Message {
		return model.Message{Role: model.RoleTool, ToolCallID: id, Content: "r" + id}
	}
	user := func(s string) model.Message { return model.Message{Role: model.RoleUser, Content: s} }
	missing := func(id string) string { return "tool:" + id + ":(no result" }
	show := func(h []model.Message) string {
		var b strings.Builder
		for _, m := range h {
			switch {
			case m.Role == model.RoleTool && m.IsError:
				b.WriteString("tool:" + m.ToolCallID + ":" + m.Content[:len("(no result")] + " ")
			case m.Role == model.RoleTool:
				b.WriteString("tool:" + m.ToolCallID + " ")
			case len(m.ToolCalls) > 0:
				b.WriteString("calls ")
			default:
				b.WriteString(string(m.Role) + " ")
			}
		}
		return strings.TrimSpace(b.String())
	}
	good := []model.Message{user("a"), call("1", "2"), result("2"), result("1"), {Role: model.RoleAssistant, Content: "ok"}, user("b")}
	if got := agent.Repair(good); &got[0] != &good[0] || len(got) != len(good) {
		t.Errorf("well-formed history was copied or changed: %s", show(got))
	}
	for _, c := range []struct {
		name string
		in   []model.Message
		want string
	}{
		{"unanswered at the end", []model.Message{user("a"), call("1")}, "user calls " + missing("1")},
		{"unanswered before a user message", []model.Message{call("1", "2"), result("1"), user("b")}, "calls tool:1 " + missing("2") + " user"},
		{"unanswered before the next call", []model.Message{call("1"), call("2"), result("2")}, "calls " + missing("1") + " calls tool:2"},
		{"orphan result", []model.Message{user("a"), result("9"), user("b")}, "user user"},
		{"result answered twice", []model.Message{call("1"), result("1"), result("1")}, "calls tool:1"},
	} {
		if got := show(agent.Repair(c.in)); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

func TestSplitKeepsToolPairs(t *testing.T) {
	big := strings.Repeat("z", 4000)
	h := []model.Message{
		agent.SummaryMessage("old"),
		{Role: model.RoleUser, Content: "u1"},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "a", Name: "bash"}, {ID: "b", Name: "bash"}}},
		{Role: model.RoleTool, ToolCallID: "a", Content: big},
		{Role: model.RoleTool, ToolCallID: "b", Content: "small"},
		{Role: model.RoleAssistant, Content: "done"},
	}
	for keep := 0; keep < 3000; keep += 50 {
		cut := agent.SplitForCompaction(h, keep)
		if cut != 0 && (cut < 1 || h[cut].Role == model.RoleTool) {
			t.Fatalf("SplitForCompaction(keep=%d) = %d: kept part starts with %s", keep, cut, h[cut].Role)
		}
	}
	if cut := agent.SplitForCompaction(h, 10); cut != 2 && cut != 5 {
		t.Errorf("SplitForCompaction(10) = %d", cut)
	}
	if cut := agent.SplitForCompaction(h[:2], 1000); cut != 0 {
		t.Errorf("summary plus one exchange: cut %d, want nothing to compact", cut)
	}
}

func TestPanickingToolIsAnError(t *testing.T) {
	b, _ := ollamaBackend(t, step{calls: []call{{"boom", map[string]any{"label": "x"}}}}, step{text: "recovered"})
	defer b.close()
	a, err := agent.New(agent.Config{Provider: b.provider, Model: "m", Tools: []agent.Tool{panicTool{}}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	out := a.Run(t.Context(), agent.Input{History: userMsg("go"), Emit: rec.emit})
	if out.StopReason != agent.StopDone || !rec.of(agent.EventToolEnd)[0].IsError {
		t.Errorf("run = %s, tool end %+v", out.StopReason, rec.of(agent.EventToolEnd))
	}
}

type panicTool struct{}

func (panicTool) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "boom", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}
}
func (panicTool) Run(context.Context, json.RawMessage) (agent.Result, error) { panic("kaboom") }

// TestNothingToCompactIsQuiet: a window too small for even the latest
// message does not make every turn try (and fail) to compact.
func TestNothingToCompactIsQuiet(t *testing.T) {
	b, fake := ollamaBackend(t, step{text: "fine"})
	defer b.close()
	fake.SetContextLength(100)
	rec := &recorder{}
	a, _ := chickAgent(t, b.provider, rec, func(c *agent.Config) { c.ReserveTokens = 50 })
	out := a.Run(t.Context(), agent.Input{History: userMsg(strings.Repeat("long ", 200)), Emit: rec.emit})
	if out.StopReason != agent.StopDone || len(rec.of(agent.EventCompactionStart)) != 0 {
		t.Errorf("run = %s, events %v", out.StopReason, rec.types())
	}
}
