package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/openai"
	"github.com/mother-chat/mother/pkg/model/openai/openaitest"
)

// newProvider returns a provider for fake named "vllm", and fake.
func newProvider(t *testing.T, fake *openaitest.Server, edit ...func(*openai.Options)) *openai.Provider {
	t.Helper()
	o := openai.Options{Name: "vllm", BaseURL: fake.BaseURL()}
	for _, e := range edit {
		e(&o)
	}
	p, err := openai.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func hi(m string) model.Request {
	return model.Request{Model: m, System: "be brief", Messages: []model.Message{{Role: model.RoleUser, Content: "hi there"}}}
}

// deltas records what Chat streams.
type deltas struct {
	mu             sync.Mutex
	text, thinking []string
}

func (d *deltas) on(x model.Delta) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if x.Text != "" {
		d.text = append(d.text, x.Text)
	}
	if x.Thinking != "" {
		d.thinking = append(d.thinking, x.Thinking)
	}
}

func TestTextStreamsWithUsageInTheLastChunk(t *testing.T) {
	fake := openaitest.New(openaitest.Turn{Text: "Hello there, world", ChunkSize: 4, Usage: openaitest.Usage{Prompt: 42, Completion: 7}})
	defer fake.Close()
	p := newProvider(t, fake)
	var d deltas
	resp, err := p.Chat(t.Context(), hi("m"), d.on)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "Hello there, world" || resp.Message.Role != model.RoleAssistant {
		t.Errorf("message = %+v", resp.Message)
	}
	if len(d.text) != 5 || strings.Join(d.text, "") != "Hello there, world" {
		t.Errorf("text deltas = %q, want the text in 5 pieces", d.text)
	}
	if resp.StopReason != "stop" || resp.Usage != (model.Usage{InputTokens: 42, OutputTokens: 7}) {
		t.Errorf("stop %q, usage %+v", resp.StopReason, resp.Usage)
	}
	if n := p.EstimatedCalls(); n != 0 {
		t.Errorf("EstimatedCalls = %d, want 0", n)
	}
	req := fake.Requests()[0]
	if !req.Stream || req.StreamOptions == nil || !req.StreamOptions.IncludeUsage {
		t.Errorf("stream %v, stream_options %+v: want a stream with include_usage", req.Stream, req.StreamOptions)
	}
	if len(req.Messages) != 2 || req.Messages[0].Role != "system" || req.System() != "be brief" || req.LastUser() != "hi there" {
		t.Errorf("messages = %+v", req.Messages)
	}
	if req.MaxTokens != nil || req.MaxCompletionTokens != nil || len(req.Extra) != 0 {
		t.Errorf("sent a cap or extra fields unasked: %s", req.Body)
	}
}

// TestReasoningIsThinking: both names servers give the thinking are
// streamed as thinking and kept out of the answer; thinking written in the
// text is left there, for the agent.
func TestReasoningIsThinking(t *testing.T) {
	for _, field := range []string{"reasoning_content", "reasoning"} {
		t.Run(field, func(t *testing.T) {
			fake := openaitest.New(openaitest.Turn{Reasoning: "The user greets me. I greet back.", ReasoningField: field, Text: "Hi!"})
			defer fake.Close()
			var d deltas
			resp, err := newProvider(t, fake).Chat(t.Context(), hi("m"), d.on)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Message.Content != "Hi!" {
				t.Errorf("content = %q, want the answer alone", resp.Message.Content)
			}
			if got := strings.Join(d.thinking, ""); got != "The user greets me. I greet back." || len(d.thinking) < 2 {
				t.Errorf("thinking deltas = %q", d.thinking)
			}
			if got := strings.Join(d.text, ""); got != "Hi!" {
				t.Errorf("text deltas = %q", got)
			}
		})
	}
	fake := openaitest.New(openaitest.Turn{Text: "<think>hmm</think>Hi!"})
	defer fake.Close()
	resp, err := newProvider(t, fake).Chat(t.Context(), hi("m"), nil)
	if err != nil || resp.Message.Content != "<think>hmm</think>Hi!" {
		t.Errorf("inline thinking: %q, %v; want it left in the text", resp.Message.Content, err)
	}
}

