package hosttools

import (
	"os"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/ollama"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// TestInvokeToolInAgentRun: a model (the wire-level Ollama fake) calls
// invoke_tool in a real agent run: a good call reaches the example server
// and its result goes back to the model; a call with bad arguments comes
// back as an error result naming the parameters; the run ends with the
// model's answer.
func TestInvokeToolInAgentRun(t *testing.T) {
	t.Parallel()
	notes, file := notesServer(t)
	m := newManager(t, Options{})
	start(t, m, map[string]config.MCPServer{"notes": notes})

	fake := ollamatest.New(
		ollamatest.Turn{Calls: []ollamatest.Call{{Name: "invoke_tool", Args: map[string]any{"tool": "notes.add", "args": map[string]any{"text": "call mum on Sunday", "tags": []any{"family"}}}}}},
		ollamatest.Turn{Calls: []ollamatest.Call{{Name: "invoke_tool", Args: map[string]any{"tool": "notes.search", "args": map[string]any{"limit": 3}}}}},
		ollamatest.Turn{Text: "Noted: call mum on Sunday."},
	)
	defer fake.Close()
	p, err := ollama.New(fake.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agent.New(agent.Config{Provider: p, Model: "tiny", Tools: []agent.Tool{m.InvokeTool()}, ContextWindow: 32768})
	if err != nil {
		t.Fatal(err)
	}
	out := ag.Run(t.Context(), agent.Input{System: "test", History: []model.Message{{Role: model.RoleUser, Content: "remember to call mum on Sunday"}}})
	if out.StopReason != agent.StopDone || out.Final != "Noted: call mum on Sunday." {
		t.Fatalf("run = %+v", out)
	}
	reqs := fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model calls", len(reqs))
	}
	if !strings.Contains(string(reqs[0].Tools[0]), `"invoke_tool"`) {
		t.Errorf("tools offered = %s", reqs[0].Tools)
	}
	first := reqs[1].Messages[len(reqs[1].Messages)-1]
	if first.Role != "tool" || first.Content != "Added note 1." {
		t.Errorf("first result = %+v", first)
	}
	second := reqs[2].Messages[len(reqs[2].Messages)-1]
	if second.Role != "tool" || !strings.Contains(second.Content, "notes.search was not called") || !strings.Contains(second.Content, "query: words to look for") {
		t.Errorf("second result = %+v", second)
	}
	b, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(b), `"text":"call mum on Sunday","tags":["family"]`) {
		t.Errorf("notes file = %s, %v", b, err)
	}
}
