// Package ollama is the model.Provider for an Ollama server, through the
// official client github.com/ollama/ollama/api (its types and errors; chat
// streams are read with a bounded buffer, see stream.go).
package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/ollama/ollama/api"

	"github.com/mother-chat/mother/pkg/model"
)

// Provider talks to one Ollama server.
type Provider struct {
	client *api.Client
	base   string
	// url and http are for Chat's own stream (stream.go).
	url    *url.URL
	http   *http.Client
	signed bool // requests need the official client's signing

	mu    sync.Mutex
	shows map[string]showInfo
	// tools are the tool specs converted for the API, and that as JSON,
	// by the spec: the same few tools go with every call, and parsing their
	// schemas again each time was a tenth of Mother's CPU per message
	// (encoding them each time, a sixth of the request's encoding).
	tools map[string]cachedTool
}

type cachedTool struct {
	tool api.Tool
	json json.RawMessage
}

// maxCachedTools bounds Provider.tools (host tools come and go with a
// reload; the cache starts afresh when it is full).
const maxCachedTools = 256

// tool is t converted for the API, and its JSON, made once.
func (p *Provider) tool(t model.ToolSpec) (cachedTool, error) {
	key := t.Name + "\x00" + t.Description + "\x00" + string(t.Parameters)
	p.mu.Lock()
	c, ok := p.tools[key]
	p.mu.Unlock()
	if ok {
		return c, nil
	}
	tool, err := toOllamaTool(t)
	if err != nil {
		return cachedTool{}, err
	}
	raw, err := json.Marshal(tool)
	if err != nil {
		return cachedTool{}, err
	}
	c = cachedTool{tool: tool, json: raw}
	p.mu.Lock()
	if p.tools == nil || len(p.tools) >= maxCachedTools {
		p.tools = map[string]cachedTool{}
	}
	p.tools[key] = c
	p.mu.Unlock()
	return c, nil
}

// showInfo is what /api/show told about a model.
type showInfo struct {
	window     int
	fromParams bool // window is the Modelfile's num_ctx
	vision     bool
	thinking   bool // the model lists the "thinking" capability
}

var (
	_ model.Provider        = (*Provider)(nil)
	_ model.ContextWindower = (*Provider)(nil)
	_ model.ImageSupporter  = (*Provider)(nil)
)

// NormalizeURL accepts an Ollama base URL with or without the OpenAI-style
// "/v1" suffix (as today's MOTHER_OLLAMA_URL carries) and returns the native
// API base.
func NormalizeURL(raw string) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, errors.New("empty URL")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("URL %q: scheme must be http or https", raw)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("URL %q: no host", raw)
	}
	p := strings.TrimRight(u.Path, "/")
	p = strings.TrimSuffix(p, "/v1")
	u.Path = p
	return u, nil
}

// New returns a provider for the Ollama server at baseURL. httpClient may be
// nil for http.DefaultClient.
func New(baseURL string, httpClient *http.Client) (*Provider, error) {
	u, err := NormalizeURL(baseURL)
	if err != nil {
		return nil, fmt.Errorf("ollama: %w", err)
	}
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	return &Provider{client: api.NewClient(u, httpClient), base: u.String(), url: u, http: httpClient, signed: needsSigning(u), shows: map[string]showInfo{}}, nil
}