// TestToolCallsAssembled: calls streamed in fragments of a few bytes,
// interleaved, come out whole with their ids; empty arguments are "{}";
// arguments that are not JSON are kept, as a JSON string, for the agent's
// check to report.
func TestToolCallsAssembled(t *testing.T) {
	fake := openaitest.New(openaitest.Turn{
		Text: "Let me look.",
		Calls: []openaitest.Call{
			{ID: "call_a", Name: "read", Args: map[string]any{"path": "notes/b.md", "limit": 20}},
			{ID: "call_b", Name: "bash", Args: map[string]any{"command": "echo \"<hi>\" && ls -la"}},
			{ID: "call_c", Name: "status", RawArgs: " "},
			{ID: "call_d", Name: "write", RawArgs: `{"path": "a.txt", "text": "unfinished`},
		},
		ArgsChunk: 3,
	})
	defer fake.Close()
	resp, err := newProvider(t, fake).Chat(t.Context(), hi("m"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StopReason != "tool_calls" || resp.Message.Content != "Let me look." {
		t.Errorf("stop %q, content %q", resp.StopReason, resp.Message.Content)
	}
	calls := resp.Message.ToolCalls
	if len(calls) != 4 {
		t.Fatalf("%d calls, want 4: %+v", len(calls), calls)
	}
	want := []struct{ id, name, args string }{
		{"call_a", "read", `{"limit":20,"path":"notes/b.md"}`},
		{"call_b", "bash", `{"command":"echo \"<hi>\" && ls -la"}`},
		{"call_c", "status", `{}`},
		{"call_d", "write", `"{\"path\": \"a.txt\", \"text\": \"unfinished"`},
	}
	for i, w := range want {
		if calls[i].ID != w.id || calls[i].Name != w.name || string(calls[i].Args) != w.args {
			t.Errorf("call %d = %s %s %s, want %s %s %s", i, calls[i].ID, calls[i].Name, calls[i].Args, w.id, w.name, w.args)
		}
	}
}

// TestToolResultRoundTrip: the second request carries the assistant's
// tool calls, with their arguments as the JSON text, and the tool results
// with the ids they answer.
func TestToolResultRoundTrip(t *testing.T) {
	fake := openaitest.New(
		openaitest.Turn{Calls: []openaitest.Call{{ID: "call_x1", Name: "read", Args: map[string]any{"path": "b.md"}}, {ID: "call_x2", Name: "ls"}}},
		openaitest.Turn{Text: "B says hi."},
	)
	defer fake.Close()
	p := newProvider(t, fake)
	history := []model.Message{{Role: model.RoleUser, Content: "read b"}}
	resp, err := p.Chat(t.Context(), model.Request{Model: "m", Messages: history}, nil)
	if err != nil {
		t.Fatal(err)
	}
	history = append(history, resp.Message,
		model.Message{Role: model.RoleTool, ToolCallID: "call_x1", ToolName: "read", Content: "hi"},
		model.Message{Role: model.RoleTool, ToolCallID: "call_x2", ToolName: "ls", Content: ""})
	if resp, err = p.Chat(t.Context(), model.Request{Model: "m", Messages: history}, nil); err != nil || resp.Message.Content != "B says hi." {
		t.Fatalf("second call: %q, %v", resp.Message.Content, err)
	}
	msgs := fake.Requests()[1].Messages
	if len(msgs) != 4 {
		t.Fatalf("%d messages, want 4: %+v", len(msgs), msgs)
	}
	a := msgs[1]
	if a.Role != "assistant" || len(a.ToolCalls) != 2 || string(a.Content) != `""` {
		t.Fatalf("assistant message = %+v (content %s), want the calls with \"content\": \"\"", a, a.Content)
	}
	if tc := a.ToolCalls[0]; tc.ID != "call_x1" || tc.Type != "function" || tc.Function.Name != "read" || tc.Function.Arguments != `{"path":"b.md"}` {
		t.Errorf("tool call = %+v", tc)
	}
	if tc := a.ToolCalls[1]; tc.ID != "call_x2" || tc.Function.Arguments != `{}` {
		t.Errorf("tool call without arguments = %+v", tc)
	}
	if m := msgs[2]; m.Role != "tool" || m.ToolCallID != "call_x1" || m.Text() != "hi" {
		t.Errorf("tool result = %+v", m)
	}
	if m := msgs[3]; m.Role != "tool" || m.ToolCallID != "call_x2" || m.Text() == "" {
		t.Errorf("empty tool result = %+v (%s), want a placeholder text", m, m.Content)
	}
}

// TestImages: a user's image goes as an image_url part with a data: URL; a
// tool result's images follow the tool results in a user message (a tool
// message takes text only).
func TestImages(t *testing.T) {
	fake := openaitest.New(openaitest.Turn{Text: "a cat"})
	defer fake.Close()
	png := []byte("\x89PNG fake")
	history := []model.Message{
		{Role: model.RoleUser, Content: "what is this?", Images: []model.Image{{MimeType: "image/png", Data: png}}},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "screenshot", Args: json.RawMessage(`{}`)}}},
		{Role: model.RoleTool, ToolCallID: "c1", Content: "taken", Images: []model.Image{{MimeType: "image/jpeg", Data: []byte("jpg")}}},
	}
	if _, err := newProvider(t, fake).Chat(t.Context(), model.Request{Model: "m", Messages: history}, nil); err != nil {
		t.Fatal(err)
	}
	msgs := fake.Requests()[0].Messages
	if len(msgs) != 4 {
		t.Fatalf("%d messages, want 4: %+v", len(msgs), msgs)
	}
	parts := msgs[0].Parts()
	if len(parts) != 2 || parts[0].Type != "text" || parts[0].Text != "what is this?" || parts[1].Type != "image_url" ||
		parts[1].ImageURL.URL != "data:image/png;base64,iVBORyBmYWtl" {
		t.Errorf("user message parts = %+v", parts)
	}
	if msgs[2].Role != "tool" || msgs[2].Text() != "taken" {
		t.Errorf("tool message = %+v", msgs[2])
	}
	if p := msgs[3].Parts(); msgs[3].Role != "user" || len(p) != 2 || p[1].ImageURL.URL != "data:image/jpeg;base64,anBn" {
		t.Errorf("the tool's image = %+v", msgs[3])
	}
}

