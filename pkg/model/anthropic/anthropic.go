// Package anthropic is the model.Provider for the Anthropic Messages API,
// through the official client github.com/anthropics/anthropic-sdk-go:
// streaming answers with tool calls and images, errors mapped to the
// pkg/model sentinels.
package anthropic

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/mother-chat/mother/pkg/model"
)

// DefaultMaxTokens caps an answer when the request sets no limit (the API
// requires one).
const DefaultMaxTokens = 8192

// DefaultContextWindow is assumed when the Models API does not tell.
const DefaultContextWindow = 200_000

// Provider talks to the Anthropic API.
type Provider struct {
	client sdk.Client
	base   string

	mu      sync.Mutex
	windows map[string]int
}

var (
	_ model.Provider        = (*Provider)(nil)
	_ model.ContextWindower = (*Provider)(nil)
	_ model.ImageSupporter  = (*Provider)(nil)
	_ model.TokenCounter    = (*Provider)(nil)
)

// New returns a provider using apiKey at baseURL (empty for the public
// API). httpClient may be nil. The client's own retries are off: the agent
// loop retries transient errors with its own backoff.
func New(apiKey, baseURL string, httpClient *http.Client) (*Provider, error) {
	if strings.TrimSpace(apiKey) == "" {
		return nil, errors.New("anthropic: no API key (set providers.anthropic.apiKey or ANTHROPIC_API_KEY)")
	}
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithAPIKey(apiKey),
		option.WithMaxRetries(0),
	}
	base := "https://api.anthropic.com"
	if baseURL != "" {
		if !strings.HasPrefix(baseURL, "http://") && !strings.HasPrefix(baseURL, "https://") {
			return nil, fmt.Errorf("anthropic: base URL %q: scheme must be http or https", baseURL)
		}
		base = strings.TrimRight(baseURL, "/")
		opts = append(opts, option.WithBaseURL(base+"/"))
	}
	if httpClient != nil {
		opts = append(opts, option.WithHTTPClient(httpClient))
	}
	return &Provider{client: sdk.NewClient(opts...), base: base, windows: map[string]int{}}, nil
}

// Chat streams one call to POST /v1/messages.
func (p *Provider) Chat(ctx context.Context, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	params, err := p.params(req)
	if err != nil {
		return model.Response{}, err
	}
	stream := p.client.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	var msg sdk.Message
	for stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			return model.Response{}, &model.TransientError{Err: fmt.Errorf("anthropic: malformed stream: %w", err)}
		}
		if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" && onDelta != nil && ev.Delta.Text != "" {
			onDelta(model.Delta{Text: ev.Delta.Text})
		}
	}
	if err := stream.Err(); err != nil {
		return model.Response{}, p.classify(ctx, req.Model, err)
	}
	if msg.StopReason == "" {
		return model.Response{}, &model.TransientError{Err: errors.New("anthropic: stream ended before the message was complete")}
	}
	resp := model.Response{
		StopReason: string(msg.StopReason),
		Usage: model.Usage{
			InputTokens:  msg.Usage.InputTokens + msg.Usage.CacheReadInputTokens + msg.Usage.CacheCreationInputTokens,
			OutputTokens: msg.Usage.OutputTokens,
		},
	}
	var text strings.Builder
	var calls []model.ToolCall
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			args := b.Input
			if len(args) == 0 || !json.Valid(args) {
				if msg.StopReason == sdk.StopReasonMaxTokens {
					return model.Response{}, fmt.Errorf("anthropic: the answer hit the %d token limit in the middle of a %s tool call", params.MaxTokens, b.Name)
				}
				args = json.RawMessage("{}")
			}
			calls = append(calls, model.ToolCall{ID: b.ID, Name: b.Name, Args: args})
		}
	}
	resp.Message = model.Message{Role: model.RoleAssistant, Content: text.String(), ToolCalls: calls}
	if msg.StopReason == sdk.StopReasonModelContextWindowExceeded && text.Len() == 0 && len(calls) == 0 {
		return resp, fmt.Errorf("anthropic: %w", model.ErrContextOverflow)
	}
	return resp, nil
}

// CountTokens asks POST /v1/messages/count_tokens for the prompt tokens
// of req: its model, system text, messages and tools, mapped as Chat maps
// them. The API calls its answer an estimate; the call's usage may differ
// by a little.
func (p *Provider) CountTokens(ctx context.Context, req model.Request) (int, error) {
	params, err := p.params(req)
	if err != nil {
		return 0, err
	}
	cp := sdk.MessageCountTokensParams{Model: params.Model, Messages: params.Messages}
	if len(params.System) > 0 {
		cp.System = sdk.MessageCountTokensParamsSystemUnion{OfTextBlockArray: params.System}
	}
	for _, t := range params.Tools {
		cp.Tools = append(cp.Tools, sdk.MessageCountTokensToolUnionParam{OfTool: t.OfTool})
	}
	res, err := p.client.Messages.CountTokens(ctx, cp)
	if err != nil {
		return 0, p.classify(ctx, req.Model, err)
	}
	if res.InputTokens <= 0 {
		return 0, fmt.Errorf("anthropic: the token count of a prompt was %d", res.InputTokens)
	}
	return int(res.InputTokens), nil
}

