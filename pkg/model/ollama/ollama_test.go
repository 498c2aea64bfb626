package ollama_test

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"

	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/ollama"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

func TestShowWindowAndVision(t *testing.T) {
	fake := ollamatest.New(ollamatest.Turn{Text: "ok"})
	defer fake.Close()
	fake.SetContextLength(262144)
	fake.SetCapabilities("completion", "vision")
	p, err := ollama.New(fake.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := p.ContextWindow(t.Context(), "m"); err != nil || n != ollama.MaxTrainedWindow {
		t.Errorf("ContextWindow = %d, %v; want the trained length capped at %d", n, err, ollama.MaxTrainedWindow)
	}
	if ok, err := p.SupportsImages(t.Context(), "m"); err != nil || !ok {
		t.Errorf("SupportsImages = %v, %v", ok, err)
	}
	if _, err := p.Chat(t.Context(), model.Request{Model: "m", ContextWindow: 8192, Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}, nil); err != nil {
		t.Fatal(err)
	}
	if got := fake.Requests()[0].Options["num_ctx"]; got != float64(8192) {
		t.Errorf("num_ctx sent = %v, want 8192", got)
	}
}

// TestDroppedConnectionIsTransient: a server that drops the connection
// before answering is worth another attempt (transient); one that refuses
// it is down (unreachable). Found by the soak: a single dropped connection
// ended a chick's whole run.
func TestDroppedConnectionIsTransient(t *testing.T) {
	drop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close()
		}
	}))
	defer drop.Close()
	p, err := ollama.New(drop.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := model.Request{Model: "m", ContextWindow: 8192, Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}
	_, err = p.Chat(t.Context(), req, nil)
	if !model.IsTransient(err) || errors.Is(err, model.ErrUnreachable) {
		t.Errorf("dropped connection: %v (transient %v), want a transient error", err, model.IsTransient(err))
	}

	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	p, _ = ollama.New("http://"+addr, nil)
	_, err = p.Chat(t.Context(), req, nil)
	if !errors.Is(err, model.ErrUnreachable) || model.IsTransient(err) {
		t.Errorf("refused connection: %v, want unreachable", err)
	}
}

// TestToolsSentAsSpecified: the tools' schemas are parsed once and kept,
// yet every request carries the tools it was given: the same ones again,
// and a tool whose schema changed (a host tool after a reload) with its
// new schema, on the wire to a real HTTP server.
func TestToolsSentAsSpecified(t *testing.T) {
	fake := ollamatest.New(ollamatest.Turn{Text: "ok"}, ollamatest.Turn{Text: "ok"}, ollamatest.Turn{Text: "ok"})
	defer fake.Close()
	p, err := ollama.New(fake.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec := func(param string) model.ToolSpec {
		return model.ToolSpec{Name: "lookup", Description: "look a thing up",
			Parameters: json.RawMessage(`{"type":"object","properties":{"` + param + `":{"type":"string","description":"what"}},"required":["` + param + `"]}`)}
	}
	for _, param := range []string{"query", "query", "term"} {
		req := model.Request{Model: "m", ContextWindow: 8192, Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}, Tools: []model.ToolSpec{spec(param)}}
		if _, err := p.Chat(t.Context(), req, nil); err != nil {
			t.Fatal(err)
		}
	}
	reqs := fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, param := range []string{"query", "query", "term"} {
		var tool struct {
			Type     string `json:"type"`
			Function struct {
				Name       string `json:"name"`
				Parameters struct {
					Properties map[string]any `json:"properties"`
					Required   []string       `json:"required"`
				} `json:"parameters"`
			} `json:"function"`
		}
		if len(reqs[i].Tools) != 1 {
			t.Fatalf("request %d: %d tools, want 1", i, len(reqs[i].Tools))
		}
		if err := json.Unmarshal(reqs[i].Tools[0], &tool); err != nil {
			t.Fatal(err)
		}
		if _, ok := tool.Function.Parameters.Properties[param]; tool.Type != "function" || tool.Function.Name != "lookup" || !ok ||
			len(tool.Function.Parameters.Properties) != 1 || len(tool.Function.Parameters.Required) != 1 || tool.Function.Parameters.Required[0] != param {
			t.Errorf("request %d sent tool %s, want lookup with the one parameter %q", i, reqs[i].Tools[0], param)
		}
	}
}

