package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/mother-chat/mother/pkg/model"
)

// Small models often write a tool call as text instead of making it, and
// the server's parser misses it: qwen's <tool_call>{json}</tool_call>,
// qwen3-coder's <tool_call><function=…><parameter=…>, Llama 3.1's
// <function=name>{json}</function>, a bare JSON object {"name": …,
// "arguments": …} as the whole answer, or the same object in a fenced
// json block. textCalls finds them, so the call is made after all and the
// markup never reaches a channel.

// textCalls is what an answer's text held.
type textCalls struct {
	// calls are the calls read, each naming an offered tool.
	calls []model.ToolCall
	// rest is the answer without the markup.
	rest string
	// problem is set when the text holds markup that could not be read
	// as a call of an offered tool: what is wrong, for the model.
	problem string
}

// found reports whether the text held any tool-call markup.
func (t textCalls) found() bool { return len(t.calls) > 0 || t.problem != "" }

var (
	toolCallBlock = regexp.MustCompile(`(?s)<tool_call>(.*?)(?:</tool_call>|\z)`)
	functionBlock = regexp.MustCompile(`(?s)<function=([^>\s]+)>(.*?)(?:</function>|\z)`)
	parameterItem = regexp.MustCompile(`(?s)<parameter=([^>\s]+)>(.*?)(?:</parameter>|(?:<parameter=)|\z)`)
	fencedBlock   = regexp.MustCompile("(?s)```(?:json|JSON)?[ \t]*\r?\n(.*?)```")
)

// findTextCalls reads the calls written in text (after its thinking is
// stripped). tools are the offered tools by name.
func findTextCalls(text string, tools map[string]model.ToolSpec) textCalls {
	var r textCalls
	rest := text
	add := func(name string, args json.RawMessage) {
		if _, ok := tools[name]; !ok {
			r.noteProblem(unknownToolProblem(name, tools))
			return
		}
		r.calls = append(r.calls, model.ToolCall{ID: fmt.Sprintf("text_call_%d", len(r.calls)+1), Name: name, Args: args})
	}
	// <tool_call> blocks, holding JSON or a <function=…> element.
	if strings.Contains(rest, "<tool_call>") {
		for _, m := range toolCallBlock.FindAllStringSubmatch(rest, -1) {
			body := strings.TrimSpace(m[1])
			if f := functionBlock.FindStringSubmatch(body); f != nil {
				add(f[1], functionArgs(f[2], tools[f[1]]))
				continue
			}
			name, args, problem := jsonCall([]byte(body))
			if problem != "" {
				r.noteProblem("the JSON in your <tool_call> is not valid: " + problem)
				continue
			}
			add(name, args)
		}
		rest = toolCallBlock.ReplaceAllString(rest, "")
	}
	// <function=name>…</function> elements on their own.
	if strings.Contains(rest, "<function=") {
		for _, f := range functionBlock.FindAllStringSubmatch(rest, -1) {
			add(f[1], functionArgs(f[2], tools[f[1]]))
		}
		rest = functionBlock.ReplaceAllString(rest, "")
	}
	// Fenced blocks holding a call.
	if !r.found() && strings.Contains(rest, "```") {
		for _, m := range fencedBlock.FindAllStringSubmatchIndex(rest, -1) {
			body := bytes.TrimSpace([]byte(rest[m[2]:m[3]]))
			if !looksLikeCall(body) {
				continue
			}
			name, args, problem := jsonCall(body)
			if problem != "" {
				r.noteProblem("the JSON of the call in your code block is not valid: " + problem)
				continue
			}
			add(name, args)
		}
		if r.found() {
			rest = fencedBlock.ReplaceAllStringFunc(rest, func(block string) string {
				if looksLikeCall(bytes.TrimSpace([]byte(fencedBlock.FindStringSubmatch(block)[1]))) {
					return ""
				}
				return block
			})
		}
	}
	// A bare JSON object as the whole answer.
	if !r.found() {
		body := bytes.TrimSpace([]byte(rest))
		if len(body) > 0 && body[0] == '{' && looksLikeCall(body) {
			name, args, problem := jsonCall(body)
			if problem != "" {
				r.noteProblem("the JSON of your call is not valid: " + problem)
			} else {
				add(name, args)
			}
			rest = ""
		}
	}
	r.rest = strings.TrimSpace(rest)
	if r.problem != "" {
		r.calls = nil // all or nothing: the model is asked again for the whole reply
	}
	return r
}

