// Package model is the small contract between the agent loop and the model
// providers (Ollama, Anthropic, and the broker a chick calls over gRPC).
//
// It holds the provider-neutral message and tool types; provider packages
// translate them to their wire formats.
package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Role of a message in the model context.
type Role string

// Roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Image is an inline image for multimodal models.
type Image struct {
	MimeType string `json:"mimeType"`
	Data     []byte `json:"data"`
}

// ToolCall is a tool invocation requested by the model.
type ToolCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// Message is one entry of the model context.
type Message struct {
	Role      Role       `json:"role"`
	Content   string     `json:"content,omitempty"`
	Images    []Image    `json:"images,omitempty"`
	ToolCalls []ToolCall `json:"toolCalls,omitempty"`
	// ToolCallID and ToolName are set on RoleTool messages (results).
	ToolCallID string `json:"toolCallId,omitempty"`
	ToolName   string `json:"toolName,omitempty"`
	IsError    bool   `json:"isError,omitempty"`
}

// ToolSpec describes a tool to the model. Parameters is a JSON Schema
// object.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Request is one model call.
type Request struct {
	// Model is the provider's model id ("qwen3:14b", "claude-sonnet-4-5").
	Model    string
	System   string
	Messages []Message
	Tools    []ToolSpec
	// MaxOutputTokens caps the answer; 0 means the provider's default.
	MaxOutputTokens int
	// ContextWindow is the window (tokens) the caller plans the context
	// for; 0 means the model's default. Providers that size the context per
	// request (Ollama's num_ctx) use it, so a long context is not silently
	// cut on the server.
	ContextWindow int
	// Think is whether the model is asked to think before it answers
	// (ThinkAuto: the model's own default).
	Think Think
}

// Think is whether a model is asked to think (reason at length) before it
// answers. A provider asks only a model that can: what a model that
// cannot is sent does not change.
type Think string

// Think settings.
const (
	// ThinkAuto leaves it to the model: a model that can think does (and
	// its thoughts come apart from the answer), one that cannot does not.
	ThinkAuto Think = "auto"
	// ThinkOn asks a model that can think to think.
	ThinkOn Think = "on"
	// ThinkOff asks a model that can think not to.
	ThinkOff Think = "off"
)

// ParseThink reads a config value: "auto" (or empty), "on" or "off".
func ParseThink(s string) (Think, error) {
	switch Think(s) {
	case "", ThinkAuto:
		return ThinkAuto, nil
	case ThinkOn, ThinkOff:
		return Think(s), nil
	}
	return "", fmt.Errorf("%q is not a think setting: use \"auto\", \"on\" or \"off\"", s)
}

// Delta is a piece of a streamed answer: answer text, or thinking (what
// a reasoning model thinks before it answers, which never reaches a
// channel). One of the two is set.
type Delta struct {
	Text     string
	Thinking string
}

// Usage counts tokens of one call.
type Usage struct {
	InputTokens  int64 `json:"input"`
	OutputTokens int64 `json:"output"`
}

// Add returns u + o.
func (u Usage) Add(o Usage) Usage {
	return Usage{InputTokens: u.InputTokens + o.InputTokens, OutputTokens: u.OutputTokens + o.OutputTokens}
}

// Total is input plus output tokens.
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }

// Response is the complete answer of one call.
type Response struct {
	Message    Message
	Usage      Usage
	StopReason string
	// AnsweredBy is set when a fallback answered instead of the first
	// provider: "<provider>/<model>" (pkg/model/fallback).
	AnsweredBy string
}

// Overloaded reports whether an HTTP status means a server that cannot
// take the call now: 429, 503, 529.
func Overloaded(status int) bool { return status == 429 || status == 503 || status == 529 }

// Provider runs model calls. Chat streams the answer's text and thinking
// to onDelta (which may be nil) as they arrive and returns the whole
// answer. A provider that gets the thinking apart from the answer (Ollama's
// "thinking" field) streams it as Delta.Thinking and leaves it out of the
// response; thinking written inline in the text (a "<think>" block) is
// left to the caller (agent.Clean).
type Provider interface {
	Chat(ctx context.Context, req Request, onDelta func(Delta)) (Response, error)
}

// ContextWindower is implemented by providers that can tell a model's
// context length in tokens.
type ContextWindower interface {
	ContextWindow(ctx context.Context, model string) (int, error)
}

