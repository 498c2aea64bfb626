package main

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
	"github.com/mother-chat/mother/pkg/store"
)

// The messy-model tests run the real binary against a server replaying
// the corpus of real Ollama reply shapes (pkg/model/ollama/testdata/
// replies): thinking in the answer's text, a call written as text, the
// same call on every turn, an empty reply. What the terminal shows, what
// is stored and what goes back to the model are checked (docs/agent.md,
// "What Mother does with a messy model").

func loadReply(t *testing.T, name string) ollamatest.Turn {
	t.Helper()
	r, err := ollamatest.LoadReply(filepath.Join("../../pkg/model/ollama/testdata/replies", name+".ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	return r.Turn()
}

// lastAsk is the last user message that is not the loop's own note.
func lastAsk(r ollamatest.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if m := r.Messages[i]; m.Role == "user" && !strings.HasPrefix(m.Content, "[note]") {
			return m.Content
		}
	}
	return ""
}

// toolResultsSinceAsk counts the tool results after the last ask.
func toolResultsSinceAsk(r ollamatest.Request) int {
	n := 0
	for i := len(r.Messages) - 1; i >= 0; i-- {
		m := r.Messages[i]
		if m.Role == "user" && !strings.HasPrefix(m.Content, "[note]") {
			break
		}
		if m.Role == "tool" {
			n++
		}
	}
	return n
}

// thoughts are phrases of the replayed replies' thinking: none may be
// stored or shown anywhere.
var thoughts = []string{"The user asks for the capital", "The user wants the logs compressed", "general knowledge"}

// markupShown is tool-call and thinking markup that must never be shown.
var markupShown = []string{"<think", "</think", "<tool_call", "</tool_call", "<function=", `"parameters"`, `{"name"`}

// TestTerminalMessyModel: each row of issue 32's table, through mother
// --cli: thinking written in the answer is not shown; a call written as
// text (a bare JSON object) is made; the same call on every turn is
// stopped on the fourth with a plain answer; an empty reply is asked
// again. Mother's requests carry think:false (model.think defaults to off)
// to a model that lists the thinking capability.
func TestTerminalMessyModel(t *testing.T) {
	t.Parallel()
	loops := 0
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		ask := lastAsk(r)
		switch {
		case strings.Contains(ask, "capital of France"):
			return loadReply(t, "think-closed")
		case strings.Contains(ask, "which events"):
			if toolResultsSinceAsk(r) == 0 {
				return loadReply(t, "toolcall-bare-json")
			}
			return ollamatest.Turn{Text: "Nothing is scheduled here."}
		case strings.Contains(ask, "over and over"):
			loops++
			return loadReply(t, "toolcall-structured-list-events")
		case strings.Contains(ask, "say something"):
			if strings.HasPrefix(r.Messages[len(r.Messages)-1].Content, "[note]") {
				return ollamatest.Turn{Text: "Something, at last."}
			}
			return loadReply(t, "empty-stop")
		}
		return ollamatest.Turn{Text: "?"}
	})
	defer fake.Close()
	fake.SetCapabilities("completion", "tools", "thinking")
	data := t.TempDir()

	stdin := "what is the capital of France?\nwhich events are scheduled?\ncheck the events over and over\nsay something\n"
	r := runMother(t, stdin, []string{"MOTHER_OLLAMA_URL=" + fake.URL, "MOTHER_MODEL_ID=qwen3:30b-a3b"}, "--cli", data)
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"Paris is the capital of France.", "Nothing is scheduled here.", "I stopped here: I was going round in circles",
		"list_events {}", "Something, at last."} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, bad := range append(markupShown, thoughts...) {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("stdout shows %q:\n%s", bad, r.stdout)
		}
	}
	if loops != 4 {
		t.Errorf("the looping model was called %d times, want 4 (the fourth call is not made)", loops)
	}
	for _, req := range fake.Requests() {
		if string(req.Think) != "false" {
			t.Errorf("Mother sent think %q, want false (model.think off)", req.Think)
		}
	}
	// Stored: the context keeps no thinking, no markup and no note; the
	// call written as text is kept as the call it was.
	var calls []string
	for _, rec := range readContext(t, data) {
		if rec.Type != store.RecordMessage {
			continue
		}
		m := rec.Message
		for _, bad := range append(markupShown, thoughts...) {
			if strings.Contains(m.Content, bad) {
				t.Errorf("context.jsonl holds %q: %+v", bad, m)
			}
		}
		if m.Role == "user" && strings.HasPrefix(m.Content, "[note]") {
			t.Errorf("context.jsonl keeps the loop's note to the model: %+v", m)
		}
		for _, c := range m.ToolCalls {
			calls = append(calls, c.Name)
		}
	}
	if strings.Join(calls, ",") != "list_events,list_events,list_events,list_events,list_events" {
		t.Errorf("calls in the context %v: want the one written as text, then the loop's four (the last not run)", calls)
	}
	for _, m := range readLog(t, data) {
		for _, bad := range append(markupShown, thoughts...) {
			if strings.Contains(m.Text, bad) {
				t.Errorf("log.jsonl holds %q: %q", bad, m.Text)
			}
		}
	}
}

