package anthropic_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/anthropic"
	"github.com/mother-chat/mother/pkg/model/anthropic/anthropictest"
)

func newProvider(t *testing.T, fake *anthropictest.Server) *anthropic.Provider {
	t.Helper()
	p, err := anthropic.New(anthropictest.APIKey, fake.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestStreamsTextWithUsage(t *testing.T) {
	fake := anthropictest.New(anthropictest.Turn{Text: "Hello there, Mario!", InputTokens: 42, OutputTokens: 7})
	defer fake.Close()
	p := newProvider(t, fake)
	var deltas []string
	resp, err := p.Chat(t.Context(), model.Request{Model: "claude-test", System: "be brief", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}},
		func(d model.Delta) { deltas = append(deltas, d.Text) })
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Content != "Hello there, Mario!" || len(deltas) < 2 || strings.Join(deltas, "") != resp.Message.Content {
		t.Errorf("content %q from deltas %q", resp.Message.Content, deltas)
	}
	if resp.Usage != (model.Usage{InputTokens: 42, OutputTokens: 7}) || resp.StopReason != "end_turn" {
		t.Errorf("usage %+v stop %q", resp.Usage, resp.StopReason)
	}
	req := fake.Requests()[0]
	if req.SystemText() != "be brief" || req.LastUserText() != "hi" || req.MaxTokens != anthropic.DefaultMaxTokens {
		t.Errorf("request = %+v", req)
	}
}

// TestToolRoundTrip sends a history with tool calls, results (one with an
// image) and a user image; the fake rejects anything the real API would.
func TestToolRoundTrip(t *testing.T) {
	fake := anthropictest.New(anthropictest.Turn{Calls: []anthropictest.Call{{Name: "bash", Args: map[string]any{"label": "list", "command": "ls -la"}}}})
	defer fake.Close()
	p := newProvider(t, fake)
	img := model.Image{MimeType: "image/png", Data: []byte("\x89PNG fake")}
	hist := []model.Message{
		{Role: model.RoleUser, Content: "look", Images: []model.Image{img}},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{
			{ID: "t1", Name: "read", Args: json.RawMessage(`{"path":"a.png"}`)},
			{ID: "t2", Name: "bash", Args: json.RawMessage(`{"command":"false"}`)},
		}},
		{Role: model.RoleTool, ToolCallID: "t1", ToolName: "read", Content: "Image a.png", Images: []model.Image{img}},
		{Role: model.RoleTool, ToolCallID: "t2", ToolName: "bash", Content: "[exit code 1]", IsError: true},
		{Role: model.RoleUser, Content: "[2025-01-01 10:00:00+00:00] [luigi]: also this"},
	}
	tools := []model.ToolSpec{{Name: "bash", Description: "run", Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)}}
	resp, err := p.Chat(t.Context(), model.Request{Model: "claude-test", Messages: hist, Tools: tools}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Message.ToolCalls) != 1 {
		t.Fatalf("tool calls = %+v", resp.Message.ToolCalls)
	}
	c := resp.Message.ToolCalls[0]
	var args map[string]string
	if err := json.Unmarshal(c.Args, &args); err != nil || c.Name != "bash" || args["command"] != "ls -la" || c.ID == "" {
		t.Errorf("call = %+v (%v)", c, err)
	}
	req := fake.Requests()[0]
	if len(req.Messages) != 3 {
		t.Fatalf("sent %d messages, want user/assistant/user", len(req.Messages))
	}
	first := req.Messages[0].Content
	if first[0].Type != "image" || first[0].Source.Data != base64.StdEncoding.EncodeToString(img.Data) || first[1].Text != "look" {
		t.Errorf("user image message = %+v", first)
	}
	last := req.Messages[2].Content
	if len(last) != 3 || last[0].Type != "tool_result" || last[0].Content[1].Type != "image" || !last[1].IsError || last[2].Type != "text" {
		t.Errorf("tool results turn = %+v", last)
	}
	var tool struct {
		Name        string `json:"name"`
		InputSchema struct {
			Required []string `json:"required"`
		} `json:"input_schema"`
	}
	json.Unmarshal(req.Tools[0], &tool)
	if tool.Name != "bash" || len(tool.InputSchema.Required) != 1 {
		t.Errorf("tool sent as %s", req.Tools[0])
	}
}

func TestErrorsMapToSentinels(t *testing.T) {
	cases := []struct {
		name  string
		turn  anthropictest.Turn
		check func(error) bool
	}{
		{"overloaded 529", anthropictest.Turn{Status: 529, ErrorType: "overloaded_error", Error: "Overloaded"}, model.IsTransient},
		{"server 500", anthropictest.Turn{Status: 500, ErrorType: "api_error", Error: "Internal"}, model.IsTransient},
		{"rate limit 429", anthropictest.Turn{Status: 429, ErrorType: "rate_limit_error", Error: "slow down"}, model.IsTransient},
		{"overloaded mid-stream", anthropictest.Turn{Text: "partial answ", StreamError: true, Error: "Overloaded"}, model.IsTransient},
		{"stream cut", anthropictest.Turn{Text: "partial", Truncate: true}, model.IsTransient},
		{"prompt too long", anthropictest.Turn{Status: 400, ErrorType: "invalid_request_error", Error: "prompt is too long: 210000 tokens > 200000 maximum"},
			func(err error) bool { return errors.Is(err, model.ErrContextOverflow) && !model.IsTransient(err) }},
		{"bad request", anthropictest.Turn{Status: 400, ErrorType: "invalid_request_error", Error: "tools.0: bad"},
			func(err error) bool { return !model.IsTransient(err) && strings.Contains(err.Error(), "tools.0: bad") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fake := anthropictest.New(c.turn)
			defer fake.Close()
			_, err := newProvider(t, fake).Chat(t.Context(), model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}, nil)
			if err == nil || !c.check(err) {
				t.Errorf("Chat error = %v (transient %v)", err, model.IsTransient(err))
			}
		})
	}
}