func TestUsageOnTheFinishChunk(t *testing.T) {
	fake := openaitest.New(openaitest.Turn{Text: "ok", UsageOnFinishChunk: true, Usage: openaitest.Usage{Prompt: 30, Completion: 2}})
	defer fake.Close()
	p := newProvider(t, fake)
	resp, err := p.Chat(t.Context(), hi("m"), nil)
	if err != nil || resp.Usage != (model.Usage{InputTokens: 30, OutputTokens: 2}) || p.EstimatedCalls() != 0 {
		t.Errorf("usage %+v, %v, estimated %d", resp.Usage, err, p.EstimatedCalls())
	}
}

// TestNoUsageIsEstimated: a server that reports no usage gets an estimate
// of about a token per four bytes, and the call is counted.
func TestNoUsageIsEstimated(t *testing.T) {
	answer := strings.Repeat("word ", 20) // 100 bytes
	fake := openaitest.New(openaitest.Turn{Text: answer, NoUsage: true}, openaitest.Turn{Text: "ok"})
	defer fake.Close()
	p := newProvider(t, fake)
	req := model.Request{Model: "m", System: strings.Repeat("s", 200), Messages: []model.Message{{Role: model.RoleUser, Content: strings.Repeat("u", 200)}}}
	resp, err := p.Chat(t.Context(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage != (model.Usage{InputTokens: 100, OutputTokens: 25}) {
		t.Errorf("estimated usage = %+v, want 100 in, 25 out", resp.Usage)
	}
	if _, err := p.Chat(t.Context(), req, nil); err != nil {
		t.Fatal(err)
	}
	if n := p.EstimatedCalls(); n != 1 {
		t.Errorf("EstimatedCalls = %d, want 1", n)
	}
}

func TestLengthWithNothingIsOverflow(t *testing.T) {
	fake := openaitest.New(openaitest.Turn{FinishReason: "length", Reasoning: "thinking at length"}, openaitest.Turn{Text: "cut sh", FinishReason: "length"})
	defer fake.Close()
	p := newProvider(t, fake)
	if _, err := p.Chat(t.Context(), hi("m"), nil); !errors.Is(err, model.ErrContextOverflow) {
		t.Errorf("length with nothing: %v, want ErrContextOverflow", err)
	}
	resp, err := p.Chat(t.Context(), hi("m"), nil)
	if err != nil || resp.StopReason != "length" || resp.Message.Content != "cut sh" {
		t.Errorf("length with text: %+v, %v; want the text and stop reason length", resp, err)
	}
}

func TestContentFilter(t *testing.T) {
	fake := openaitest.New(openaitest.Turn{Text: "I", FinishReason: "content_filter"})
	defer fake.Close()
	resp, err := newProvider(t, fake).Chat(t.Context(), hi("m"), nil)
	if err != nil || resp.StopReason != "content_filter" {
		t.Errorf("%+v, %v", resp, err)
	}
}

// TestTransientStatuses: a rate limit, an overload and a server in
// trouble are transient, with the status and the Retry-After readable.
func TestTransientStatuses(t *testing.T) {
	for _, c := range []struct {
		status int
		after  string
		want   time.Duration
	}{
		{503, "7", 7 * time.Second},
		{429, "2", 2 * time.Second},
		{529, "", 0},
		{500, "", 0},
		{502, "", 0},
		{504, "0.5", 500 * time.Millisecond},
	} {
		fake := openaitest.New(openaitest.Turn{Status: c.status, Error: "busy, try later", ErrorType: "server_error", RetryAfter: c.after})
		_, err := newProvider(t, fake).Chat(t.Context(), hi("m"), nil)
		fake.Close()
		var se *openai.StatusError
		if !model.IsTransient(err) || !errors.As(err, &se) {
			t.Errorf("HTTP %d: %v, want a transient StatusError", c.status, err)
			continue
		}
		if se.Code != c.status || se.RetryAfter != c.want || se.Msg != "busy, try later" {
			t.Errorf("HTTP %d: StatusError %+v, want code %d, retry after %v", c.status, *se, c.status, c.want)
		}
	}
}

func TestConnectionRefusedIsUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p, err := openai.New(openai.Options{Name: "vllm", BaseURL: "http://" + addr + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Chat(t.Context(), hi("m"), nil)
	if !errors.Is(err, model.ErrUnreachable) || model.IsTransient(err) || !strings.Contains(err.Error(), "vllm at http://"+addr) {
		t.Errorf("refused connection: %v, want unreachable, naming the endpoint", err)
	}
	if _, err := p.ContextWindow(t.Context(), "m"); !errors.Is(err, model.ErrUnreachable) {
		t.Errorf("ContextWindow: %v, want unreachable", err)
	}
	if _, err := p.ListModels(t.Context()); !errors.Is(err, model.ErrUnreachable) {
		t.Errorf("ListModels: %v, want unreachable", err)
	}
}

func TestDroppedConnectionIsTransient(t *testing.T) {
	drop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
			c.Close()
		}
	}))
	defer drop.Close()
	p, _ := openai.New(openai.Options{BaseURL: drop.URL + "/v1"})
	if _, err := p.Chat(t.Context(), hi("m"), nil); !model.IsTransient(err) || errors.Is(err, model.ErrUnreachable) {
		t.Errorf("dropped connection: %v, want transient", err)
	}
}

