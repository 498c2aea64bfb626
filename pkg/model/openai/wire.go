package openai

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/model"
)

// The request body is written here, not by the library's types: they
// drop an empty string content (an assistant turn that is only tool calls
// must carry "content": "" for llama.cpp before 2025 and for gateways
// that require the member), and they have no room for a model's extra
// fields. The body is the chat-completions request as every server reads
// it:
//
//	{"model", "messages": [...], "tools": [...], "stream": true,
//	 "stream_options": {"include_usage": true}, <model options>,
//	 "max_tokens": N}

type wireRequest struct {
	Model         string        `json:"model"`
	Messages      []wireMessage `json:"messages"`
	Tools         []wireTool    `json:"tools,omitempty"`
	Stream        bool          `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type wireMessage struct {
	Role string `json:"role"`
	// Content is a string, or []wirePart for a message with images.
	Content    any            `json:"content"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type wirePart struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url,omitempty"`
}

type wireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
		// Arguments is the JSON the model wrote, as a string.
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wireTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// body is the request body of one call: req in the wire shape, then the
// model's options, then the output cap unless the options carry their
// own.
func (p *Provider) body(req model.Request) ([]byte, error) {
	w := wireRequest{Model: req.Model, Messages: toMessages(req.System, req.Messages), Stream: true}
	w.StreamOptions.IncludeUsage = true
	tools, err := toTools(req.Tools)
	if err != nil {
		return nil, err
	}
	w.Tools = tools
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // "<" and "&" as they are, as the model wrote them
	if err := enc.Encode(w); err != nil {
		return nil, model.Wrap(model.ErrInvalidRequest, "openai: %v", err)
	}
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	mc := p.models[req.Model]
	fields := mc.fields
	if req.MaxOutputTokens > 0 && !mc.capsOutput {
		limit := `"` + p.capField + `":` + strconv.Itoa(req.MaxOutputTokens)
		if len(fields) > 0 {
			limit = "," + limit
		}
		fields = append(slices.Clip(fields), limit...)
	}
	return addFields(body, fields), nil
}

// toTools maps the tools to function tools; parameters that are not a
// JSON object are an error.
func toTools(ts []model.ToolSpec) ([]wireTool, error) {
	var out []wireTool
	for _, t := range ts {
		params := json.RawMessage(strings.TrimSpace(string(t.Parameters)))
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		if params[0] != '{' || !json.Valid(params) {
			return nil, model.Wrap(model.ErrInvalidRequest, "openai: tool %q: its parameters are not a JSON object", t.Name)
		}
		var wt wireTool
		wt.Type, wt.Function.Name, wt.Function.Description, wt.Function.Parameters = "function", t.Name, t.Description, params
		out = append(out, wt)
	}
	return out, nil
}

// addFields adds fields (JSON object members) to the JSON object body,
// which has members already.
func addFields(body, fields []byte) []byte {
	if len(fields) == 0 {
		return body
	}
	end := bytes.LastIndexByte(body, '}')
	out := make([]byte, 0, len(body)+len(fields)+1)
	out = append(out, body[:end]...)
	out = append(out, ',')
	out = append(out, fields...)
	return append(out, body[end:]...)
}

