package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/model"
)

// The chunks of a streamed answer are decoded here, from the data lines
// the library reads (RecvRaw), in the shape the servers really send:
//
//	{"id":"...","object":"chat.completion.chunk","created":1,"model":"m",
//	 "choices":[{"index":0,"delta":{...},"finish_reason":null}],
//	 "usage":null}
//
// delta.content is the answer's text. The thinking of a reasoning model
// comes apart from it, as delta.reasoning_content (DeepSeek, older vLLM,
// llama.cpp with --reasoning-format, SGLang) or delta.reasoning
// (OpenRouter, LM Studio, vLLM since 0.10); thinking a server leaves in
// the text (a "<think>" block) stays there, for agent.Clean.
//
// Tool calls come in fragments: the first of a call has its index, id,
// type and name, with arguments "" or a first piece; the next ones the
// same index and more of the arguments; calls may interleave. Usage comes
// on a chunk of its own with "choices": [] after the finish (OpenAI, vLLM,
// SGLang, OpenRouter with stream_options.include_usage), or on the finish
// chunk itself (llama.cpp, LM Studio), or not at all (older servers).
//
// An error after the stream began comes as a data line too: vLLM writes
// {"error": {...}} (older releases {"object": "error", "message": ...}),
// OpenRouter a chunk with an "error" member and finish_reason "error".

type chunk struct {
	Choices []choice `json:"choices"`
	Usage   *usage   `json:"usage"`
	// Error is OpenRouter's (and a few proxies') error inside a chunk.
	Error json.RawMessage `json:"error"`
	// Object, Message, Type and Code are vLLM's older flat error.
	Object  string          `json:"object"`
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

type choice struct {
	Index        int         `json:"index"`
	Delta        choiceDelta `json:"delta"`
	FinishReason text        `json:"finish_reason"`
}

type choiceDelta struct {
	Content          text            `json:"content"`
	ReasoningContent text            `json:"reasoning_content"`
	Reasoning        text            `json:"reasoning"`
	ToolCalls        []toolCallDelta `json:"tool_calls"`
}

type toolCallDelta struct {
	// Index is absent from some servers' fragments (then the id tells).
	Index    *int `json:"index"`
	ID       text `json:"id"`
	Function struct {
		Name text `json:"name"`
		// Arguments is a string piece; a whole object from a server that
		// sends one is taken as its text.
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

// text is a string member that may be null (read as "").
type text string

func (t *text) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = text(s)
	}
	return nil
}

// serverError is an error a server sent: an HTTP status with an error
// body, or an error object written into the stream (status 0).
type serverError struct {
	status int
	code   string // the error object's code, as text (a number or a word)
	typ    string
	msg    string
	// retry is how long an error answer asked to wait (Retry-After).
	retry time.Duration
}

func (e *serverError) Error() string { return e.msg }

// assembly gathers a streamed answer.
type assembly struct {
	text   strings.Builder
	think  int // bytes of thinking, for the estimate
	calls  []*partialCall
	finish string
	usage  *usage
}

type partialCall struct {
	index int // the server's index, or -1
	id    string
	name  string
	args  strings.Builder
}

// add takes one data line: it streams the text and the thinking to
// onDelta, gathers the rest, and returns an error a server wrote into the
// stream as a *serverError.
func (a *assembly) add(raw []byte, onDelta func(model.Delta)) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		// The library's reader returns an empty line when it saw an error
		// line it could not read (after a keep-alive comment).
		return errors.New("the stream carried an error that could not be read")
	}
	c, ok := decodeChunk(raw)
	if !ok {
		return nil // not JSON: skipped, the rest of the answer is kept
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		e := parseErrorValue(c.Error)
		return &e
	}
	if c.Object == "error" {
		return &serverError{code: codeText(c.Code), typ: c.Type, msg: c.Message}
	}
	if c.Usage != nil {
		a.usage = c.Usage
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // Mother asks for one choice
		}
		d := ch.Delta
		// A server in transition may send both names for the same
		// thinking; it is streamed once.
		think := string(d.ReasoningContent)
		if d.Reasoning != "" && d.Reasoning != d.ReasoningContent {
			think += string(d.Reasoning)
		}
		if think != "" {
			a.think += len(think)
			if onDelta != nil {
				onDelta(model.Delta{Thinking: think})
			}
		}
		if d.Content != "" {
			a.text.WriteString(string(d.Content))
			if onDelta != nil {
				onDelta(model.Delta{Text: string(d.Content)})
			}
		}
		for _, f := range d.ToolCalls {
			a.addFragment(f)
		}
		if ch.FinishReason != "" {
			a.finish = string(ch.FinishReason)
		}
	}
	return nil
}