func TestModelNotFound(t *testing.T) {
	fake := openaitest.New()
	defer fake.Close()
	fake.SetModels(openaitest.Model{ID: "Qwen/Qwen3-8B"})
	_, err := newProvider(t, fake).Chat(t.Context(), hi("qwen3"), nil)
	if !errors.Is(err, model.ErrModelNotFound) || model.IsTransient(err) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("unknown model: %v, want ErrModelNotFound with the server's message", err)
	}
}

func TestKeyRefused(t *testing.T) {
	fake := openaitest.New(openaitest.Turn{Text: "ok"})
	defer fake.Close()
	fake.SetKey("sk-right")
	_, err := newProvider(t, fake, func(o *openai.Options) { o.APIKey = "sk-wrong" }).Chat(t.Context(), hi("m"), nil)
	if err == nil || model.IsTransient(err) || !strings.Contains(err.Error(), "the key was refused by vllm at "+fake.BaseURL()) {
		t.Errorf("wrong key: %v, want the key refused, naming the endpoint", err)
	}
	_, err = newProvider(t, fake).Chat(t.Context(), hi("m"), nil)
	if err == nil || !strings.Contains(err.Error(), "none is set") {
		t.Errorf("no key: %v, want a hint that none is set", err)
	}
	if _, err := newProvider(t, fake).ListModels(t.Context()); err == nil || !strings.Contains(err.Error(), "wants a key") {
		t.Errorf("ListModels without the key: %v", err)
	}
}

// TestBadRequests: a 400 saying the context is too long is an overflow,
// in vLLM's words and in llama.cpp's; another 400 is a plain error with
// the server's message.
func TestBadRequests(t *testing.T) {
	for _, c := range []struct {
		name     string
		turn     openaitest.Turn
		overflow bool
	}{
		{"vllm", openaitest.Turn{Status: 400, Error: "This model's maximum context length is 32768 tokens. However, you requested 40100 tokens (40000 in the messages, 100 in the completion). Please reduce the length of the messages or completion.", ErrorType: "BadRequestError", ErrorCode: 400}, true},
		{"llama.cpp", openaitest.Turn{Status: 400, Error: "request (9412 tokens) exceeds the available context size (8192 tokens), try increasing it", ErrorType: "exceed_context_size_error", ErrorCode: 400}, true},
		{"openai", openaitest.Turn{Status: 400, Error: "Your input exceeds the limit.", ErrorType: "invalid_request_error", ErrorCode: "context_length_exceeded"}, true},
		{"other", openaitest.Turn{Status: 400, Error: "temperature must be between 0 and 2", ErrorType: "BadRequestError", ErrorCode: 400}, false},
	} {
		fake := openaitest.New(c.turn)
		_, err := newProvider(t, fake).Chat(t.Context(), hi("m"), nil)
		fake.Close()
		if errors.Is(err, model.ErrContextOverflow) != c.overflow || model.IsTransient(err) || err == nil {
			t.Errorf("%s: %v, overflow want %v", c.name, err, c.overflow)
		}
		if !c.overflow && (err == nil || !strings.Contains(err.Error(), "temperature must be between 0 and 2")) {
			t.Errorf("%s: %v, want the server's message", c.name, err)
		}
	}
}

// TestMidStreamErrors: an error written into the stream after some text,
// as vLLM writes it and as OpenRouter does, is mapped like a status.
func TestMidStreamErrors(t *testing.T) {
	for _, c := range []struct {
		name      string
		turn      openaitest.Turn
		transient bool
		overflow  bool
	}{
		{"vllm", openaitest.Turn{Text: "partial answer", MidStreamError: "EngineCore encountered an issue.", MidStreamCode: 500}, true, false},
		{"openrouter", openaitest.Turn{Text: "partial answer", MidStreamError: "Provider disconnected unexpectedly", MidStreamCode: "server_error", ErrorInChunk: true}, true, false},
		{"overflow", openaitest.Turn{Text: "x", MidStreamError: "The decoder prompt (length 40000) is longer than the maximum model length of 32768.", MidStreamCode: 400}, false, true},
	} {
		fake := openaitest.New(c.turn)
		var d deltas
		_, err := newProvider(t, fake).Chat(t.Context(), hi("m"), d.on)
		fake.Close()
		if model.IsTransient(err) != c.transient || errors.Is(err, model.ErrContextOverflow) != c.overflow || err == nil {
			t.Errorf("%s: %v, want transient %v, overflow %v", c.name, err, c.transient, c.overflow)
		}
		if got := strings.Join(d.text, ""); got != c.turn.Text {
			t.Errorf("%s: streamed %q before the error, want %q", c.name, got, c.turn.Text)
		}
		var se *openai.StatusError
		if c.transient && (!errors.As(err, &se) || !strings.Contains(se.Msg, c.turn.MidStreamError)) {
			t.Errorf("%s: %v, want a StatusError with the message", c.name, err)
		}
	}
}

