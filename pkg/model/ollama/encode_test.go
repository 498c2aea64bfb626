package ollama

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/ollama/ollama/api"

	"github.com/mother-chat/mother/pkg/model"
)

// encodeHistory is a history with every kind of message and tool-call
// arguments of every shape the official types treat apart.
var encodeHistory = []model.Message{
	{Role: model.RoleUser, Content: "look at <this> & that", Images: []model.Image{{MimeType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}}}},
	{Role: model.RoleAssistant, Content: "reading", ToolCalls: []model.ToolCall{
		{ID: "call_1", Name: "read", Args: json.RawMessage(`{"path":"a.md","z":1,"a":[1,2.5,{"k":null}],"html":"<b>&amp;</b>","uni":"é\u2028"}`)},
		{ID: "call_2", Name: "bash", Args: json.RawMessage(" {\n  \"command\" : \"ls -l\",\n  \"timeout\": 30, \"on\": true\n}\n")},
		{ID: "call_3", Name: "none", Args: nil},
		{ID: "call_4", Name: "empty", Args: json.RawMessage(`{}`)},
		{ID: "call_5", Name: "broken", Args: json.RawMessage(`{"path": "a.md"`)},
		{ID: "call_6", Name: "array", Args: json.RawMessage(`[1,2]`)},
		{Name: "no id", Args: json.RawMessage(`{"x":"y"}`)},
	}},
	{Role: model.RoleTool, Content: "file text", ToolCallID: "call_1", ToolName: "read"},
	{Role: model.RoleAssistant, Content: "done"},
}

// TestEncodeChatMatchesTheOfficialTypes: the body Chat writes is the JSON
// value the official types give for the same request (the history through
// toOllamaMessages, then encoding/json, as api.Client.Chat sends it), and
// its messages are the same bytes: tools, options, and arguments compacted,
// HTML-escaped and in the model's key order, empty ones as {}.
func TestEncodeChatMatchesTheOfficialTypes(t *testing.T) {
	tool, err := toOllamaTool(model.ToolSpec{Name: "read", Description: "Read a file.", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	toolJSON, err := json.Marshal(tool)
	if err != nil {
		t.Fatal(err)
	}
	stream := true
	for _, system := range []string{"", "You are Mother."} {
		req := &api.ChatRequest{Model: "qwen3:8b", Options: map[string]any{"num_ctx": 8192, "num_predict": 512}, Tools: api.Tools{tool}, Stream: &stream}
		got, err := encodeChat(req, []json.RawMessage{toolJSON}, system, encodeHistory)
		if err != nil {
			t.Fatal(err)
		}
		official := *req
		official.Messages = toOllamaMessages(system, encodeHistory)
		want, err := json.Marshal(&official)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, got, want)
		// And the official types read it back as the same request.
		var back api.ChatRequest
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		again, err := json.Marshal(&back)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, want) {
			t.Errorf("read back by the official types:\n got %s\nwant %s", again, want)
		}
	}
	// An empty history is an empty list, and no tools none, as the
	// official types send them.
	got, err := encodeChat(&api.ChatRequest{Model: "m", Options: map[string]any{}}, nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(&api.ChatRequest{Model: "m", Options: map[string]any{}, Messages: []api.Message{}})
	sameJSON(t, got, want)
}

// sameJSON fails t unless got and want are the same JSON value with their
// "messages" the same bytes.
func sameJSON(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("body:\n got %s\nwant %s", got, want)
	}
	var gm, wm struct{ Messages json.RawMessage }
	_ = json.Unmarshal(got, &gm)
	_ = json.Unmarshal(want, &wm)
	if !bytes.Equal(gm.Messages, wm.Messages) {
		t.Errorf("messages:\n got %s\nwant %s", gm.Messages, wm.Messages)
	}
}

// TestEncodeChatKeepsTheModelsArguments: where the official types would
// round a number through float64 or write an escape their own way, the
// body keeps what the model wrote, and the official types read the same
// values from either.
func TestEncodeChatKeepsTheModelsArguments(t *testing.T) {
	const args = `{"id":12345678901234567890,"ratio":0.1000000000000000055511151231257827,"name":"caf\u00e9"}`
	msgs := []model.Message{{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c", Name: "n", Args: json.RawMessage(args)}}}}
	got, err := encodeChat(&api.ChatRequest{Model: "m"}, nil, "", msgs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(got, []byte(`"arguments":`+args)) {
		t.Errorf("body %s does not carry the arguments %s as written", got, args)
	}
	var back api.ChatRequest
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	official := api.ChatRequest{Model: "m", Messages: toOllamaMessages("", msgs)}
	a, _ := json.Marshal(&back)
	b, _ := json.Marshal(&official)
	if !bytes.Equal(a, b) {
		t.Errorf("read back by the official types:\n got %s\nwant %s", a, b)
	}
}

// BenchmarkEncodeChat encodes a chick's history of 20 turns of 25 tool
// calls, as the broker sends it at the end of the relay bench.
func BenchmarkEncodeChat(b *testing.B) {
	var msgs []model.Message
	for turn := range 20 {
		var calls []model.ToolCall
		for j := range 25 {
			calls = append(calls, model.ToolCall{ID: "call", Name: "read", Args: json.RawMessage(`{"label":"relay-1-` + string(rune('a'+turn)) + `-` + string(rune('a'+j)) + `","path":"MEMORY.md"}`)})
		}
		msgs = append(msgs, model.Message{Role: model.RoleAssistant, ToolCalls: calls})
		for range 25 {
			msgs = append(msgs, model.Message{Role: model.RoleTool, ToolCallID: "call", ToolName: "read", Content: "A small file the chicks read.\n"})
		}
	}
	req := &api.ChatRequest{Model: "m", Options: map[string]any{}}
	b.Run("raw arguments", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeChat(req, nil, "system", msgs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("official types", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			official := *req
			official.Messages = toOllamaMessages("system", msgs)
			if _, err := json.Marshal(&official); err != nil {
				b.Fatal(err)
			}
		}
	})
}