// ContextWindow asks GET /v1/models/{id} for the model's input limit; the
// answer is cached per model.
func (p *Provider) ContextWindow(ctx context.Context, name string) (int, error) {
	p.mu.Lock()
	n, ok := p.windows[name]
	p.mu.Unlock()
	if ok {
		return n, nil
	}
	info, err := p.client.Models.Get(ctx, name, sdk.ModelGetParams{})
	if err != nil {
		return 0, p.classify(ctx, name, err)
	}
	n = int(info.MaxInputTokens)
	if n <= 0 {
		n = DefaultContextWindow
	}
	p.mu.Lock()
	p.windows[name] = n
	p.mu.Unlock()
	return n, nil
}

// ListModels lists the models the key may use (GET /v1/models, every
// page): what mother setup offers, and its check of the key.
func (p *Provider) ListModels(ctx context.Context) ([]string, error) {
	var out []string
	pager := p.client.Models.ListAutoPaging(ctx, sdk.ModelListParams{})
	for pager.Next() {
		out = append(out, pager.Current().ID)
	}
	if err := pager.Err(); err != nil {
		return nil, p.classify(ctx, "", err)
	}
	return out, nil
}

// Ping asks for one page of the models: the API answers and takes the
// key, or it does not.
func (p *Provider) Ping(ctx context.Context) error {
	if _, err := p.client.Models.List(ctx, sdk.ModelListParams{Limit: sdk.Int(1)}); err != nil {
		return p.classify(ctx, "", err)
	}
	return nil
}

// SupportsImages implements model.ImageSupporter: Claude models take
// images.
func (p *Provider) SupportsImages(context.Context, string) (bool, error) { return true, nil }

func (p *Provider) params(req model.Request) (sdk.MessageNewParams, error) {
	maxTokens := int64(req.MaxOutputTokens)
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	params := sdk.MessageNewParams{
		Model:     sdk.Model(req.Model),
		MaxTokens: maxTokens,
		Messages:  toMessages(req.Messages),
	}
	if req.System != "" {
		params.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	for _, t := range req.Tools {
		tool, err := toTool(t)
		if err != nil {
			return params, model.Wrap(model.ErrInvalidRequest, "anthropic: tool %q: %v", t.Name, err)
		}
		params.Tools = append(params.Tools, tool)
	}
	return params, nil
}

// toMessages maps the neutral history to the API's strictly alternating
// user/assistant turns: tool results go into a user turn (first, as the
// API wants), consecutive user content is merged, and an assistant turn
// with nothing in it is given a placeholder.
func toMessages(msgs []model.Message) []sdk.MessageParam {
	var out []sdk.MessageParam
	appendBlocks := func(role sdk.MessageParamRole, blocks ...sdk.ContentBlockParamUnion) {
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, sdk.MessageParam{Role: role, Content: blocks})
	}
	for _, m := range msgs {
		switch m.Role {
		case model.RoleAssistant:
			var blocks []sdk.ContentBlockParamUnion
			if strings.TrimSpace(m.Content) != "" {
				blocks = append(blocks, sdk.NewTextBlock(m.Content))
			}
			for _, c := range m.ToolCalls {
				args := c.Args
				if len(args) == 0 || !json.Valid(args) {
					args = json.RawMessage("{}")
				}
				blocks = append(blocks, sdk.NewToolUseBlock(c.ID, args, c.Name))
			}
			if len(blocks) == 0 {
				blocks = append(blocks, sdk.NewTextBlock("(no answer)"))
			}
			appendBlocks(sdk.MessageParamRoleAssistant, blocks...)
		case model.RoleTool:
			res := sdk.ToolResultBlockParam{ToolUseID: m.ToolCallID, IsError: sdk.Bool(m.IsError)}
			text := m.Content
			if text == "" && len(m.Images) == 0 {
				text = "(no output)"
			}
			if text != "" {
				res.Content = append(res.Content, sdk.ToolResultBlockParamContentUnion{OfText: &sdk.TextBlockParam{Text: text}})
			}
			for _, img := range m.Images {
				b := sdk.NewImageBlockBase64(img.MimeType, base64.StdEncoding.EncodeToString(img.Data))
				res.Content = append(res.Content, sdk.ToolResultBlockParamContentUnion{OfImage: b.OfImage})
			}
			block := sdk.ContentBlockParamUnion{OfToolResult: &res}
			// Tool results lead their user turn.
			if n := len(out); n > 0 && out[n-1].Role == sdk.MessageParamRoleUser {
				last := &out[n-1]
				i := 0
				for i < len(last.Content) && last.Content[i].OfToolResult != nil {
					i++
				}
				last.Content = append(last.Content[:i], append([]sdk.ContentBlockParamUnion{block}, last.Content[i:]...)...)
			} else {
				appendBlocks(sdk.MessageParamRoleUser, block)
			}
		default:
			var blocks []sdk.ContentBlockParamUnion
			for _, img := range m.Images {
				blocks = append(blocks, sdk.NewImageBlockBase64(img.MimeType, base64.StdEncoding.EncodeToString(img.Data)))
			}
			text := m.Content
			if strings.TrimSpace(text) == "" && len(blocks) == 0 {
				text = "(empty message)"
			}
			if text != "" {
				blocks = append(blocks, sdk.NewTextBlock(text))
			}
			appendBlocks(sdk.MessageParamRoleUser, blocks...)
		}
	}
	if len(out) > 0 && out[0].Role != sdk.MessageParamRoleUser {
		out = append([]sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("(the conversation continues)"))}, out...)
	}
	return out
}