// Chat streams one chat call.
func (p *Provider) Chat(ctx context.Context, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	creq := &api.ChatRequest{
		Model:   req.Model,
		Options: map[string]any{},
		Think:   p.think(ctx, req.Model, req.Think),
	}
	if req.MaxOutputTokens > 0 {
		creq.Options["num_predict"] = req.MaxOutputTokens
	}
	if req.ContextWindow > 0 {
		creq.Options["num_ctx"] = req.ContextWindow
	}
	var tools []json.RawMessage // encodeChat's; the official client takes creq.Tools
	for _, t := range req.Tools {
		c, err := p.tool(t)
		if err != nil {
			return model.Response{}, model.Wrap(model.ErrInvalidRequest, "ollama: tool %q: %v", t.Name, err)
		}
		if p.signed {
			creq.Tools = append(creq.Tools, c.tool)
		} else {
			tools = append(tools, c.json)
		}
	}

	var (
		text  strings.Builder
		calls []model.ToolCall
		resp  model.Response
		done  bool
	)
	onResponse := func(r reply) error {
		if t := r.Message.Thinking; t != "" && onDelta != nil {
			onDelta(model.Delta{Thinking: t})
		}
		if c := r.Message.Content; c != "" {
			text.WriteString(c)
			if onDelta != nil {
				onDelta(model.Delta{Text: c})
			}
		}
		for _, tc := range r.Message.ToolCalls {
			// The arguments as the server sent them: the agent repairs a
			// string holding the object, and reports anything else to the
			// model (agent.CheckArgs).
			args := json.RawMessage(bytes.TrimSpace(tc.Function.Arguments))
			if len(args) == 0 || string(args) == "null" {
				args = json.RawMessage("{}")
			}
			id := tc.ID
			if id == "" {
				id = "call_" + strconv.Itoa(len(calls)+1)
			}
			calls = append(calls, model.ToolCall{ID: id, Name: tc.Function.Name, Args: args})
		}
		if r.Done {
			done = true
			resp.StopReason = r.DoneReason
			resp.Usage = model.Usage{InputTokens: int64(r.PromptEvalCount), OutputTokens: int64(r.EvalCount)}
		}
		return nil
	}
	var err error
	if p.signed {
		creq.Messages = toOllamaMessages(req.System, req.Messages)
		err = p.client.Chat(ctx, creq, func(r api.ChatResponse) error {
			rr, err := fromAPI(r)
			if err != nil {
				return err
			}
			return onResponse(rr)
		})
	} else {
		body, eerr := encodeChat(creq, tools, req.System, req.Messages)
		if eerr != nil {
			return model.Response{}, fmt.Errorf("ollama: %w", eerr)
		}
		err = chatStream(ctx, p.http, p.url, body, onResponse)
	}
	if err != nil {
		return model.Response{}, p.classify(req.Model, err)
	}
	if !done {
		return model.Response{}, &model.TransientError{Err: errors.New("ollama: stream ended before done")}
	}
	resp.Message = model.Message{Role: model.RoleAssistant, Content: text.String(), ToolCalls: calls}
	if resp.StopReason == "length" && len(calls) == 0 && text.Len() == 0 {
		return resp, fmt.Errorf("ollama: %w", model.ErrContextOverflow)
	}
	return resp, nil
}

// MaxTrainedWindow caps the window taken from a model's trained context
// length: the agent sends its window as num_ctx, and a model trained for
// 256k tokens would otherwise ask the server for a KV cache that does not
// fit a 24 GB card. A num_ctx set in the Modelfile, or context.windowTokens
// in config, is used as it is.
const MaxTrainedWindow = 32768

// ContextWindow asks /api/show for the model's context length (the
// Modelfile's num_ctx, else the trained length capped at MaxTrainedWindow);
// the answer is cached per model.
func (p *Provider) ContextWindow(ctx context.Context, name string) (int, error) {
	info, err := p.show(ctx, name)
	if err != nil {
		return 0, err
	}
	if info.window == 0 {
		return 0, fmt.Errorf("ollama: model %s: no context length in /api/show", name)
	}
	if !info.fromParams && info.window > MaxTrainedWindow {
		return MaxTrainedWindow, nil
	}
	return info.window, nil
}

// think is the "think" value to send for a model: true or false for a
// model whose /api/show lists the "thinking" capability (auto is the
// model's own default, which for the thinking models is to think), and
// nothing for one that cannot think, or when /api/show does not answer:
// the server refuses think:true for a model that cannot, and what it does
// without the field is what it did before the field existed. Sent
// explicitly, true also makes the server return the thoughts in their own
// field, apart from the answer, whatever its version's default.
func (p *Provider) think(ctx context.Context, name string, t model.Think) *api.ThinkValue {
	info, err := p.show(ctx, name)
	if err != nil || !info.thinking {
		return nil
	}
	return &api.ThinkValue{Value: t != model.ThinkOff}
}

// Ping asks the server for its version: it answers, or it does not.
func (p *Provider) Ping(ctx context.Context) error {
	if _, err := p.client.Version(ctx); err != nil {
		return p.classify("", err)
	}
	return nil
}

// CanThink reports whether /api/show lists the "thinking" capability.
func (p *Provider) CanThink(ctx context.Context, name string) (bool, error) {
	info, err := p.show(ctx, name)
	if err != nil {
		return false, err
	}
	return info.thinking, nil
}

// SupportsImages reports whether /api/show lists the "vision" capability.
func (p *Provider) SupportsImages(ctx context.Context, name string) (bool, error) {
	info, err := p.show(ctx, name)
	if err != nil {
		return false, err
	}
	return info.vision, nil
}

func (p *Provider) show(ctx context.Context, name string) (showInfo, error) {
	p.mu.Lock()
	if info, ok := p.shows[name]; ok {
		p.mu.Unlock()
		return info, nil
	}
	p.mu.Unlock()
	show, err := p.client.Show(ctx, &api.ShowRequest{Model: name})
	if err != nil {
		return showInfo{}, p.classify(name, err)
	}
	var info showInfo
	// A num_ctx parameter set in the Modelfile wins over the trained length.
	for _, line := range strings.Split(show.Parameters, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "num_ctx" {
			if v, err := strconv.Atoi(f[1]); err == nil {
				info.window, info.fromParams = v, true
			}
		}
	}
	if info.window == 0 {
		for k, v := range show.ModelInfo {
			if strings.HasSuffix(k, ".context_length") {
				if f, ok := v.(float64); ok {
					info.window = int(f)
				}
			}
		}
	}
	for _, c := range show.Capabilities {
		switch c {
		case "vision":
			info.vision = true
		case "thinking":
			info.thinking = true
		}
	}
	p.mu.Lock()
	p.shows[name] = info
	p.mu.Unlock()
	return info, nil
}

