// Package openai is the model.Provider for a server that speaks OpenAI's
// chat-completions API: vLLM, SGLang, llama.cpp's llama-server, LM Studio,
// OpenRouter, OpenAI itself. One Provider is one configured endpoint
// (providers.openai.<name>); it streams answers with thinking, tool calls
// and images, and maps errors to the pkg/model sentinels.
//
// The client library is github.com/sashabaranov/go-openai (v1.43.0),
// chosen over the official github.com/openai/openai-go/v3 (v3.98.0) by
// measurement (linux/amd64, 2 cores, a program making one streamed call
// with tools, compared with a hello world):
//
//	                 size added        cold build        compiler
//	                 -s -w   plain     CPU added         peak memory
//	go-openai        5.0 MB   7.0 MB    37 s              0.3 GB
//	openai-go v3    23.3 MB  33.2 MB   179 s              2.7 GB
//
// Mother's own binary is 66 MB stripped, so the official client would make
// it a third bigger on the Pi (its package initialisation alone keeps 18.5
// MB of generated API linked). go-openai has no dependencies and no
// retries. Its types cannot say everything the servers need (an assistant
// turn with tool calls and no text as "content": "", which llama.cpp
// before 2025 and some gateways want; extra body fields), and it does not
// read "reasoning" (only "reasoning_content"), an error inside a chunk or
// Retry-After. So the library builds the request (URL, key), reads the
// event stream (RecvRaw) and decodes error answers, and this package
// writes the body (wire.go), decodes the chunks (stream.go), and sends
// through its own HTTPDoer, which puts the body in, adds the headers and
// keeps the status and Retry-After of an error answer.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/model"
)

// DefaultContextWindow is the window of a model the server does not
// report, when Options.ContextWindow is 0.
const DefaultContextWindow = 32768

// Options configure one endpoint. They come from config.OpenAI, as plain
// values (this package does not import pkg/config).
type Options struct {
	// Name is the endpoint's name in config ("vllm"), for messages.
	Name string
	// BaseURL is the API base with its /v1 ("http://127.0.0.1:8000/v1",
	// "https://openrouter.ai/api/v1").
	BaseURL string
	// APIKey is the bearer key; empty sends none (local servers).
	APIKey string
	// Headers are set on every request (OpenRouter's HTTP-Referer and
	// X-Title).
	Headers map[string]string
	// ContextWindow is the window of a model the server does not report
	// and Models does not set; 0 means DefaultContextWindow.
	ContextWindow int
	// Models are per-model settings, by the model's id on the server.
	Models map[string]ModelOptions
	// HTTPClient is nil for http.DefaultClient.
	HTTPClient *http.Client
	// Clock reads the time for Retry-After dates (default clock.Real).
	Clock clock.Clock
}

// ModelOptions are one model's settings.
type ModelOptions struct {
	// ContextWindow in tokens; 0 asks the server.
	ContextWindow int
	// Options are extra fields of every request body for this model
	// ("temperature", "top_p", "top_k", "chat_template_kwargs"...), sent as
	// they are. This is also where thinking is turned off for a server
	// that needs telling: vLLM and SGLang serving Qwen3 take
	// "chat_template_kwargs": {"enable_thinking": false}. The provider
	// sends nothing for model.Request.Think itself (see Chat).
	Options map[string]any
}

// ModelInfo is a model the server lists.
type ModelInfo struct {
	ID string
	// ContextWindow is what the list says of the model's window (vLLM's
	// max_model_len, OpenRouter's context_length, llama.cpp's n_ctx_train
	// capped at MaxTrainedWindow); 0 when it says nothing.
	ContextWindow int
}

// Provider talks to one OpenAI-compatible endpoint. It is safe for
// concurrent use.
type Provider struct {
	name    string
	base    string // the API base, with its /v1, without a trailing slash
	key     string
	headers map[string]string
	window  int
	http    *http.Client
	clock   clock.Clock
	client  *goopenai.Client
	// models holds each configured model's window and its options as
	// body fields ready to be added (fields).
	models map[string]modelConfig
	// capField is the name the output cap is sent under (capFieldFor).
	capField string

	estimated atomic.Int64
	// noTokenize is set once the server showed it has no chat /tokenize
	// (tokenize.go).
	noTokenize atomic.Bool

	mu      sync.Mutex
	windows map[string]int
}

type modelConfig struct {
	window int
	// fields is `"key":value,...`, the model's options as JSON object
	// members in key order, to add to the request body.
	fields []byte
	// capsOutput is set when the options carry their own output cap.
	capsOutput bool
}

var (
	_ model.Provider        = (*Provider)(nil)
	_ model.ContextWindower = (*Provider)(nil)
	_ model.TokenCounter    = (*Provider)(nil)
)

// reserved are the body fields the provider writes itself; a model's
// options may not set them.
var reserved = map[string]bool{"model": true, "messages": true, "tools": true, "stream": true, "stream_options": true}