// TestChickMessyModel: the same in a chick, whose loop is the same agent.
// Mother's model thinks and then writes spawn_chick as text; the chick is
// started. The chick's model writes its bash call in qwen3-coder's XML,
// which is made in the container, then answers with its thinking inline.
// The tier's think (auto) is sent as true to a model that can think; the
// chick hears only that its model thinks. No thought is shown or stored
// anywhere in the data directory.
func TestChickMessyModel(t *testing.T) {
	t.Parallel()
	api := hatcherytest.Docker(t)
	hatcherytest.BuildImage(t)
	data, _ := chickData(t, api, nil)
	fake := ollamatest.NewFunc(func(r ollamatest.Request) ollamatest.Turn {
		switch r.Model {
		case motherModel:
			if !hasToolResult(r) {
				return loadReply(t, "toolcall-think-then-text")
			}
			return ollamatest.Turn{Text: "A chick is on it."}
		case chickModel:
			if len(toolResults(r)) == 0 {
				return loadReply(t, "toolcall-qwen-coder-xml")
			}
			if res := toolResults(r); !strings.Contains(res[0], "total") {
				return ollamatest.Turn{Text: "bash did not run: " + res[0]}
			}
			return loadReply(t, "think-field")
		}
		return ollamatest.Turn{Status: 404, Error: "unknown model " + r.Model}
	})
	defer fake.Close()
	fake.SetCapabilities("completion", "tools", "thinking")

	p := startChickMother(t, data, chickEnv(fake))
	io.WriteString(p.stdin, "please compress the logs\n")
	p.waitOut(t, "Paris is the capital of France.", 2*time.Minute)
	waitUntil(t, "the chick's result in log.jsonl", func() bool {
		b, _ := os.ReadFile(filepath.Join(data, "workspace/channels/cli/local/log.jsonl"))
		return strings.Contains(string(b), "Paris is the capital of France.")
	})
	p.stdin.Close()
	if code := p.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, p.out(), p.errs())
	}
	out := p.out()
	if !strings.Contains(out, "A chick is on it.") {
		t.Errorf("stdout:\n%s", out)
	}
	for _, bad := range append(markupShown, thoughts...) {
		if strings.Contains(out, bad) {
			t.Errorf("stdout shows %q:\n%s", bad, out)
		}
	}
	var chickThink, motherThink []string
	for _, r := range fake.Requests() {
		if r.Model == chickModel {
			chickThink = append(chickThink, string(r.Think))
		} else {
			motherThink = append(motherThink, string(r.Think))
		}
	}
	if strings.Join(chickThink, ",") != "true,true" || strings.Join(motherThink, ",") != "false,false" {
		t.Errorf("think sent: chick %v (tier auto: true), Mother %v (off: false)", chickThink, motherThink)
	}
	// The chick's second request has its bash call as a call, not text.
	for _, r := range fake.Requests() {
		if r.Model != chickModel || len(toolResults(r)) == 0 {
			continue
		}
		for _, m := range r.Messages {
			if m.Role == "assistant" && (len(m.ToolCalls) != 1 || strings.Contains(m.Content, "<function=")) {
				t.Errorf("the chick's call went back to its model as %+v", m)
			}
		}
	}
	// Nothing stored holds a thought; the chick's events say it thought.
	thinking := false
	filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		for _, th := range thoughts {
			if strings.Contains(string(b), th) {
				t.Errorf("%s holds the thought %q", path, th)
			}
		}
		if filepath.Base(path) == "events.jsonl" && strings.Contains(string(b), `"type":"thinking"`) {
			thinking = true
		}
		return nil
	})
	if !thinking {
		t.Error("no chick event says its model was thinking")
	}
}