// decodeChunk reads a data line. A line that is JSON but does not fit the
// types (a member of the wrong type, a tool call fragment that is not an
// object) is read member by member, and what cannot be read is left out:
// one bad line must not lose the answer. It reports false for a line that
// is not a JSON object, which is skipped.
func decodeChunk(raw []byte) (chunk, bool) {
	var c chunk
	if json.Unmarshal(raw, &c) == nil {
		return c, true
	}
	c = chunk{}
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil || top == nil {
		return chunk{}, false
	}
	choices := top["choices"]
	delete(top, "choices")
	fieldwise(top, &c)
	var list []json.RawMessage
	if json.Unmarshal(choices, &list) != nil {
		return c, true
	}
	for _, rc := range list {
		var ch choice
		if json.Unmarshal(rc, &ch) != nil {
			var m map[string]json.RawMessage
			if json.Unmarshal(rc, &m) != nil {
				continue
			}
			ch = choice{}
			d := m["delta"]
			delete(m, "delta")
			fieldwise(m, &ch)
			var dm map[string]json.RawMessage
			if json.Unmarshal(d, &dm) == nil {
				calls := dm["tool_calls"]
				delete(dm, "tool_calls")
				fieldwise(dm, &ch.Delta)
				var frags []json.RawMessage
				_ = json.Unmarshal(calls, &frags)
				for _, f := range frags {
					var tc toolCallDelta
					if json.Unmarshal(f, &tc) == nil {
						ch.Delta.ToolCalls = append(ch.Delta.ToolCalls, tc)
					}
				}
			}
		}
		c.Choices = append(c.Choices, ch)
	}
	return c, true
}

// fieldwise decodes an object's members into v one at a time, leaving
// out those that do not fit.
func fieldwise(members map[string]json.RawMessage, v any) {
	for k, raw := range members {
		one, err := json.Marshal(map[string]json.RawMessage{k: raw})
		if err == nil {
			_ = json.Unmarshal(one, v)
		}
	}
}

// addFragment adds a tool call fragment to its call: the one with its
// index, unless that call has another id (a server that numbers every
// call 0); without an index, the one with its id, else the last.
func (a *assembly) addFragment(f toolCallDelta) {
	var pc *partialCall
	switch {
	case f.Index != nil:
		for _, c := range a.calls {
			if c.index == *f.Index && (f.ID == "" || c.id == "" || c.id == string(f.ID)) {
				pc = c
			}
		}
	case f.ID != "":
		for _, c := range a.calls {
			if c.id == string(f.ID) {
				pc = c
			}
		}
	case len(a.calls) > 0:
		pc = a.calls[len(a.calls)-1]
	}
	if pc == nil {
		pc = &partialCall{index: -1}
		if f.Index != nil {
			pc.index = *f.Index
		}
		a.calls = append(a.calls, pc)
	}
	if pc.id == "" {
		pc.id = string(f.ID)
	}
	if pc.name == "" {
		pc.name = string(f.Function.Name)
	}
	if args := bytes.TrimSpace(f.Function.Arguments); len(args) > 0 && string(args) != "null" {
		if args[0] == '"' {
			var s string
			if json.Unmarshal(args, &s) == nil {
				pc.args.WriteString(s)
			}
		} else {
			pc.args.Write(args)
		}
	}
}