func toTool(t model.ToolSpec) (sdk.ToolUnionParam, error) {
	var s map[string]any
	if len(t.Parameters) > 0 {
		if err := json.Unmarshal(t.Parameters, &s); err != nil {
			return sdk.ToolUnionParam{}, fmt.Errorf("parameters schema: %w", err)
		}
	}
	schema := sdk.ToolInputSchemaParam{Properties: map[string]any{}}
	if props, ok := s["properties"]; ok {
		schema.Properties = props
	}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				schema.Required = append(schema.Required, name)
			}
		}
	}
	for k, v := range s {
		if k != "type" && k != "properties" && k != "required" {
			if schema.ExtraFields == nil {
				schema.ExtraFields = map[string]any{}
			}
			schema.ExtraFields[k] = v
		}
	}
	tool := sdk.ToolParam{Name: t.Name, InputSchema: schema}
	if t.Description != "" {
		tool.Description = sdk.String(t.Description)
	}
	return sdk.ToolUnionParam{OfTool: &tool}, nil
}

// classify maps client errors to the model package's sentinels, keeping a
// message readable in a channel.
func (p *Provider) classify(ctx context.Context, name string, err error) error {
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return ctx.Err()
	}
	var ae *sdk.Error
	if errors.As(err, &ae) {
		msg := apiMessage(ae)
		typ := string(ae.Type())
		switch {
		case isOverflow(msg):
			return fmt.Errorf("anthropic: %s: %w", msg, model.ErrContextOverflow)
		case ae.StatusCode == http.StatusNotFound || typ == "not_found_error":
			return model.Wrap(model.ErrModelNotFound, "model %q not found at %s: %s", name, p.base, msg)
		case typ == "overloaded_error" || typ == "rate_limit_error" || typ == "api_error" ||
			ae.StatusCode == http.StatusTooManyRequests || ae.StatusCode >= 500:
			if model.Overloaded(ae.StatusCode) || typ == "overloaded_error" || typ == "rate_limit_error" {
				return &model.TransientError{Err: model.Wrap(model.ErrOverloaded, "anthropic: HTTP %d %s: %s", ae.StatusCode, typ, msg)}
			}
			return &model.TransientError{Err: fmt.Errorf("anthropic: HTTP %d %s: %s", ae.StatusCode, typ, msg)}
		case ae.StatusCode == http.StatusUnauthorized || typ == "authentication_error":
			return model.Wrap(model.ErrAuth, "anthropic: authentication failed (check providers.anthropic.apiKey): %s", msg)
		}
		return fmt.Errorf("anthropic: HTTP %d %s: %s", ae.StatusCode, typ, msg)
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return model.Wrap(model.ErrUnreachable, "Anthropic API at %s: %v", p.base, oe.Err)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return &model.TransientError{Err: fmt.Errorf("anthropic: stream cut: %w", err)}
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return model.Wrap(model.ErrUnreachable, "Anthropic API at %s: %v", p.base, ne)
	}
	if isOverflow(err.Error()) {
		return fmt.Errorf("anthropic: %v: %w", err, model.ErrContextOverflow)
	}
	return &model.TransientError{Err: fmt.Errorf("anthropic: %w", err)}
}

// apiMessage extracts error.message from the API's error body.
func apiMessage(ae *sdk.Error) string {
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(ae.RawJSON()), &body) == nil && body.Error.Message != "" {
		return body.Error.Message
	}
	if ae.Response != nil {
		return ae.Response.Status
	}
	return "error"
}

func isOverflow(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "prompt is too long") || strings.Contains(m, "context window") ||
		strings.Contains(m, "exceed context limit") || strings.Contains(m, "context length")
}