func TestModelNotFoundAndAuth(t *testing.T) {
	fake := anthropictest.New()
	defer fake.Close()
	fake.SetModels("claude-real")
	p := newProvider(t, fake)
	msgs := []model.Message{{Role: model.RoleUser, Content: "hi"}}
	if _, err := p.Chat(t.Context(), model.Request{Model: "claude-nope", Messages: msgs}, nil); !errors.Is(err, model.ErrModelNotFound) {
		t.Errorf("unknown model = %v", err)
	}
	if _, err := p.ContextWindow(t.Context(), "claude-nope"); !errors.Is(err, model.ErrModelNotFound) {
		t.Errorf("ContextWindow(unknown) = %v", err)
	}
	fake.SetMaxInputTokens(150000)
	if n, err := p.ContextWindow(t.Context(), "claude-real"); err != nil || n != 150000 {
		t.Errorf("ContextWindow = %d, %v", n, err)
	}
	bad, _ := anthropic.New("sk-wrong", fake.URL, nil)
	_, err := bad.Chat(t.Context(), model.Request{Model: "claude-real", Messages: msgs}, nil)
	if err == nil || model.IsTransient(err) || !strings.Contains(err.Error(), "authentication failed") {
		t.Errorf("wrong key = %v", err)
	}
	if _, err := anthropic.New("", fake.URL, nil); err == nil {
		t.Error("New without a key succeeded")
	}
}

func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p, _ := anthropic.New("k", "http://"+addr, nil)
	_, err = p.Chat(t.Context(), model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}, nil)
	if !errors.Is(err, model.ErrUnreachable) {
		t.Errorf("closed port = %v", err)
	}
}

// TestToolWithoutASchemaIsAnInvalidRequest: a tool whose parameters are not
// a JSON object is refused as an invalid request, before anything is sent.
func TestToolWithoutASchemaIsAnInvalidRequest(t *testing.T) {
	fake := anthropictest.New(anthropictest.Turn{Text: "ok"})
	defer fake.Close()
	p := newProvider(t, fake)
	req := model.Request{Model: "claude", Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}, Tools: []model.ToolSpec{{Name: "odd", Parameters: json.RawMessage(`5`)}}}
	_, err := p.Chat(t.Context(), req, nil)
	if !errors.Is(err, model.ErrInvalidRequest) || model.IsTransient(err) {
		t.Errorf("%v, want an invalid request", err)
	}
	if n := len(fake.Requests()); n != 0 {
		t.Errorf("%d requests reached the server", n)
	}
}

// TestCountTokens: the prompt is counted by POST
// /v1/messages/count_tokens with the model, system text, messages and
// tools a call would send (and no output limit, which the API refuses
// there); an error status is an error.
func TestCountTokens(t *testing.T) {
	fake := anthropictest.New()
	defer fake.Close()
	p := newProvider(t, fake)
	req := model.Request{Model: "claude-test", System: "be brief", MaxOutputTokens: 100,
		Messages: []model.Message{
			{Role: model.RoleUser, Content: "list the files"},
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "t1", Name: "bash", Args: json.RawMessage(`{"command":"ls"}`)}}},
			{Role: model.RoleTool, ToolCallID: "t1", ToolName: "bash", Content: "a.txt b.txt"},
		},
		Tools: []model.ToolSpec{{Name: "bash", Description: "run a command", Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)}},
	}
	n, err := p.CountTokens(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	counts := fake.CountRequests()
	if len(counts) != 1 || len(fake.Requests()) != 0 {
		t.Fatalf("%d count requests and %d messages requests, want 1 and 0", len(counts), len(fake.Requests()))
	}
	got := counts[0]
	if n != anthropictest.DefaultCount(got) || n < 346 {
		t.Errorf("count %d, the fake counted %d", n, anthropictest.DefaultCount(got))
	}
	if got.Model != "claude-test" || got.SystemText() != "be brief" || len(got.Messages) != 3 || len(got.Tools) != 1 || got.LastUserText() != "" {
		t.Errorf("count request %+v", got)
	}
	if got.Messages[2].Content[0].Type != "tool_result" || !strings.Contains(string(got.Tools[0]), `"input_schema"`) {
		t.Errorf("count request messages %+v tools %s", got.Messages, got.Tools)
	}

	fake.SetCounter(func(anthropictest.Request) anthropictest.Count {
		return anthropictest.Count{Status: 529, ErrorType: "overloaded_error", Error: "Overloaded"}
	})
	if _, err := p.CountTokens(t.Context(), req); !errors.Is(err, model.ErrOverloaded) {
		t.Errorf("count of an overloaded API: %v, want overloaded", err)
	}
}