// TestHistorySentOverTheWire: a history with tool calls and their results
// reaches the server, over the real socket, as the official types read it:
// each call's name, id, index and arguments (in the model's key order), and
// each result's tool name and call id.
func TestHistorySentOverTheWire(t *testing.T) {
	fake := ollamatest.New(ollamatest.Turn{Text: "ok"})
	defer fake.Close()
	p, err := ollama.New(fake.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	history := []model.Message{
		{Role: model.RoleUser, Content: "read two files"},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{
			{ID: "call_1", Name: "read", Args: json.RawMessage(`{"path":"b.md","limit":20}`)},
			{ID: "call_2", Name: "bash", Args: json.RawMessage(`{"command":"echo <hi> && ls"}`)},
		}},
		{Role: model.RoleTool, Content: "B", ToolCallID: "call_1", ToolName: "read"},
		{Role: model.RoleTool, Content: "hi", ToolCallID: "call_2", ToolName: "bash"},
	}
	if _, err := p.Chat(t.Context(), model.Request{Model: "m", System: "be brief", Messages: history}, nil); err != nil {
		t.Fatal(err)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	var sent []api.Message
	for _, m := range reqs[0].Messages {
		b, _ := json.Marshal(m)
		var am api.Message
		if err := json.Unmarshal(b, &am); err != nil {
			t.Fatalf("message %s: %v", b, err)
		}
		sent = append(sent, am)
	}
	if len(sent) != 5 || sent[0].Role != "system" || sent[0].Content != "be brief" || sent[1].Content != "read two files" {
		t.Fatalf("sent %+v", sent)
	}
	calls := sent[2].ToolCalls
	if len(calls) != 2 {
		t.Fatalf("assistant message sent with %d tool calls, want 2", len(calls))
	}
	for i, want := range []struct{ id, name, args string }{{"call_1", "read", `{"path":"b.md","limit":20}`}, {"call_2", "bash", `{"command":"echo <hi> && ls"}`}} {
		c := calls[i]
		args, _ := json.Marshal(c.Function.Arguments)
		if c.ID != want.id || c.Function.Name != want.name || c.Function.Index != i || !jsonEqual(string(args), want.args) {
			t.Errorf("tool call %d sent as %s %s #%d %s, want %s %s #%d %s", i, c.ID, c.Function.Name, c.Function.Index, args, want.id, want.name, i, want.args)
		}
	}
	if order := calls[0].Function.Arguments.String(); !strings.HasPrefix(order, `{"path"`) {
		t.Errorf("arguments %s not in the model's key order", order)
	}
	for i, want := range [][2]string{{"call_1", "read"}, {"call_2", "bash"}} {
		if m := sent[3+i]; m.Role != "tool" || m.ToolCallID != want[0] || m.ToolName != want[1] {
			t.Errorf("tool result %d sent as %+v, want the result of %s (%s)", i, m, want[0], want[1])
		}
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// TestToolWithoutASchemaIsAnInvalidRequest: a tool whose parameters are
// not a schema (a chick can send anything) is refused as an invalid
// request, not sent, and not taken for a failure of the server.
func TestToolWithoutASchemaIsAnInvalidRequest(t *testing.T) {
	fake := ollamatest.New(ollamatest.Turn{Text: "ok"})
	defer fake.Close()
	p, err := ollama.New(fake.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, params := range []string{`5`, `"a string"`, `{"type": 5}`} {
		req := model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}, Tools: []model.ToolSpec{{Name: "odd", Parameters: json.RawMessage(params)}}}
		_, err := p.Chat(t.Context(), req, nil)
		if !errors.Is(err, model.ErrInvalidRequest) || model.IsTransient(err) {
			t.Errorf("parameters %s: %v, want an invalid request", params, err)
		}
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("%d requests reached the server", n)
	}
}

// TestThinkFollowsTheModel: "think" is sent only to a model whose
// /api/show lists the thinking capability: false for off, true for on and
// auto; nothing at all to a model that cannot think, whatever the setting.
func TestThinkFollowsTheModel(t *testing.T) {
	fake := ollamatest.New()
	defer fake.Close()
	fake.SetModelCapabilities("thinker", "completion", "tools", "thinking")
	fake.SetModelCapabilities("plain", "completion", "tools")
	p, err := ollama.New(fake.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		model string
		think model.Think
		want  string
	}{
		{"thinker", model.ThinkOff, "false"},
		{"thinker", model.ThinkOn, "true"},
		{"thinker", model.ThinkAuto, "true"},
		{"thinker", "", "true"},
		{"plain", model.ThinkOn, ""},
		{"plain", model.ThinkOff, ""},
		{"plain", model.ThinkAuto, ""},
	} {
		fake.Push(ollamatest.Turn{Text: "ok"})
		if _, err := p.Chat(t.Context(), model.Request{Model: tc.model, Think: tc.think, Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}, nil); err != nil {
			t.Fatal(err)
		}
		reqs := fake.Requests()
		if got := string(reqs[len(reqs)-1].Think); got != tc.want {
			t.Errorf("%s with think %q: sent %q, want %q", tc.model, tc.think, got, tc.want)
		}
	}
}

// TestThinkingFieldIsADeltaOfItsOwn: thoughts in Ollama's "thinking" field
// reach onDelta as Thinking, never as text, and stay out of the answer;
// eval_count, which counts them, is the usage.
func TestThinkingFieldIsADeltaOfItsOwn(t *testing.T) {
	r, err := ollamatest.LoadReply("testdata/replies/think-field.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	fake := ollamatest.New(r.Turn())
	defer fake.Close()
	p, _ := ollama.New(fake.URL, nil)
	var text, thinking strings.Builder
	resp, err := p.Chat(t.Context(), model.Request{Model: r.Model, Messages: []model.Message{{Role: model.RoleUser, Content: "capital of France?"}}}, func(d model.Delta) {
		text.WriteString(d.Text)
		thinking.WriteString(d.Thinking)
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "Paris is the capital of France." || text.String() != resp.Message.Content {
		t.Errorf("answer %q, text deltas %q", resp.Message.Content, text.String())
	}
	if !strings.Contains(thinking.String(), "general knowledge") || strings.Contains(resp.Message.Content, "general knowledge") {
		t.Errorf("thinking deltas %q", thinking.String())
	}
	if resp.Usage.OutputTokens != 40 {
		t.Errorf("usage %+v: eval_count (thinking included) is 40", resp.Usage)
	}
}