// TokenCounter is implemented by providers whose API counts a request's
// prompt tokens without making the call (Anthropic's
// /v1/messages/count_tokens). The count is the provider's own estimate:
// the call's reported usage may differ from it by a little.
type TokenCounter interface {
	CountTokens(ctx context.Context, req Request) (int, error)
}

// Pinger is implemented by providers that can tell, cheaply and without
// a model call, whether their server answers (Ollama's /api/version, an
// OpenAI-compatible server's /v1/models, Anthropic's Models API).
type Pinger interface {
	Ping(ctx context.Context) error
}

// ServerStatus is what the last ping of a model server found.
type ServerStatus struct {
	// Name is the provider as config names it ("ollama", "openai:vllm").
	Name string `json:"name"`
	// For says what uses it ("mother", "mother (fallback)", "tier local").
	For []string `json:"for"`
	Up  bool     `json:"up"`
	// Latency is the last ping's round trip.
	Latency   time.Duration `json:"latencyNs"`
	CheckedAt time.Time     `json:"checkedAt"`
	Error     string        `json:"error,omitempty"`
}

// ImageSupporter is implemented by providers that can tell whether a model
// accepts images. The agent drops images (with a note) for models that do
// not, rather than failing the call.
type ImageSupporter interface {
	SupportsImages(ctx context.Context, model string) (bool, error)
}

// Errors callers branch on. Providers wrap them with details.
var (
	// ErrContextOverflow means the request does not fit the model's window.
	ErrContextOverflow = errors.New("context window exceeded")
	// ErrBudgetExhausted means the broker refused the call on a budget.
	ErrBudgetExhausted = errors.New("budget exhausted")
	// ErrBusy means the broker refused the call for now: the chick has
	// as many calls in flight as it may, or a budget's rest is reserved by
	// calls in flight. The broker wraps it in a TransientError: the call
	// may succeed once those end.
	ErrBusy = errors.New("busy")
	// ErrModelNotFound means the provider does not know the model.
	ErrModelNotFound = errors.New("model not found")
	// ErrUnreachable means the provider could not be reached.
	ErrUnreachable = errors.New("model provider unreachable")
	// ErrOverloaded means the provider answered that it cannot take the
	// call now (HTTP 429, 503 or 529). Providers wrap it in a
	// TransientError; a fallback takes the call (pkg/model/fallback).
	ErrOverloaded = errors.New("model provider overloaded")
	// ErrInvalidRequest means the request cannot be sent as it is (a tool
	// whose parameters are not a schema the provider takes); sending it
	// again will not help.
	ErrInvalidRequest = errors.New("invalid model request")
)

// BudgetError is a call refused on one cap: errors.Is(err,
// ErrBudgetExhausted). It says which cap, and when it resets, so that
// whoever made the call can act on it (Mother pauses a periodic event
// until its cap resets).
type BudgetError struct {
	// Scope is the cap's kind ("chick", "channel", "tier", "user",
	// "mother", "mother-channel", "event") and Name what it caps (a
	// chick's id, a qualified channel, an event file; empty for
	// Mother's own daily cap).
	Scope, Name string
	// Unit is what the cap counts: "tokens" or "usd".
	Unit string
	// Reset is when a daily cap resets (zero for a cap that does not: a
	// chick's own).
	Reset time.Time
	// Msg says it all for a person.
	Msg string
}

func (e *BudgetError) Error() string { return e.Msg }

// Is makes a BudgetError match ErrBudgetExhausted.
func (e *BudgetError) Is(target error) bool { return target == ErrBudgetExhausted }

// TransientError marks an error worth retrying (5xx, overload, reset).
type TransientError struct{ Err error }

func (e *TransientError) Error() string { return fmt.Sprintf("transient: %v", e.Err) }
func (e *TransientError) Unwrap() error { return e.Err }

// IsTransient reports whether err is worth retrying.
func IsTransient(err error) bool {
	var t *TransientError
	return errors.As(err, &t)
}

// kindError is an error whose text is msg and which matches kind with
// errors.Is, without repeating kind's text.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// Wrap returns an error reading like fmt.Sprintf(format, args...) that
// errors.Is matches against kind (one of this package's sentinels).
func Wrap(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}
}
