package ollama

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"

	"github.com/ollama/ollama/api"

	"github.com/mother-chat/mother/pkg/model"
)

// The official client's stream (api.Client.Chat) allocates an 8 MB line
// buffer for every call, which a Pi pays in zeroed pages and GC cycles on
// every model call. chatStream is the same /api/chat exchange with the
// same official request and response types, the same error values
// (api.StatusError, api.AuthorizationError) and the same 8 MB line limit,
// but it reads lines through a pooled 64 KiB reader and grows a line
// buffer only as far as a line needs. Requests that need the official
// client's request signing (ollama.com, OLLAMA_AUTH) still go through it.

// maxLine is the official client's limit on one streamed line.
const maxLine = 8 << 20

var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

// needsSigning mirrors when the official client signs a request.
func needsSigning(u *url.URL) bool {
	if u.Hostname() == "ollama.com" {
		return true
	}
	v, err := strconv.ParseBool(os.Getenv("OLLAMA_AUTH"))
	return err == nil && v
}

// chatStream posts body (a request from encodeChat) to /api/chat and calls
// fn for each streamed response, as api.Client.Chat does, but for what it
// does with a line it cannot read (decodeReply).
func chatStream(ctx context.Context, hc *http.Client, base *url.URL, body []byte, fn func(reply) error) error {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, base.JoinPath("/api/chat").String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/x-ndjson")
	hreq.Header.Set("User-Agent", "mother (ollama api)")
	resp, err := hc.Do(hreq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	br := readers.Get().(*bufio.Reader)
	br.Reset(resp.Body)
	defer func() {
		br.Reset(nil)
		readers.Put(br)
	}()
	var long []byte // a line longer than the reader's buffer
	lines := 0
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long)+len(chunk) > maxLine {
				return bufio.ErrTooLong
			}
			long = append(long, chunk...)
			continue
		}
		line := chunk
		if long != nil {
			line = append(long, chunk...)
			long = nil
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) > maxLine {
			return bufio.ErrTooLong
		}
		if len(line) > 0 {
			lines++
			if ferr := chatLine(resp, line, fn); ferr != nil {
				return ferr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if lines == 0 && resp.StatusCode >= http.StatusBadRequest {
					return api.StatusError{StatusCode: resp.StatusCode, Status: resp.Status}
				}
				return nil
			}
			return err
		}
	}
}

// chatLine handles one line as the official client's stream does: an
// error object or a status of 400 and above is an error, else a response.
// On a stream that is going well, a line that is not JSON is skipped
// rather than taken for an error message (the official client's reading):
// one bad line must not lose the reply.
func chatLine(resp *http.Response, line []byte, fn func(reply) error) error {
	var e struct {
		Error     string `json:"error,omitempty"`
		SigninURL string `json:"signin_url,omitempty"`
	}
	if err := json.Unmarshal(line, &e); err != nil {
		if resp.StatusCode >= http.StatusBadRequest {
			return api.StatusError{StatusCode: resp.StatusCode, Status: resp.Status, ErrorMessage: string(line)}
		}
		// The error member of the wrong type is read as no error.
		e.Error, e.SigninURL = "", ""
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return api.AuthorizationError{StatusCode: resp.StatusCode, Status: resp.Status, SigninURL: e.SigninURL}
	case resp.StatusCode >= http.StatusBadRequest:
		return api.StatusError{StatusCode: resp.StatusCode, Status: resp.Status, ErrorMessage: e.Error}
	case e.Error != "":
		return errors.New(e.Error)
	}
	r, ok := decodeReply(line)
	if !ok {
		return nil
	}
	return fn(r)
}

// reply is one streamed response: api.ChatResponse with its message's
// tool calls holding their arguments as the JSON the server sent. Real
// Ollama sends an object; a server imitating its API may send a JSON
// string holding the object, which the official type cannot hold (its
// decoder fails on the whole line). The provider passes the arguments on
// as they are, and the agent repairs them as it does a call written as
// text (agent.CheckArgs).
type reply struct {
	api.ChatResponse
	Message replyMessage `json:"message"`
}

type replyMessage struct {
	Role      string      `json:"role"`
	Content   string      `json:"content"`
	Thinking  string      `json:"thinking,omitempty"`
	ToolCalls []replyCall `json:"tool_calls,omitempty"`
}

type replyCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     int             `json:"index"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// decodeReply reads a response line. A line that is JSON but does not fit
// the types (a field of the wrong type, a tool call that is not an
// object) is read field by field, and what cannot be read is left out:
// the text, the other calls and the done line's counts are kept. It
// reports false for a line that is not a JSON object.
func decodeReply(line []byte) (reply, bool) {
	var r reply
	if json.Unmarshal(line, &r) == nil {
		return r, true
	}
	r = reply{}
	var top map[string]json.RawMessage
	if json.Unmarshal(line, &top) != nil || top == nil {
		return reply{}, false
	}
	msg := top["message"]
	delete(top, "message")
	fieldwise(top, &r)
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil {
		return r, true
	}
	calls := m["tool_calls"]
	delete(m, "tool_calls")
	fieldwise(m, &r.Message)
	var list []json.RawMessage
	if json.Unmarshal(calls, &list) != nil {
		return r, true
	}
	for _, raw := range list {
		var c replyCall
		if json.Unmarshal(raw, &c) == nil && c.Function.Name != "" {
			r.Message.ToolCalls = append(r.Message.ToolCalls, c)
		}
	}
	return r, true
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

// fromAPI is a response the official client decoded, as a reply.
func fromAPI(r api.ChatResponse) (reply, error) {
	out := reply{ChatResponse: r}
	m := r.Message
	out.ChatResponse.Message = api.Message{}
	out.Message = replyMessage{Role: m.Role, Content: m.Content, Thinking: m.Thinking}
	for _, tc := range m.ToolCalls {
		args, err := json.Marshal(tc.Function.Arguments)
		if err != nil {
			return reply{}, fmt.Errorf("tool call arguments: %w", err)
		}
		var c replyCall
		c.ID, c.Function.Index, c.Function.Name, c.Function.Arguments = tc.ID, tc.Function.Index, tc.Function.Name, args
		out.Message.ToolCalls = append(out.Message.ToolCalls, c)
	}
	return out, nil
}

// The request body. The official api.ToolCallFunctionArguments keeps a
// tool call's arguments as an ordered map of decoded values, so sending the
// history through the official types parses every earlier tool call's
// arguments and encodes them again, on every call: with a chick's growing
// history relayed through the broker, that was a third of Mother's CPU in
// the relay bench. wireRequest is api.ChatRequest with its messages
// replaced by wireMessage, which is api.Message with its tool calls
// replaced by ones whose arguments are the JSON the model produced
// (model.ToolCall.Args), written as they are; and with its tools as the
// JSON of the official api.Tool, encoded once per tool (Provider.tool).
// Every other field is the official type's own, so the body is the JSON
// value api.Client.Chat would send (TestEncodeChatMatchesTheOfficialTypes),
// with its keys in another order, and with the arguments in the model's
// own spelling of numbers and escapes rather than decoded and written again
// (TestEncodeChatKeepsTheModelsArguments).

type wireRequest struct {
	Model    string            `json:"model"`
	Messages []wireMessage     `json:"messages"`
	Tools    []json.RawMessage `json:"tools,omitempty"`
	*api.ChatRequest
}

type wireMessage struct {
	api.Message
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
}

type wireToolCall struct {
	ID       string           `json:"id,omitempty"`
	Function wireToolFunction `json:"function"`
}

type wireToolFunction struct {
	Index     int             `json:"index"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// emptyArgs is what the official types send for arguments that are not a
// JSON object (toOllamaMessages leaves those empty).
var emptyArgs = json.RawMessage("{}")

// encodeChat is the JSON of req with system and msgs as its messages and
// tools (each the JSON of an api.Tool) as its tools.
func encodeChat(req *api.ChatRequest, tools []json.RawMessage, system string, msgs []model.Message) ([]byte, error) {
	wire := wireRequest{Model: req.Model, Messages: make([]wireMessage, 0, len(msgs)+1), Tools: tools, ChatRequest: req}
	if system != "" {
		wire.Messages = append(wire.Messages, wireMessage{Message: api.Message{Role: "system", Content: system}})
	}
	for _, m := range msgs {
		wm := wireMessage{Message: api.Message{Role: string(m.Role), Content: m.Content, ToolCallID: m.ToolCallID, ToolName: m.ToolName}}
		for _, img := range m.Images {
			wm.Images = append(wm.Images, api.ImageData(img.Data))
		}
		if len(m.ToolCalls) > 0 {
			wm.ToolCalls = make([]wireToolCall, len(m.ToolCalls))
		}
		for i, tc := range m.ToolCalls {
			args := emptyArgs
			if isObject(tc.Args) {
				args = tc.Args
			}
			wm.ToolCalls[i] = wireToolCall{ID: tc.ID, Function: wireToolFunction{Index: i, Name: tc.Name, Arguments: args}}
		}
		wire.Messages = append(wire.Messages, wm)
	}
	return json.Marshal(wire)
}

// isObject reports whether b is one valid JSON object.
func isObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}