// toolCalls are the gathered calls in the order they began. Arguments are
// the JSON text the server sent when it is valid JSON, "{}" when empty,
// and otherwise the text as a JSON string, so the agent's argument check
// reports it to the model as it was written; nothing is repaired here. A
// call without an id gets "call_<n>".
func (a *assembly) toolCalls() []model.ToolCall {
	var out []model.ToolCall
	for i, c := range a.calls {
		if c.name == "" && c.args.Len() == 0 {
			continue
		}
		args := json.RawMessage(strings.TrimSpace(c.args.String()))
		switch {
		case len(args) == 0:
			args = json.RawMessage("{}")
		case !json.Valid(args):
			args, _ = json.Marshal(c.args.String())
		}
		id := c.id
		if id == "" {
			id = "call_" + strconv.Itoa(i+1)
		}
		out = append(out, model.ToolCall{ID: id, Name: c.name, Args: args})
	}
	return out
}

// bytesPerToken is the estimate's ratio: about four bytes of English or
// code make a token for the usual tokenizers.
const bytesPerToken = 4

// estimate is the usage of a call whose server reported none: a token per
// bytesPerToken bytes of the request's text (system prompt, messages, tool
// calls and tool specs; images are not counted) and of the answer's
// (text, thinking, tool calls).
func estimate(req model.Request, a *assembly) model.Usage {
	in := len(req.System)
	for _, m := range req.Messages {
		in += len(m.Content) + len(m.ToolCallID)
		for _, tc := range m.ToolCalls {
			in += len(tc.ID) + len(tc.Name) + len(tc.Args)
		}
	}
	for _, t := range req.Tools {
		in += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	out := a.text.Len() + a.think
	for _, c := range a.calls {
		out += len(c.name) + c.args.Len()
	}
	return model.Usage{InputTokens: tokens(in), OutputTokens: tokens(out)}
}

func tokens(n int) int64 { return int64((n + bytesPerToken - 1) / bytesPerToken) }

// parseErrorBody reads an error answer's body in the shapes servers use:
// {"error": {"message", "type", "code"}} (OpenAI, vLLM, llama.cpp,
// OpenRouter, SGLang), {"error": "text"} (LM Studio, some proxies),
// {"object": "error", "message"...} (older vLLM), {"detail": ...}
// (FastAPI servers), {"message": ...}, or plain text.
func parseErrorBody(status int, body []byte) serverError {
	e := serverError{status: status}
	body = bytes.TrimSpace(body)
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message json.RawMessage `json:"message"`
		Detail  json.RawMessage `json:"detail"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &v) != nil {
		e.msg = strings.TrimSpace(string(body))
		if len(e.msg) > 500 {
			e.msg = e.msg[:500] + "…"
		}
		return e
	}
	if len(v.Error) > 0 && string(v.Error) != "null" {
		inner := parseErrorValue(v.Error)
		inner.status = status
		return inner
	}
	e.msg, e.typ, e.code = rawText(v.Message), v.Type, codeText(v.Code)
	if e.msg == "" {
		e.msg = rawText(v.Detail)
	}
	return e
}

// parseErrorValue reads an "error" member: an object or a string.
func parseErrorValue(raw json.RawMessage) serverError {
	var obj struct {
		Message json.RawMessage `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return serverError{msg: rawText(obj.Message), typ: obj.Type, code: codeText(obj.Code)}
	}
	return serverError{msg: rawText(raw)}
}

// rawText is a JSON value as text: a string's content, other values as
// they are written.
func rawText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// codeText is an error's code as text: 400, "context_length_exceeded".
func codeText(raw json.RawMessage) string { return rawText(raw) }
