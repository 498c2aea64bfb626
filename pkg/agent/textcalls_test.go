package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mother-chat/mother/pkg/model"
)

var textCallTools = map[string]model.ToolSpec{
	"spawn_chick": {Name: "spawn_chick", Parameters: json.RawMessage(`{"type":"object","properties":{"goal":{"type":"string"},"label":{"type":"string"}},"required":["goal"]}`)},
	"list_events": {Name: "list_events", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)},
	"bash":        {Name: "bash", Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"integer"}},"required":["command"]}`)},
}

func TestFindTextCalls(t *testing.T) {
	type call struct{ name, args string }
	for _, tc := range []struct {
		name    string
		text    string
		calls   []call
		rest    string
		problem string // a substring; "" means none
	}{
		{name: "plain answer", text: "Paris is the capital.", rest: "Paris is the capital."},
		{name: "qwen tool_call", text: "<tool_call>\n{\"name\": \"spawn_chick\", \"arguments\": {\"goal\": \"count lines\"}}\n</tool_call>",
			calls: []call{{"spawn_chick", `{"goal":"count lines"}`}}},
		{name: "qwen tool_call after prose", text: "I will start one.\n<tool_call>\n{\"name\": \"list_events\", \"arguments\": {}}\n</tool_call>",
			calls: []call{{"list_events", `{}`}}, rest: "I will start one."},
		{name: "unclosed tool_call", text: "<tool_call>\n{\"name\": \"list_events\", \"arguments\": {}}",
			calls: []call{{"list_events", `{}`}}},
		{name: "two tool_calls", text: "<tool_call>{\"name\": \"list_events\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}</tool_call>",
			calls: []call{{"list_events", `{}`}, {"bash", `{"command":"ls"}`}}},
		{name: "bare json with parameters", text: " {\"name\": \"list_events\", \"parameters\": {}} ", calls: []call{{"list_events", `{}`}}},
		{name: "bare json typed function", text: `{"type": "function", "function": {"name": "bash", "arguments": {"command": "ls"}}}`,
			calls: []call{{"bash", `{"command":"ls"}`}}},
		{name: "fenced json", text: "```json\n{\"name\": \"spawn_chick\", \"arguments\": {\"goal\": \"g\"}}\n```", calls: []call{{"spawn_chick", `{"goal":"g"}`}}},
		{name: "fenced json with prose", text: "Here:\n```json\n{\"name\": \"list_events\", \"arguments\": {}}\n```\nDone.", calls: []call{{"list_events", `{}`}}, rest: "Here:\n\nDone."},
		{name: "fenced json that is not a call", text: "```json\n{\"a\": 1}\n```", rest: "```json\n{\"a\": 1}\n```"},
		{name: "hermes function", text: "<function=spawn_chick>{\"goal\": \"g\"}</function>", calls: []call{{"spawn_chick", `{"goal":"g"}`}}},
		{name: "qwen coder xml", text: "<tool_call>\n<function=bash>\n<parameter=command>\nls -la\n</parameter>\n<parameter=timeout>\n30\n</parameter>\n</function>\n</tool_call>",
			calls: []call{{"bash", `{"command":"ls -la","timeout":30}`}}},
		{name: "arguments as a string", text: "<tool_call>{\"name\": \"spawn_chick\", \"arguments\": \"{\\\"goal\\\": \\\"g\\\"}\"}</tool_call>",
			calls: []call{{"spawn_chick", `"{\"goal\": \"g\"}"`}}},
		{name: "unknown tool", text: "<tool_call>{\"name\": \"spawn_chik\", \"arguments\": {\"goal\": \"g\"}}</tool_call>", problem: `"spawn_chick"`},
		{name: "broken json", text: "<tool_call>{'name': 'spawn_chick', 'arguments': {'goal': 'g',}}</tool_call>", problem: "not valid"},
		{name: "one good one unknown: none made", text: "<tool_call>{\"name\": \"list_events\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"nope\", \"arguments\": {}}</tool_call>", problem: `"nope"`},
		{name: "bare broken json", text: `{"name": "list_events", "arguments": {},}`, problem: "not valid"},
		{name: "json that is an answer", text: `{"answer": 42}`, rest: `{"answer": 42}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := findTextCalls(tc.text, textCallTools)
			if tc.problem == "" && got.problem != "" || tc.problem != "" && !strings.Contains(got.problem, tc.problem) {
				t.Fatalf("problem = %q, want it to hold %q", got.problem, tc.problem)
			}
			if len(got.calls) != len(tc.calls) {
				t.Fatalf("calls = %+v, want %v", got.calls, tc.calls)
			}
			for i, c := range tc.calls {
				if got.calls[i].Name != c.name || canonicalJSON(got.calls[i].Args) != canonicalJSON(json.RawMessage(c.args)) {
					t.Errorf("call %d = %s %s, want %s %s", i, got.calls[i].Name, got.calls[i].Args, c.name, c.args)
				}
				if got.calls[i].ID == "" {
					t.Errorf("call %d has no id", i)
				}
			}
			if tc.problem == "" && got.rest != tc.rest {
				t.Errorf("rest = %q, want %q", got.rest, tc.rest)
			}
		})
	}
}

func TestRepairArgs(t *testing.T) {
	for in, want := range map[string]string{
		`{"goal":"g"}`:             `{"goal":"g"}`,
		`"{\"goal\": \"g\"}"`:      `{"goal": "g"}`,
		`"\"{\\\"a\\\": 1}\""`:     `{"a": 1}`,
		`"just a string"`:          `"just a string"`,
		`"{not json"`:              `"{not json"`,
		`[1]`:                      `[1]`,
		`"[1,2]"`:                  `"[1,2]"`,
		"  \"{\\\"a\\\":true}\"  ": `{"a":true}`,
	} {
		if got := string(repairArgs(json.RawMessage(in))); got != want {
			t.Errorf("repairArgs(%s) = %s, want %s", in, got, want)
		}
	}
}