func TestTruncatedStreamIsTransient(t *testing.T) {
	fake := openaitest.New(openaitest.Turn{Text: "half an ans", Calls: []openaitest.Call{{Name: "read", Args: map[string]any{"path": "x"}}}, Truncate: true})
	defer fake.Close()
	if _, err := newProvider(t, fake).Chat(t.Context(), hi("m"), nil); !model.IsTransient(err) {
		t.Errorf("truncated stream: %v, want transient", err)
	}
}

func TestCancelled(t *testing.T) {
	fake := openaitest.New(openaitest.Turn{Text: "late", Delay: 5 * time.Second})
	defer fake.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := newProvider(t, fake).Chat(ctx, hi("m"), nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled call: %v, want the context's error", err)
	}
}

func TestHeadersAndKeySent(t *testing.T) {
	fake := openaitest.New(openaitest.Turn{Text: "ok"})
	defer fake.Close()
	fake.SetKey("sk-or-1")
	p := newProvider(t, fake, func(o *openai.Options) {
		o.APIKey = "sk-or-1"
		o.Headers = map[string]string{"HTTP-Referer": "https://mother.example", "X-Title": "Mother"}
	})
	if _, err := p.Chat(t.Context(), hi("m"), nil); err != nil {
		t.Fatal(err)
	}
	h := fake.Requests()[0].Header
	if h.Get("Authorization") != "Bearer sk-or-1" || h.Get("HTTP-Referer") != "https://mother.example" || h.Get("X-Title") != "Mother" {
		t.Errorf("headers = %v", h)
	}
}

// TestModelOptionsMerged: a model's options go into every request for it
// (and not for another model), with the output cap as max_tokens; options
// that carry their own cap replace it; Think sends nothing.
func TestModelOptionsMerged(t *testing.T) {
	fake := openaitest.NewFunc(func(openaitest.Request) openaitest.Turn { return openaitest.Turn{Text: "ok"} })
	defer fake.Close()
	p := newProvider(t, fake, func(o *openai.Options) {
		o.Models = map[string]openai.ModelOptions{
			"qwen3":  {Options: map[string]any{"temperature": 0.6, "top_k": 20, "chat_template_kwargs": map[string]any{"enable_thinking": false}}},
			"capped": {Options: map[string]any{"max_tokens": 64}},
		}
	})
	for _, req := range []model.Request{
		{Model: "qwen3", MaxOutputTokens: 1000, Think: model.ThinkOff, Messages: hi("").Messages},
		{Model: "other", MaxOutputTokens: 500, Think: model.ThinkOn, Messages: hi("").Messages},
		{Model: "capped", MaxOutputTokens: 500, Messages: hi("").Messages},
	} {
		if _, err := p.Chat(t.Context(), req, nil); err != nil {
			t.Fatal(err)
		}
	}
	reqs := fake.Requests()
	extra := func(r openaitest.Request) map[string]any {
		out := map[string]any{}
		for k, v := range r.Extra {
			var x any
			_ = json.Unmarshal(v, &x)
			out[k] = x
		}
		return out
	}
	if got, want := extra(reqs[0]), map[string]any{"temperature": 0.6, "top_k": 20.0, "chat_template_kwargs": map[string]any{"enable_thinking": false}}; !reflect.DeepEqual(got, want) {
		t.Errorf("qwen3 extra fields = %v, want %v", got, want)
	}
	if reqs[0].MaxTokens == nil || *reqs[0].MaxTokens != 1000 || reqs[0].MaxCompletionTokens != nil {
		t.Errorf("qwen3 cap: %s", reqs[0].Body)
	}
	if len(reqs[1].Extra) != 0 || reqs[1].MaxTokens == nil || *reqs[1].MaxTokens != 500 {
		t.Errorf("other model: %s, want max_tokens alone", reqs[1].Body)
	}
	if reqs[2].MaxTokens == nil || *reqs[2].MaxTokens != 64 || strings.Count(string(reqs[2].Body), "max_tokens") != 1 {
		t.Errorf("capped model: %s, want its own max_tokens only", reqs[2].Body)
	}
	if _, err := openai.New(openai.Options{BaseURL: fake.BaseURL(), Models: map[string]openai.ModelOptions{"m": {Options: map[string]any{"messages": nil}}}}); err == nil {
		t.Error("an option Mother writes itself was accepted")
	}
}

