package ollama_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/model"
	"github.com/mother-chat/mother/pkg/model/ollama"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// TestChatSurvivesABadLine: a stream line the official types cannot hold
// does not lose the reply. Arguments sent as a JSON string holding the
// object (servers imitating Ollama's API do; the official decoder fails
// on the whole line) are passed on as they are, for the agent to repair;
// a line that is not JSON is skipped; a line with a member of the wrong
// type keeps the rest; a tool call that is not an object is left out and
// the others are kept.
func TestChatSurvivesABadLine(t *testing.T) {
	const m = "qwen3:14b"
	line := func(msg string, done bool) string {
		s := `{"model":"` + m + `","created_at":"2026-01-15T12:00:00Z","message":{"role":"assistant",` + msg + `},"done":false}`
		if done {
			s = `{"model":"` + m + `","created_at":"2026-01-15T12:00:01Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":42,"eval_count":7}`
		}
		return s
	}
	for _, tc := range []struct {
		name  string
		turn  ollamatest.Turn
		text  string
		calls []string // name and arguments, as sent on
	}{
		{"arguments as a JSON string", ollamatest.Turn{Calls: []ollamatest.Call{{Name: "read", RawArgs: json.RawMessage(`"{\"path\": \"notes.txt\"}"`)}}},
			"", []string{`read "{\"path\": \"notes.txt\"}"`}},
		{"arguments as an object", ollamatest.Turn{Calls: []ollamatest.Call{{Name: "read", RawArgs: json.RawMessage(`{"path": "notes.txt"}`)}}},
			"", []string{`read {"path":"notes.txt"}`}},
		{"arguments null or missing", ollamatest.Turn{Raw: []string{
			line(`"content":"","tool_calls":[{"function":{"name":"list_events","arguments":null}},{"function":{"name":"list_chicks"}}]`, false), line("", true)}},
			"", []string{"list_events {}", "list_chicks {}"}},
		{"a line that is not JSON", ollamatest.Turn{Raw: []string{
			line(`"content":"Hel"`, false), `Value looks like object, but can't find closing '}' symbol`, line(`"content":"lo."`, false), line("", true)}},
			"Hello.", nil},
		{"a member of the wrong type", ollamatest.Turn{Raw: []string{
			line(`"content":"Hel"`, false), `{"model":"` + m + `","created_at":7,"message":{"role":"assistant","content":"lo","thinking":["x"]},"done":false}`,
			line(`"content":"."`, false), line("", true)}},
			"Hello.", nil},
		{"a tool call that is not an object", ollamatest.Turn{Raw: []string{
			line(`"content":"","tool_calls":[42,{"function":{"name":"read","arguments":{"path":"a"}}},{"function":"read"}]`, false), line("", true)}},
			"", []string{`read {"path":"a"}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := ollamatest.New(tc.turn)
			defer fake.Close()
			p, err := ollama.New(fake.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := p.Chat(t.Context(), model.Request{Model: m, Messages: []model.Message{{Role: model.RoleUser, Content: "hi"}}}, nil)
			if err != nil {
				t.Fatalf("Chat: %v", err)
			}
			var calls []string
			for _, c := range resp.Message.ToolCalls {
				calls = append(calls, c.Name+" "+string(c.Args))
			}
			if resp.Message.Content != tc.text || strings.Join(calls, "\n") != strings.Join(tc.calls, "\n") {
				t.Errorf("Chat = text %q, calls %q; want %q, %q", resp.Message.Content, calls, tc.text, tc.calls)
			}
			if len(tc.turn.Raw) > 0 && (resp.Usage.InputTokens != 42 || resp.Usage.OutputTokens != 7) {
				t.Errorf("usage %+v, want the done line's 42 and 7", resp.Usage)
			}
		})
	}
}