func (r *textCalls) noteProblem(p string) {
	if r.problem == "" {
		r.problem = p
	} else if !strings.Contains(r.problem, p) {
		r.problem += "; " + p
	}
}

// unknownToolProblem says a tool does not exist, naming the nearest one.
func unknownToolProblem(name string, tools map[string]model.ToolSpec) string {
	names := make([]string, 0, len(tools))
	for n := range tools {
		names = append(names, n)
	}
	msg := fmt.Sprintf("there is no tool %q", name)
	if near := NearestName(name, names); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", near)
	}
	return msg
}

// looksLikeCall reports whether b is meant as a call: a JSON object (valid
// or not) with a "name" and its "arguments" or "parameters".
func looksLikeCall(b []byte) bool {
	if len(b) == 0 || (b[0] != '{' && b[0] != '[') {
		return false
	}
	return bytes.Contains(b, []byte(`"name"`)) &&
		(bytes.Contains(b, []byte(`"arguments"`)) || bytes.Contains(b, []byte(`"parameters"`)))
}

// jsonCall reads {"name": …, "arguments"|"parameters": …}, also wrapped
// as {"type": "function", "function": {…}}. problem says what is wrong
// when it is not that.
func jsonCall(b []byte) (name string, args json.RawMessage, problem string) {
	var call struct {
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
		Function   *struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if !json.Valid(b) {
		_, p := CheckArgs(nil, b)
		return "", nil, p
	}
	if err := json.Unmarshal(b, &call); err != nil {
		return "", nil, `write one JSON object {"name": "<tool>", "arguments": {…}}`
	}
	if call.Function != nil && call.Name == "" {
		call.Name, call.Arguments = call.Function.Name, call.Function.Arguments
	}
	if call.Name == "" {
		return "", nil, `the call has no "name"`
	}
	args = call.Arguments
	if len(args) == 0 {
		args = call.Parameters
	}
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	return call.Name, args, ""
}

// functionArgs reads the body of a <function=…> element: a JSON object,
// or <parameter=name>value</parameter> items, whose values are strings
// unless the tool's schema gives the parameter another type and the value
// reads as JSON of it.
func functionArgs(body string, spec model.ToolSpec) json.RawMessage {
	body = strings.TrimSpace(body)
	if strings.HasPrefix(body, "{") {
		return json.RawMessage(body) // checked against the schema when it runs
	}
	var props map[string]struct {
		Type any `json:"type"`
	}
	var schema struct {
		Properties json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(spec.Parameters, &schema) == nil {
		_ = json.Unmarshal(schema.Properties, &props)
	}
	args := map[string]any{}
	for _, p := range parameterItem.FindAllStringSubmatch(body, -1) {
		v := strings.TrimSuffix(strings.TrimPrefix(p[2], "\n"), "\n")
		if t, ok := props[p[1]].Type.(string); ok && t != "string" {
			var parsed any
			if json.Unmarshal([]byte(strings.TrimSpace(v)), &parsed) == nil {
				args[p[1]] = parsed
				continue
			}
		}
		args[p[1]] = v
	}
	out, _ := json.Marshal(args)
	return out
}

// repairArgs makes arguments sent as a JSON string holding an object into
// that object: the one repair that is never a guess. Anything else is
// returned as it is.
func repairArgs(args json.RawMessage) json.RawMessage {
	b := bytes.TrimSpace(args)
	for range 2 { // doubly encoded at most
		if len(b) == 0 || b[0] != '"' {
			return args
		}
		var s string
		if json.Unmarshal(b, &s) != nil {
			return args
		}
		b = bytes.TrimSpace([]byte(s))
		if len(b) > 0 && b[0] == '{' && json.Valid(b) {
			return json.RawMessage(b)
		}
	}
	return args
}