// toMessages maps the neutral history to chat messages: the system prompt
// first; tool calls with their arguments as the JSON text the model wrote;
// tool results as "tool" messages. A tool message carries text only (the
// API takes no images there), so the images of a run of tool results
// follow it in a user message. Empty contents get a placeholder (some
// servers refuse an empty user or tool message), except an assistant turn
// that is only tool calls, whose content is "".
func toMessages(system string, msgs []model.Message) []wireMessage {
	out := make([]wireMessage, 0, len(msgs)+1)
	if system != "" {
		out = append(out, wireMessage{Role: "system", Content: system})
	}
	var toolImages []wirePart // of the run of tool results just written
	flush := func() {
		if len(toolImages) > 0 {
			parts := append([]wirePart{{Type: "text", Text: "(the images the tool results above returned)"}}, toolImages...)
			out = append(out, wireMessage{Role: "user", Content: parts})
			toolImages = nil
		}
	}
	for _, m := range msgs {
		if m.Role != model.RoleTool {
			flush()
		}
		switch m.Role {
		case model.RoleTool:
			text := m.Content
			if text == "" {
				text = "(no output)"
			}
			out = append(out, wireMessage{Role: "tool", Content: text, ToolCallID: m.ToolCallID})
			for _, img := range m.Images {
				toolImages = append(toolImages, imagePart(img))
			}
		case model.RoleAssistant:
			wm := wireMessage{Role: "assistant", Content: m.Content}
			for _, tc := range m.ToolCalls {
				var wc wireToolCall
				wc.ID, wc.Type, wc.Function.Name, wc.Function.Arguments = tc.ID, "function", tc.Name, argumentsText(tc.Args)
				wm.ToolCalls = append(wm.ToolCalls, wc)
			}
			if m.Content == "" && len(m.ToolCalls) == 0 {
				wm.Content = "(no answer)"
			}
			out = append(out, wm)
		default:
			if len(m.Images) == 0 {
				text := m.Content
				if strings.TrimSpace(text) == "" {
					text = "(empty message)"
				}
				out = append(out, wireMessage{Role: "user", Content: text})
				continue
			}
			var parts []wirePart
			if m.Content != "" {
				parts = append(parts, wirePart{Type: "text", Text: m.Content})
			}
			for _, img := range m.Images {
				parts = append(parts, imagePart(img))
			}
			out = append(out, wireMessage{Role: "user", Content: parts})
		}
	}
	flush()
	return out
}

// imagePart is img as an image_url part with a data: URL.
func imagePart(img model.Image) wirePart {
	mime := img.MimeType
	if mime == "" {
		mime = "image/png"
	}
	p := wirePart{Type: "image_url", ImageURL: &struct {
		URL string `json:"url"`
	}{}}
	p.ImageURL.URL = "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(img.Data)
	return p
}

// argumentsText is a tool call's arguments as the API's string: the JSON
// the model wrote. Arguments that were not valid JSON are kept as a JSON
// string (see assembly.toolCalls); that string's content is what the
// model wrote, and goes back as it was. Empty arguments are "{}".
func argumentsText(args json.RawMessage) string {
	s := strings.TrimSpace(string(args))
	if s == "" || s == "null" {
		return "{}"
	}
	if s[0] == '"' {
		var text string
		if json.Unmarshal(args, &text) == nil {
			return text
		}
	}
	return s
}

// The library sends every request through an HTTPDoer, and doer is this
// package's. For a chat call it replaces the body the library wrote with
// the call's (Provider.body); for every request it adds the endpoint's
// headers (OpenRouter's HTTP-Referer, X-Title); and it keeps the status
// and the Retry-After of an error answer, which the library's error
// values do not carry.

// call is one chat call's state shared with doer through the request's
// context.
type call struct {
	// body is the request body to send.
	body []byte
	// sent is set once the library hands the request over: an error
	// before that is the library refusing the request.
	sent bool
	// status and retryAfter are those of an error answer.
	status     int
	retryAfter time.Duration
}

type callKey struct{}

func withCall(ctx context.Context, c *call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

type doer struct{ p *Provider }

func (d doer) Do(req *http.Request) (*http.Response, error) {
	d.p.setHeaders(req)
	c, _ := req.Context().Value(callKey{}).(*call)
	if c != nil {
		c.sent = true
		if c.body != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			body := c.body
			req.Body = io.NopCloser(bytes.NewReader(body))
			req.ContentLength = int64(len(body))
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
	}
	resp, err := d.p.http.Do(req)
	if err == nil && c != nil && resp.StatusCode >= http.StatusBadRequest {
		c.status = resp.StatusCode
		c.retryAfter = retryAfter(resp.Header, d.p.clock.Now())
	}
	return resp, err
}

// setHeaders sets the endpoint's headers on a request (the library sets
// the bearer key on its own; GET requests made here set it too).
func (p *Provider) setHeaders(req *http.Request) {
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "mother (openai api)")
	}
	for k, v := range p.headers {
		req.Header.Set(k, v)
	}
}

// retryAfter reads how long the server asks to wait: Retry-After in
// seconds or as an HTTP date, else OpenAI's retry-after-ms; 0 when it
// does not say.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
			return time.Duration(s * float64(time.Second))
		}
		if t, err := http.ParseTime(v); err == nil {
			if d := t.Sub(now); d > 0 {
				return d.Round(time.Second)
			}
			return 0
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	return 0
}
