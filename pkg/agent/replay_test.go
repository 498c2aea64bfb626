package agent_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/ollama"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// The replay tests drive the real loop through the real Ollama provider
// with the corpus of real reply shapes (pkg/model/ollama/testdata/replies,
// each with its provenance), served over the wire with chunk boundaries
// inside tags and inside JSON. Each case asserts what the user sees (the
// answer), what is stored (the messages the run adds), what is sent back
// to the model (every later request), and what is counted (usage).

const repliesDir = "../model/ollama/testdata/replies"

// replay is a fixture loaded for a test: its turn, its counts, and the
// thinking it holds (which must never come out).
type replay struct {
	turn     ollamatest.Turn
	usage    model.Usage
	thinking string
}

func loadReplay(t *testing.T, name string) replay {
	t.Helper()
	r, err := ollamatest.LoadReply(filepath.Join(repliesDir, name+".ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	var out replay
	out.turn = r.Turn()
	var content strings.Builder
	for _, line := range r.Lines {
		var l struct {
			Message struct {
				Content  string `json:"content"`
				Thinking string `json:"thinking"`
			} `json:"message"`
			Done        bool  `json:"done"`
			PromptCount int64 `json:"prompt_eval_count"`
			EvalCount   int64 `json:"eval_count"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		content.WriteString(l.Message.Content)
		out.thinking += l.Message.Thinking
		if l.Done {
			out.usage = model.Usage{InputTokens: l.PromptCount, OutputTokens: l.EvalCount}
		}
	}
	// The thought written inline: what the answer is without it.
	c := content.String()
	if s := agent.StripThinking(c); s != c {
		out.thinking += strings.TrimSpace(strings.Replace(c, strings.TrimSpace(s), "", 1))
	}
	return out
}

// fakeTool is a tool with a real tool's schema that records its calls.
type fakeTool struct {
	spec   model.ToolSpec
	result string
	mu     sync.Mutex
	calls  []json.RawMessage
}

func (f *fakeTool) Spec() model.ToolSpec { return f.spec }

func (f *fakeTool) Run(_ context.Context, args json.RawMessage) (agent.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, append(json.RawMessage(nil), args...))
	return agent.Result{Text: f.result}, nil
}

func (f *fakeTool) called() []json.RawMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// messyTools are Mother's spawn_chick and list_events and a chick's bash
// and read, with their real schemas (pkg/mother/chicks.go,
// pkg/events/tools.go, pkg/tools).
func messyTools() map[string]*fakeTool {
	return map[string]*fakeTool{
		"spawn_chick": {result: "Chick c-1234abcd hatched (tier local); it is starting now.", spec: model.ToolSpec{Name: "spawn_chick", Description: "Hand a heavy goal to a chick.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"label":{"type":"string","description":"a few words shown to users"},"goal":{"type":"string","description":"the complete goal for the chick"},"tier":{"type":"string","enum":["local"]},"skills":{"type":"string","enum":["channel","workspace"]}},"required":["goal"]}`)}},
		"list_events": {result: "No events in this channel.", spec: model.ToolSpec{Name: "list_events", Description: "List the scheduled events.",
			Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}},
		"bash": {result: "total 0", spec: model.ToolSpec{Name: "bash", Description: "Run a command.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"label":{"type":"string"},"command":{"type":"string"},"timeout":{"type":"integer"}},"required":["command"]}`)}},
		"read": {result: "hello", spec: model.ToolSpec{Name: "read", Description: "Read a file.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"label":{"type":"string"},"path":{"type":"string"},"offset":{"type":"integer"},"limit":{"type":"integer"}},"required":["path"]}`)}},
	}
}

// markup is what must never reach a channel, the context or the model
// again.
var markup = []string{"<think", "</think", "<tool_call", "</tool_call", "<function=", "```json"}

func TestMessyRepliesReplayed(t *testing.T) {
	type want struct {
		stop     agent.StopReason
		final    string   // a substring of the answer
		called   []string // tools run, in order
		args     []string // a substring of each run's arguments
		requests int
		nudge    string // a substring of the note the second request carries
		thinking bool   // a thinking event was emitted
	}
	for _, tc := range []struct {
		name    string
		replies []string
		want    want
	}{
		// Thinking, every way it arrives.
		{"think closed in content", []string{"think-closed"}, want{stop: agent.StopDone, final: "Paris is the capital of France.", requests: 1, thinking: true}},
		{"think empty block", []string{"think-empty"}, want{stop: agent.StopDone, final: "The capital of France is Paris.", requests: 1, thinking: true}},
		{"think orphan close", []string{"think-orphan-close"}, want{stop: agent.StopDone, final: "Hello! How can I help you today?", requests: 1, thinking: true}},
		{"think in its own field", []string{"think-field"}, want{stop: agent.StopDone, final: "Paris is the capital of France.", requests: 1, thinking: true}},
		{"think unclosed, then asked again", []string{"think-unclosed", "answer-plain"}, want{stop: agent.StopDone, final: "Done: I started a chick", requests: 2, nudge: "ran out of room", thinking: true}},
		{"think only, then asked again", []string{"think-only", "answer-plain"}, want{stop: agent.StopDone, final: "Done:", requests: 2, nudge: "was empty", thinking: true}},
		// Calls written as text.
		{"qwen tool_call as text", []string{"toolcall-qwen-text", "answer-plain"}, want{stop: agent.StopDone, final: "Done:", called: []string{"spawn_chick"}, args: []string{"counts the words"}, requests: 2}},
		{"think then tool_call as text", []string{"toolcall-think-then-text", "answer-plain"}, want{stop: agent.StopDone, final: "Done:", called: []string{"spawn_chick"}, args: []string{"logs.tar.gz"}, requests: 2, thinking: true}},
		{"bare json with parameters", []string{"toolcall-bare-json", "answer-plain"}, want{stop: agent.StopDone, final: "Done:", called: []string{"list_events"}, args: []string{"{}"}, requests: 2}},
		{"fenced json", []string{"toolcall-fenced-json", "answer-plain"}, want{stop: agent.StopDone, final: "Done:", called: []string{"spawn_chick"}, args: []string{"largest files"}, requests: 2}},
		{"hermes function", []string{"toolcall-hermes-function", "answer-plain"}, want{stop: agent.StopDone, final: "Done:", called: []string{"spawn_chick"}, args: []string{"example.com"}, requests: 2}},
		{"qwen3-coder xml", []string{"toolcall-qwen-coder-xml", "answer-plain"}, want{stop: agent.StopDone, final: "Done:", called: []string{"bash"}, args: []string{`"command":"ls -la"`}, requests: 2}},
		{"chick read as text", []string{"toolcall-qwen-text-read", "answer-plain"}, want{stop: agent.StopDone, final: "Done:", called: []string{"read"}, args: []string{"notes.txt"}, requests: 2}},
		// Broken calls.
		{"arguments as a string, repaired", []string{"toolcall-args-string", "answer-plain"}, want{stop: agent.StopDone, final: "Done:", called: []string{"spawn_chick"}, args: []string{`{"goal": "Rename`}, requests: 2}},
		{"broken json, asked again", []string{"toolcall-broken-json", "toolcall-qwen-text", "answer-plain"}, want{stop: agent.StopDone, final: "Done:", called: []string{"spawn_chick"}, args: []string{"counts the words"}, requests: 3, nudge: "double quotes"}},
		{"unknown tool, asked again", []string{"toolcall-unknown-tool", "toolcall-qwen-text", "answer-plain"}, want{stop: agent.StopDone, final: "Done:", called: []string{"spawn_chick"}, requests: 3, nudge: `did you mean "spawn_chick"?`}},
		{"unknown tool twice: a plain failure", []string{"toolcall-unknown-tool", "toolcall-unknown-tool"}, want{stop: agent.StopUnusable, final: "my model twice wrote a tool call as text", requests: 2, nudge: "spawn_chik"}},
		// Empty replies.
		{"empty, asked again", []string{"empty-stop", "answer-plain"}, want{stop: agent.StopDone, final: "Done:", requests: 2, nudge: "was empty"}},
		{"empty twice: a plain failure", []string{"empty-stop", "empty-stop"}, want{stop: agent.StopUnusable, final: "empty answer twice", requests: 2, nudge: "was empty"}},
		// Going round in circles: stopped on the fourth call, well before MaxTurns.
		{"the same call every turn", slices.Repeat([]string{"toolcall-structured-list-events"}, 10),
			want{stop: agent.StopRepeating, final: "list_events {}", called: []string{"list_events", "list_events", "list_events"}, requests: 4}},
		{"the same call twice a turn", slices.Repeat([]string{"toolcall-structured-list-events-twice"}, 10),
			want{stop: agent.StopRepeating, final: "list_events {}", called: []string{"list_events", "list_events", "list_events"}, requests: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var (
				turns    []ollamatest.Turn
				usage    []model.Usage
				thoughts []string
			)
			for _, name := range tc.replies {
				r := loadReplay(t, name)
				turns = append(turns, r.turn)
				usage = append(usage, r.usage)
				if r.thinking != "" {
					thoughts = append(thoughts, r.thinking)
				}
			}
			fake := ollamatest.New(turns...)
			defer fake.Close()
			fake.SetCapabilities("completion", "tools", "thinking")
			p, err := ollama.New(fake.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			tools := messyTools()
			var list []agent.Tool
			for _, tl := range tools {
				list = append(list, tl)
			}
			rec := &recorder{}
			a, err := agent.New(agent.Config{Provider: p, Model: "qwen3:30b-a3b", Tools: list, Think: model.ThinkOff})
			if err != nil {
				t.Fatal(err)
			}
			out := a.Run(t.Context(), agent.Input{History: userMsg("please"), Emit: rec.emit, OnMessage: rec.onMessage})
			w := tc.want

			// What the user sees.
			if out.StopReason != w.stop || !strings.Contains(out.Final, w.final) {
				t.Errorf("stop %s (%v), answer %q; want %s with %q", out.StopReason, out.Err, out.Final, w.stop, w.final)
			}
			reqs := fake.Requests()
			if len(reqs) != w.requests {
				t.Errorf("%d model calls, want %d", len(reqs), w.requests)
			}
			// What is counted: every call the server answered, thinking included.
			var total model.Usage
			for i := range min(len(reqs), len(usage)) {
				total = total.Add(usage[i])
			}
			if out.Usage != total {
				t.Errorf("usage %+v, want %+v (every call's prompt_eval_count and eval_count)", out.Usage, total)
			}
			// The tools run.
			var called []string
			var args []string
			for _, name := range []string{"spawn_chick", "list_events", "bash", "read"} {
				for _, a := range tools[name].called() {
					called = append(called, name)
					args = append(args, string(a))
				}
			}
			if !slices.Equal(called, w.called) {
				t.Errorf("tools run %v, want %v", called, w.called)
			}
			for i, sub := range w.args {
				if i < len(args) && !strings.Contains(args[i], sub) {
					t.Errorf("call %d args %s, want %q in them", i, args[i], sub)
				}
				if i < len(args) && !json.Valid([]byte(args[i])) || i < len(args) && args[i][0] != '{' {
					t.Errorf("call %d args %s are not a JSON object", i, args[i])
				}
			}
			// The nudge rides on the next request only; the context never
			// keeps it.
			if w.nudge != "" {
				if len(reqs) < 2 || !strings.Contains(lastContent(reqs[1]), w.nudge) {
					t.Errorf("second request does not end with a note holding %q: %+v", w.nudge, reqs[min(1, len(reqs)-1)].Messages)
				}
			}
			for _, m := range rec.messages() {
				if strings.HasPrefix(m.Content, "[note]") {
					t.Errorf("a note was stored: %q", m.Content)
				}
			}
			if got := len(rec.of(agent.EventThinking)) > 0; got != w.thinking {
				t.Errorf("thinking event emitted = %v, want %v", got, w.thinking)
			}

			// No thinking reaches the answer, the events, the context or
			// the model again; no markup reaches the answer, the context or
			// the model again (but for the one reply quoted back with the
			// note that says what was wrong with it). Deltas are the
			// model's text as it streams, without its thinking: no channel
			// shows them, and a call written as text is only known to be
			// one when the reply is whole.
			var seen, shown []string
			seen = append(seen, out.Final)
			for _, m := range rec.messages() {
				seen = append(seen, m.Content)
			}
			for _, ev := range rec.all() {
				if ev.Type == agent.EventMessageDelta {
					shown = append(shown, ev.Text)
				} else {
					seen = append(seen, ev.Text)
				}
			}
			for _, r := range reqs {
				for j, m := range r.Messages {
					if strings.HasPrefix(m.Content, "[note]") || j+1 < len(r.Messages) && strings.HasPrefix(r.Messages[j+1].Content, "[note]") {
						continue
					}
					seen = append(seen, m.Content)
				}
			}
			for _, s := range append(seen, shown...) {
				for _, th := range thoughts {
					if probe := firstWords(th, 6); probe != "" && strings.Contains(s, probe) {
						t.Errorf("the model's thinking %q came out in %q", probe, s)
					}
				}
			}
			for _, s := range seen {
				for _, bad := range markup {
					if strings.Contains(s, bad) {
						t.Errorf("%q came out in %q", bad, s)
					}
				}
			}
			// The repetition note: on the second call with the same
			// result, and on the third.
			if w.stop == agent.StopRepeating {
				var results []string
				for _, m := range rec.messages() {
					if m.Role == model.RoleTool {
						results = append(results, m.Content)
					}
				}
				if len(results) < 4 || strings.Contains(results[0], "[note]") || !strings.Contains(results[1], "You have now called list_events with these same arguments twice in a row; its result was the same") ||
					!strings.Contains(results[2], "three times in a row") || !strings.Contains(results[3], "not run") {
					t.Errorf("tool results %q", results)
				}
			}
		})
	}
}

func lastContent(r ollamatest.Request) string {
	if len(r.Messages) == 0 {
		return ""
	}
	return r.Messages[len(r.Messages)-1].Content
}

// firstWords is the first n words of s, joined by single spaces.
func firstWords(s string, n int) string {
	f := strings.Fields(s)
	return strings.Join(f[:min(n, len(f))], " ")
}

func (r *recorder) messages() []model.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}

func (r *recorder) all() []agent.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// TestBrokenArgumentsGetAnError: structured calls with broken arguments
// are not run; the model gets a result saying exactly what to fix (a
// missing required field with its type, a wrong type, an enum, an unknown
// tool with the nearest name), and the run goes on. A missing label is
// not a reason to refuse a call.
func TestBrokenArgumentsGetAnError(t *testing.T) {
	fake := ollamatest.New(
		ollamatest.Turn{Calls: []ollamatest.Call{{Name: "spawn_chick", Args: map[string]any{"label": "x"}}}},
		ollamatest.Turn{Calls: []ollamatest.Call{{Name: "spawn_chick", Args: map[string]any{"goal": "g", "skills": "global"}}}},
		ollamatest.Turn{Calls: []ollamatest.Call{{Name: "spawn_chik", Args: map[string]any{"goal": "g"}}}},
		ollamatest.Turn{Calls: []ollamatest.Call{{Name: "read", Args: map[string]any{"path": 42}}}},
		ollamatest.Turn{Calls: []ollamatest.Call{{Name: "bash", Args: map[string]any{"command": "ls", "timeout": "30"}}}},
		ollamatest.Turn{Text: "All done."},
	)
	defer fake.Close()
	p, _ := ollama.New(fake.URL, nil)
	tools := messyTools()
	var list []agent.Tool
	for _, tl := range tools {
		list = append(list, tl)
	}
	rec := &recorder{}
	a, err := agent.New(agent.Config{Provider: p, Model: "m", Tools: list})
	if err != nil {
		t.Fatal(err)
	}
	out := a.Run(t.Context(), agent.Input{History: userMsg("go"), Emit: rec.emit, OnMessage: rec.onMessage})
	if out.StopReason != agent.StopDone || out.Final != "All done." {
		t.Fatalf("stop %s (%v): %q", out.StopReason, out.Err, out.Final)
	}
	var results []model.Message
	for _, m := range rec.messages() {
		if m.Role == model.RoleTool {
			results = append(results, m)
		}
	}
	wants := []string{
		`missing required field "goal" (string: the complete goal for the chick)`,
		`field "skills" must be one of "channel", "workspace", got string "global"`,
		`there is no tool "spawn_chik" (did you mean "spawn_chick"?)`,
		`field "path" must be a string, got number 42`,
		"total 0",
	}
	if len(results) != len(wants) {
		t.Fatalf("results %+v", results)
	}
	for i, w := range wants {
		if !strings.Contains(results[i].Content, w) || results[i].IsError != (i < 4) {
			t.Errorf("result %d = %q (error %v), want %q", i, results[i].Content, results[i].IsError, w)
		}
	}
	if n := len(tools["spawn_chick"].called()) + len(tools["read"].called()); n != 0 {
		t.Errorf("%d calls with broken arguments were run", n)
	}
	if got := tools["bash"].called(); len(got) != 1 || string(got[0]) != `{"command":"ls","timeout":"30"}` {
		t.Errorf("bash ran with %s, want the model's own arguments", got)
	}
}