func TestContextWindow(t *testing.T) {
	fake := openaitest.New()
	defer fake.Close()
	fake.SetModels(
		openaitest.Model{ID: "Qwen/Qwen3-32B", MaxModelLen: 40960},
		openaitest.Model{ID: "bare"},
	)
	p := newProvider(t, fake, func(o *openai.Options) {
		o.ContextWindow = 20000
		o.Models = map[string]openai.ModelOptions{"configured": {ContextWindow: 12000}}
	})
	for _, c := range []struct {
		model string
		want  int
	}{
		{"Qwen/Qwen3-32B", 40960}, // vLLM's max_model_len
		{"configured", 12000},     // the model's setting
		{"bare", 20000},           // the endpoint's default
		{"absent", 20000},
	} {
		if n, err := p.ContextWindow(t.Context(), c.model); err != nil || n != c.want {
			t.Errorf("%s: %d, %v; want %d", c.model, n, err, c.want)
		}
	}
	fake.SetModels(openaitest.Model{ID: "Qwen/Qwen3-32B", MaxModelLen: 8192})
	if n, _ := p.ContextWindow(t.Context(), "Qwen/Qwen3-32B"); n != 40960 {
		t.Errorf("second ask: %d, want the cached 40960", n)
	}
	if n, _ := newProvider(t, fake).ContextWindow(t.Context(), "absent"); n != openai.DefaultContextWindow {
		t.Errorf("nothing known: %d, want %d", n, openai.DefaultContextWindow)
	}
}

// TestContextWindowLlamaCpp: llama-server's window is what /props says it
// holds; without /props, its n_ctx_train capped at MaxTrainedWindow. It
// serves its one model whatever the name.
func TestContextWindowLlamaCpp(t *testing.T) {
	fake := openaitest.New()
	defer fake.Close()
	fake.SetModels(openaitest.Model{ID: "qwen3-8b-q4_k_m.gguf", NCtxTrain: 16384})
	if n, err := newProvider(t, fake).ContextWindow(t.Context(), "qwen3-8b-q4_k_m.gguf"); err != nil || n != 16384 {
		t.Errorf("n_ctx_train: %d, %v; want 16384", n, err)
	}
	fake.SetModels(openaitest.Model{ID: "big.gguf", NCtxTrain: 262144})
	if n, _ := newProvider(t, fake).ContextWindow(t.Context(), "big.gguf"); n != openai.MaxTrainedWindow {
		t.Errorf("long n_ctx_train: %d, want it capped at %d", n, openai.MaxTrainedWindow)
	}
	fake.SetProps(8192)
	if n, _ := newProvider(t, fake).ContextWindow(t.Context(), "any-name"); n != 8192 {
		t.Errorf("with /props: %d, want its n_ctx 8192", n)
	}
}