// classify maps client errors to the model package's sentinels, keeping the
// message readable for a channel.
func (p *Provider) classify(name string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var se api.StatusError
	if errors.As(err, &se) {
		msg := se.ErrorMessage
		if msg == "" {
			msg = se.Status
		}
		switch {
		case se.StatusCode == http.StatusUnauthorized || se.StatusCode == http.StatusForbidden:
			return model.Wrap(model.ErrAuth, "ollama: the server at %s refused the request (HTTP %d): %s", p.base, se.StatusCode, msg)
		case se.StatusCode == http.StatusNotFound:
			return model.Wrap(model.ErrModelNotFound, "model %q not found on the Ollama server at %s", name, p.base)
		case se.StatusCode >= 500 || se.StatusCode == http.StatusTooManyRequests:
			if isOverflow(msg) {
				return fmt.Errorf("ollama: %s: %w", msg, model.ErrContextOverflow)
			}
			if model.Overloaded(se.StatusCode) {
				return &model.TransientError{Err: model.Wrap(model.ErrOverloaded, "ollama: HTTP %d: %s", se.StatusCode, msg)}
			}
			return &model.TransientError{Err: fmt.Errorf("ollama: HTTP %d: %s", se.StatusCode, msg)}
		case isOverflow(msg):
			return fmt.Errorf("ollama: %s: %w", msg, model.ErrContextOverflow)
		}
		return fmt.Errorf("ollama: HTTP %d: %s", se.StatusCode, msg)
	}
	var ae api.AuthorizationError
	if errors.As(err, &ae) {
		return model.Wrap(model.ErrAuth, "ollama: the server at %s refused the request (%s)", p.base, ae.Status)
	}
	// A connection the server dropped (EOF before an answer, a reset) is
	// a hiccup worth another attempt; one it refused, or a host that does
	// not answer, is a server that is down.
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		return &model.TransientError{Err: fmt.Errorf("ollama at %s dropped the connection: %w", p.base, err)}
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return model.Wrap(model.ErrUnreachable, "Ollama at %s: %v", p.base, oe.Err)
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return model.Wrap(model.ErrUnreachable, "Ollama at %s: %v", p.base, ne)
	}
	if isOverflow(err.Error()) {
		return fmt.Errorf("ollama: %v: %w", err, model.ErrContextOverflow)
	}
	return &model.TransientError{Err: fmt.Errorf("ollama: %w", err)}
}

func isOverflow(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "context length") || strings.Contains(m, "context window") ||
		strings.Contains(m, "exceeds the context") || strings.Contains(m, "too many tokens")
}

// toOllamaMessages is the history in the official client's types, for the
// signed requests that go through the official client (chatStream writes
// the same JSON from the history without it, see encodeChat).
func toOllamaMessages(system string, msgs []model.Message) []api.Message {
	out := make([]api.Message, 0, len(msgs)+1)
	if system != "" {
		out = append(out, api.Message{Role: "system", Content: system})
	}
	for _, m := range msgs {
		om := api.Message{Role: string(m.Role), Content: m.Content, ToolCallID: m.ToolCallID, ToolName: m.ToolName}
		for _, img := range m.Images {
			om.Images = append(om.Images, api.ImageData(img.Data))
		}
		for i, tc := range m.ToolCalls {
			args := api.NewToolCallFunctionArguments()
			if len(tc.Args) > 0 {
				_ = json.Unmarshal(tc.Args, &args) // args came from the model as an object
			}
			om.ToolCalls = append(om.ToolCalls, api.ToolCall{ID: tc.ID, Function: api.ToolCallFunction{Index: i, Name: tc.Name, Arguments: args}})
		}
		out = append(out, om)
	}
	return out
}

func toOllamaTool(t model.ToolSpec) (api.Tool, error) {
	var params api.ToolFunctionParameters
	if len(t.Parameters) > 0 {
		if err := json.Unmarshal(t.Parameters, &params); err != nil {
			return api.Tool{}, fmt.Errorf("parameters schema: %w", err)
		}
	}
	if params.Type == "" {
		params.Type = "object"
	}
	if params.Properties == nil {
		params.Properties = api.NewToolPropertiesMap()
	}
	return api.Tool{Type: "function", Function: api.ToolFunction{Name: t.Name, Description: t.Description, Parameters: params}}, nil
}