// New returns a provider for the endpoint o describes.
func New(o Options) (*Provider, error) {
	name := o.Name
	if name == "" {
		name = "openai"
	}
	base, err := normalizeBaseURL(o.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("openai: %s: %w", name, err)
	}
	p := &Provider{
		name: name, base: base, key: o.APIKey, headers: o.Headers,
		window: o.ContextWindow, http: o.HTTPClient, clock: clock.OrReal(o.Clock), capField: capFieldFor(base),
		models: map[string]modelConfig{}, windows: map[string]int{},
	}
	if p.window <= 0 {
		p.window = DefaultContextWindow
	}
	if p.http == nil {
		p.http = http.DefaultClient
	}
	for id, mo := range o.Models {
		mc := modelConfig{window: mo.ContextWindow}
		keys := make([]string, 0, len(mo.Options))
		for k := range mo.Options {
			if reserved[k] {
				return nil, fmt.Errorf("openai: %s: model %q: option %q is written by Mother; remove it", name, id, k)
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			kj, _ := json.Marshal(k)
			vj, err := json.Marshal(mo.Options[k])
			if err != nil {
				return nil, fmt.Errorf("openai: %s: model %q: option %q: %w", name, id, k, err)
			}
			if len(mc.fields) > 0 {
				mc.fields = append(mc.fields, ',')
			}
			mc.fields = append(append(append(mc.fields, kj...), ':'), vj...)
			if k == "max_tokens" || k == "max_completion_tokens" {
				mc.capsOutput = true
			}
		}
		p.models[id] = mc
	}
	cfg := goopenai.DefaultConfig(o.APIKey)
	cfg.BaseURL = base
	cfg.HTTPClient = doer{p}
	// Lines other than data lines (blank separators, a proxy's keep-alive
	// comments such as OpenRouter's ": OPENROUTER PROCESSING") count
	// against this between two chunks; a model that takes minutes to
	// start answering must not hit it.
	cfg.EmptyMessagesLimit = 1 << 20
	p.client = goopenai.NewClientWithConfig(cfg)
	return p, nil
}

// normalizeBaseURL checks raw and returns it without a trailing slash. The
// path is kept as it is: it is the API base ("/v1", "/api/v1").
func normalizeBaseURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", errors.New("no base URL")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("base URL %q: scheme must be http or https", raw)
	}
	if u.Host == "" {
		return "", fmt.Errorf("base URL %q: no host", raw)
	}
	return strings.TrimRight(raw, "/"), nil
}

// capFieldFor is the field the output cap goes in. OpenAI's own API has
// deprecated max_tokens and refuses it for its reasoning models (o-series,
// gpt-5), which take max_completion_tokens; every other server here takes
// max_tokens, while max_completion_tokens is newer and not read by all of
// them (a field a server does not know is ignored, and the cap lost), so
// they get max_tokens. A model's options may carry either field instead.
func capFieldFor(base string) string {
	if u, err := url.Parse(base); err == nil && u.Hostname() == "api.openai.com" {
		return "max_completion_tokens"
	}
	return "max_tokens"
}

// where names the endpoint in messages: "vllm at http://gpu:8000/v1".
func (p *Provider) where() string { return p.name + " at " + p.base }

// EstimatedCalls counts the calls whose usage the server did not report
// (older llama.cpp builds, some proxies): their Response.Usage is an
// estimate, about a token per four bytes of the request's text and of the
// answer's (see estimate).
func (p *Provider) EstimatedCalls() int64 { return p.estimated.Load() }

// Chat streams one call to POST {base}/chat/completions.
//
// Thinking: req.Think is not sent. There is no field every server reads
// (vLLM and SGLang want chat_template_kwargs, whose keys depend on the
// model's template; llama.cpp decides at start-up; OpenRouter has its own
// "reasoning" object), and a field a server does not know is refused by
// some of them. A model that must be told not to think is told so by its
// ModelOptions.Options, which go with every call.
//
// Usage is the server's, from whichever chunk carries it. A server that
// sends none (older llama.cpp builds, some proxies) gets an estimate (see
// estimate), and the call is counted by EstimatedCalls; StopReason is the
// server's finish_reason either way.
func (p *Provider) Chat(ctx context.Context, req model.Request, onDelta func(model.Delta)) (model.Response, error) {
	body, err := p.body(req)
	if err != nil {
		return model.Response{}, err
	}
	c := &call{body: body}
	// The library's request names the model and asks for a stream; the
	// body it writes from it is replaced by body on the way out (doer).
	creq := goopenai.ChatCompletionRequest{Model: req.Model, Stream: true}
	stream, err := p.client.CreateChatCompletionStream(withCall(ctx, c), creq)
	if err != nil {
		return model.Response{}, p.classify(ctx, req.Model, c, err)
	}
	defer stream.Close()
	var a assembly
	for {
		raw, err := stream.RecvRaw()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return model.Response{}, p.streamError(ctx, req.Model, err)
		}
		if err := a.add(raw, onDelta); err != nil {
			var se *serverError
			if errors.As(err, &se) {
				return model.Response{}, p.fromServer(req.Model, *se, true)
			}
			return model.Response{}, &model.TransientError{Err: fmt.Errorf("openai: %s: %w", p.where(), err)}
		}
	}
	if ctx.Err() != nil {
		return model.Response{}, ctx.Err()
	}
	if a.finish == "" {
		return model.Response{}, &model.TransientError{Err: fmt.Errorf("openai: %s: the stream ended before the answer was complete", p.where())}
	}
	resp := model.Response{
		Message:    model.Message{Role: model.RoleAssistant, Content: a.text.String(), ToolCalls: a.toolCalls()},
		StopReason: a.finish,
	}
	if a.usage != nil {
		resp.Usage = model.Usage{InputTokens: a.usage.PromptTokens, OutputTokens: a.usage.CompletionTokens}
	} else {
		resp.Usage = estimate(req, &a)
		p.estimated.Add(1)
	}
	if a.finish == "length" && a.text.Len() == 0 && len(resp.Message.ToolCalls) == 0 {
		return resp, fmt.Errorf("openai: %s: the answer was cut at its length limit before any of it came: %w", p.where(), model.ErrContextOverflow)
	}
	return resp, nil
}