func TestContextWindowLMStudio(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/models":
			_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"qwen2.5-7b-instruct","object":"model","owned_by":"organization_owner"}]}`))
		case "/api/v0/models/qwen2.5-7b-instruct":
			_, _ = w.Write([]byte(`{"id":"qwen2.5-7b-instruct","object":"model","type":"llm","state":"loaded","max_context_length":32768,"loaded_context_length":16384}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"Unexpected endpoint or method."}`))
		}
	}))
	defer srv.Close()
	p, _ := openai.New(openai.Options{Name: "lmstudio", BaseURL: srv.URL + "/v1"})
	if n, err := p.ContextWindow(t.Context(), "qwen2.5-7b-instruct"); err != nil || n != 16384 {
		t.Errorf("LM Studio: %d, %v; want the loaded 16384", n, err)
	}
}

func TestListModels(t *testing.T) {
	fake := openaitest.New()
	defer fake.Close()
	fake.SetModels(openaitest.Model{ID: "a", MaxModelLen: 40960}, openaitest.Model{ID: "b.gguf", NCtxTrain: 8192}, openaitest.Model{ID: "c"})
	got, err := newProvider(t, fake).ListModels(t.Context())
	want := []openai.ModelInfo{{ID: "a", ContextWindow: 40960}, {ID: "b.gguf", ContextWindow: 8192}, {ID: "c"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ListModels = %+v, %v; want %+v", got, err, want)
	}
}

func TestNewChecksTheURL(t *testing.T) {
	for _, u := range []string{"", "localhost:8000/v1", "ftp://x/v1", "http:///v1"} {
		if _, err := openai.New(openai.Options{BaseURL: u}); err == nil {
			t.Errorf("base URL %q accepted", u)
		}
	}
}

func TestBadToolSchemaIsInvalidRequest(t *testing.T) {
	fake := openaitest.New()
	defer fake.Close()
	req := hi("m")
	req.Tools = []model.ToolSpec{{Name: "x", Parameters: json.RawMessage(`[1,2]`)}}
	if _, err := newProvider(t, fake).Chat(t.Context(), req, nil); !errors.Is(err, model.ErrInvalidRequest) {
		t.Errorf("%v, want ErrInvalidRequest", err)
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// echo is a tool that returns its text argument.
type echo struct{ got chan string }

func (echo) Spec() model.ToolSpec {
	return model.ToolSpec{Name: "echo", Description: "say it back",
		Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)}
}

func (e echo) Run(_ context.Context, args json.RawMessage) (agent.Result, error) {
	var a struct{ Text string }
	if err := json.Unmarshal(args, &a); err != nil {
		return agent.Result{}, err
	}
	e.got <- a.Text
	return agent.Result{Text: "echo: " + a.Text}, nil
}

// TestAgentLoop: the real agent loop through this provider and the fake:
// a tool call, its result sent back, then the answer.
func TestAgentLoop(t *testing.T) {
	fake := openaitest.NewFunc(func(r openaitest.Request) openaitest.Turn {
		last := r.Messages[len(r.Messages)-1]
		if last.Role == "tool" {
			return openaitest.Turn{Text: "The tool said: " + last.Text(), Usage: openaitest.Usage{Prompt: 120, Completion: 8}}
		}
		return openaitest.Turn{Reasoning: "I should echo.", Calls: []openaitest.Call{{ID: "chatcmpl-tool-1", Name: "echo", Args: map[string]any{"text": "ping"}}},
			Usage: openaitest.Usage{Prompt: 100, Completion: 12}}
	})
	defer fake.Close()
	fake.SetModels(openaitest.Model{ID: "Qwen/Qwen3-8B", MaxModelLen: 32768})
	p := newProvider(t, fake)
	tool := echo{got: make(chan string, 1)}
	a, err := agent.New(agent.Config{Provider: p, Model: "Qwen/Qwen3-8B", Tools: []agent.Tool{tool}})
	if err != nil {
		t.Fatal(err)
	}
	out := a.Run(t.Context(), agent.Input{System: "You are Mother.", History: []model.Message{{Role: model.RoleUser, Content: "echo ping"}}})
	if out.Err != nil || out.StopReason != agent.StopDone || out.Final != "The tool said: echo: ping" {
		t.Fatalf("run = %+v", out)
	}
	if got := <-tool.got; got != "ping" {
		t.Errorf("the tool got %q", got)
	}
	if out.Usage != (model.Usage{InputTokens: 220, OutputTokens: 20}) || out.Turns != 2 {
		t.Errorf("usage %+v, turns %d", out.Usage, out.Turns)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 || len(reqs[0].Tools) != 1 {
		t.Fatalf("%d requests, tools %d", len(reqs), len(reqs[0].Tools))
	}
	if m := reqs[1].Messages; m[len(m)-2].ToolCalls[0].ID != "chatcmpl-tool-1" || m[len(m)-1].ToolCallID != "chatcmpl-tool-1" {
		t.Errorf("second request's messages = %+v", m)
	}
}

// sse starts a server that answers every chat request with lines, written
// as they are, each followed by a blank line.
func sse(t *testing.T, lines ...string) *openai.Provider {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, l := range lines {
			_, _ = w.Write([]byte(l + "\n\n"))
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	p, err := openai.New(openai.Options{BaseURL: srv.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const finishStop = `data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`

func delta(d string) string {
	return `data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":` + d + `,"finish_reason":null}]}`
}

// TestStreamVariants: shapes some servers send that the fake does not.
func TestStreamVariants(t *testing.T) {
	t.Run("keep-alive comments", func(t *testing.T) {
		p := sse(t, ": OPENROUTER PROCESSING", ": OPENROUTER PROCESSING", delta(`{"role":"assistant","content":"hi"}`), finishStop, "data: [DONE]")
		resp, err := p.Chat(t.Context(), hi("m"), nil)
		if err != nil || resp.Message.Content != "hi" {
			t.Errorf("%+v, %v", resp, err)
		}
	})
	t.Run("calls without an index", func(t *testing.T) {
		p := sse(t,
			delta(`{"tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{\"pa"}}]}`),
			delta(`{"tool_calls":[{"function":{"arguments":"th\":1}"}}]}`),
			delta(`{"tool_calls":[{"id":"c2","type":"function","function":{"name":"ls","arguments":"{}"}}]}`),
			finishStop, "data: [DONE]")
		resp, err := p.Chat(t.Context(), hi("m"), nil)
		if err != nil || len(resp.Message.ToolCalls) != 2 || string(resp.Message.ToolCalls[0].Args) != `{"path":1}` || resp.Message.ToolCalls[1].ID != "c2" {
			t.Errorf("%+v, %v", resp.Message.ToolCalls, err)
		}
	})
	t.Run("every call index 0", func(t *testing.T) {
		p := sse(t,
			delta(`{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"a","arguments":"{\"x\":1}"}}]}`),
			delta(`{"tool_calls":[{"index":0,"id":"c2","type":"function","function":{"name":"b","arguments":"{\"y\":2}"}}]}`),
			finishStop, "data: [DONE]")
		resp, err := p.Chat(t.Context(), hi("m"), nil)
		if err != nil || len(resp.Message.ToolCalls) != 2 || string(resp.Message.ToolCalls[1].Args) != `{"y":2}` {
			t.Errorf("%+v, %v", resp.Message.ToolCalls, err)
		}
	})
	t.Run("arguments as an object, no id", func(t *testing.T) {
		p := sse(t, delta(`{"tool_calls":[{"index":0,"function":{"name":"a","arguments":{"x":1}}}]}`), finishStop, "data: [DONE]")
		resp, err := p.Chat(t.Context(), hi("m"), nil)
		if err != nil || len(resp.Message.ToolCalls) != 1 || string(resp.Message.ToolCalls[0].Args) != `{"x":1}` || resp.Message.ToolCalls[0].ID != "call_1" {
			t.Errorf("%+v, %v", resp.Message.ToolCalls, err)
		}
	})
	t.Run("both reasoning names", func(t *testing.T) {
		p := sse(t, delta(`{"reasoning_content":"hmm","reasoning":"hmm"}`), delta(`{"content":"ok"}`), finishStop, "data: [DONE]")
		var d deltas
		if _, err := p.Chat(t.Context(), hi("m"), d.on); err != nil || strings.Join(d.thinking, "") != "hmm" {
			t.Errorf("thinking %q, %v", d.thinking, err)
		}
	})
	t.Run("older vLLM error in the stream", func(t *testing.T) {
		p := sse(t, delta(`{"content":"par"}`), `data: {"object":"error","message":"CUDA out of memory","type":"InternalServerError","param":null,"code":500}`, "data: [DONE]")
		var se *openai.StatusError
		if _, err := p.Chat(t.Context(), hi("m"), nil); !model.IsTransient(err) || !errors.As(err, &se) || se.Code != 500 {
			t.Errorf("%v, want transient with code 500", err)
		}
	})
	// A line the types cannot hold does not lose the answer: one that is
	// not JSON is skipped, a member of the wrong type or a tool call
	// fragment that is not an object is left out, and the rest is kept.
	t.Run("a line that is not JSON", func(t *testing.T) {
		p := sse(t, delta(`{"role":"assistant","content":"Hel"}`), `data: {"choices":[{"index":0,"delta":{"content":"x"`, delta(`{"content":"lo."}`), finishStop, "data: [DONE]")
		resp, err := p.Chat(t.Context(), hi("m"), nil)
		if err != nil || resp.Message.Content != "Hello." {
			t.Errorf("%q, %v; want %q", resp.Message.Content, err, "Hello.")
		}
	})
	t.Run("members of the wrong type", func(t *testing.T) {
		p := sse(t,
			`data: {"id":7,"choices":[{"index":0,"delta":{"content":"Hel","reasoning":["x"]},"finish_reason":null}]}`,
			`data: {"choices":[{"index":0,"delta":{"content":"lo","tool_calls":[42,{"index":0,"id":"c1","type":"function","function":{"name":"read","arguments":"{\"path\":\"a\"}"}}]}}]}`,
			`data: {"choices":[{"index":"zero","delta":{"content":"."}}]}`,
			`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":"two"}}`,
			"data: [DONE]")
		resp, err := p.Chat(t.Context(), hi("m"), nil)
		if err != nil || resp.Message.Content != "Hello." || len(resp.Message.ToolCalls) != 1 || string(resp.Message.ToolCalls[0].Args) != `{"path":"a"}` || resp.StopReason != "tool_calls" {
			t.Errorf("%+v, %v", resp, err)
		}
	})
	t.Run("usage on every chunk", func(t *testing.T) {
		p := sse(t,
			`data: {"choices":[{"index":0,"delta":{"content":"a"}}],"usage":{"prompt_tokens":5,"completion_tokens":1}}`,
			`data: {"choices":[{"index":0,"delta":{"content":"b"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2}}`,
			"data: [DONE]")
		resp, err := p.Chat(t.Context(), hi("m"), nil)
		if err != nil || resp.Usage != (model.Usage{InputTokens: 5, OutputTokens: 2}) || p.EstimatedCalls() != 0 {
			t.Errorf("%+v, %v", resp.Usage, err)
		}
	})
}

// TestProxyErrorPage: an error answer that is not OpenAI's shape (a
// proxy's page, LM Studio's {"error": "text"}) is still mapped by its
// status, with its Retry-After.
func TestProxyErrorPage(t *testing.T) {
	for _, c := range []struct {
		status    int
		body      string
		transient bool
		notFound  bool
	}{
		{502, "<html><body>502 Bad Gateway</body></html>", true, false},
		{404, `{"error":"Model \"qwen\" not found. Please load it first."}`, false, true},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(c.status)
			_, _ = w.Write([]byte(c.body))
		}))
		p, _ := openai.New(openai.Options{BaseURL: srv.URL + "/v1"})
		_, err := p.Chat(t.Context(), hi("qwen"), nil)
		srv.Close()
		var se *openai.StatusError
		if model.IsTransient(err) != c.transient || errors.Is(err, model.ErrModelNotFound) != c.notFound {
			t.Errorf("HTTP %d: %v", c.status, err)
		}
		if c.transient && (!errors.As(err, &se) || se.Code != c.status || se.RetryAfter != 3*time.Second || !strings.Contains(se.Msg, "Bad Gateway")) {
			t.Errorf("HTTP %d: %v, want the StatusError with Retry-After", c.status, err)
		}
		if c.notFound && !strings.Contains(err.Error(), "Please load it first") {
			t.Errorf("HTTP %d: %v, want the server's message", c.status, err)
		}
	}
}
