package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/mother-chat/mother/pkg/model"
)

// StatusError is an error answer worth another attempt: its HTTP status
// (or the code of an error written into the stream, 0 when it had none),
// how long the server asked to wait (Retry-After; 0 when it did not say)
// and its message. It comes wrapped in a *model.TransientError; a caller
// reads it with errors.As(err, &se) where se is a *StatusError.
type StatusError struct {
	Code       int
	RetryAfter time.Duration
	Msg        string
}

// Is makes a 429, 503 or 529 match model.ErrOverloaded, so a fallback
// takes the call.
func (e *StatusError) Is(target error) bool {
	return target == model.ErrOverloaded && model.Overloaded(e.Code)
}

func (e *StatusError) Error() string {
	s := "HTTP " + strconv.Itoa(e.Code)
	if e.Code == 0 {
		s = "error in the stream"
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.RetryAfter > 0 {
		s += " (retry after " + e.RetryAfter.String() + ")"
	}
	return s
}

// transientStatus reports whether an HTTP status is worth another
// attempt: 429 (rate limit), 529 (overloaded) and the 5xx of a server or
// proxy in trouble (502, 503 while a model loads, 504, Cloudflare's 52x),
// but not 501 (the server does not do this, and will not).
func transientStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == 529 ||
		(code >= 500 && code <= 599 && code != http.StatusNotImplemented)
}

// classify maps an error from starting a call (before the stream) to the
// model package's sentinels, keeping the message readable in a channel.
func (p *Provider) classify(ctx context.Context, name string, c *call, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var apiErr *goopenai.APIError
	var reqErr *goopenai.RequestError
	switch {
	case errors.As(err, &apiErr) && apiErr.HTTPStatusCode > 0:
		// The body was {"error": {"message"...}}, read by the library.
		return p.fromServer(name, withRetry(fromAPIError(apiErr), c), false)
	case errors.As(err, &reqErr):
		// Another body: read here.
		return p.fromServer(name, withRetry(parseErrorBody(reqErr.HTTPStatusCode, reqErr.Body), c), false)
	case c != nil && !c.sent:
		// The library refused the request before sending it.
		return model.Wrap(model.ErrInvalidRequest, "openai: %s: %v", p.where(), err)
	}
	return p.netError(err)
}

// fromAPIError is the library's reading of an error object.
func fromAPIError(ae *goopenai.APIError) serverError {
	e := serverError{status: ae.HTTPStatusCode, typ: ae.Type, msg: ae.Message}
	if ae.Code != nil {
		e.code = fmt.Sprint(ae.Code)
	}
	return e
}

// withRetry adds to e the status and the Retry-After the doer kept.
func withRetry(e serverError, c *call) serverError {
	if c != nil {
		if e.status == 0 {
			e.status = c.status
		}
		e.retry = c.retryAfter
	}
	return e
}

// streamError maps an error reading the stream: an error line the library
// recognised, or the connection failing mid-answer.
func (p *Provider) streamError(ctx context.Context, name string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var apiErr *goopenai.APIError
	if errors.As(err, &apiErr) {
		return p.fromServer(name, fromAPIError(apiErr), true)
	}
	// Whatever else stops a stream that had begun (a reset, a cut, a read
	// timeout) is worth another attempt.
	return &model.TransientError{Err: fmt.Errorf("openai: %s: the stream was cut: %w", p.where(), err)}
}

// netError maps an error that got no answer from the server.
func (p *Provider) netError(err error) error {
	// A connection the server dropped (EOF before an answer, a reset) is a
	// hiccup worth another attempt; one it refused, or a host that does
	// not answer, is a server that is down.
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		return &model.TransientError{Err: fmt.Errorf("openai: %s dropped the connection: %w", p.where(), err)}
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return model.Wrap(model.ErrUnreachable, "%s: %v", p.where(), oe.Err)
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return model.Wrap(model.ErrUnreachable, "%s: %v", p.where(), ne)
	}
	return &model.TransientError{Err: fmt.Errorf("openai: %s: %w", p.where(), err)}
}

// fromServer maps an error the server sent. status is its HTTP status, or
// 0 for an error written into a stream that had begun (midStream); such
// an error with a number for its code (vLLM writes the status there) is
// read as that status.
func (p *Provider) fromServer(name string, e serverError, midStream bool) error {
	status := e.status
	if status == 0 {
		if n, err := strconv.Atoi(e.code); err == nil && n >= 400 && n <= 599 {
			status = n
		}
	}
	msg := e.msg
	if msg == "" {
		msg = http.StatusText(status)
	}
	code := strings.ToLower(e.code)
	switch {
	case code == "context_length_exceeded" || e.typ == "exceed_context_size_error" || isOverflow(msg) ||
		status == http.StatusRequestEntityTooLarge:
		return fmt.Errorf("openai: %s: %s: %w", p.where(), msg, model.ErrContextOverflow)
	case transientStatus(status) || isTransientCode(code, e.typ) || (midStream && status == 0):
		return &model.TransientError{Err: fmt.Errorf("openai: %s: %w", p.where(), &StatusError{Code: status, RetryAfter: e.retry, Msg: msg})}
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		if p.key == "" {
			return model.Wrap(model.ErrAuth, "openai: %s wants a key and none is set (providers.openai.%s.apiKey or apiKeyEnv): HTTP %d: %s", p.where(), p.name, status, msg)
		}
		return model.Wrap(model.ErrAuth, "openai: the key was refused by %s (HTTP %d): %s", p.where(), status, msg)
	case status == http.StatusNotFound || code == "model_not_found" || modelMissing(msg):
		hint := ""
		if !strings.Contains(strings.ToLower(msg), "model") {
			hint = " (is the base URL right? it ends in the API's /v1)"
		}
		return model.Wrap(model.ErrModelNotFound, "model %q not found on %s: %s%s", name, p.where(), msg, hint)
	}
	if status == 0 {
		return fmt.Errorf("openai: %s: %s", p.where(), msg)
	}
	return fmt.Errorf("openai: %s: HTTP %d: %s", p.where(), status, msg)
}

// isTransientCode reports whether an error object's code or type says the
// server is in trouble rather than the request wrong.
func isTransientCode(code, typ string) bool {
	switch code {
	case "rate_limit_exceeded", "server_error", "overloaded", "overloaded_error", "service_unavailable", "timeout":
		return true
	}
	switch typ {
	case "server_error", "unavailable_error", "InternalServerError", "ServiceUnavailableError", "overloaded_error":
		return true
	}
	return false
}

// isOverflow reports whether a message says the request does not fit the
// model's window, in the words of vLLM ("This model's maximum context
// length is 32768 tokens. However, you requested..."; "The decoder prompt
// (length ...) is longer than the maximum model length"), SGLang ("...is
// longer than the model's context length"), llama.cpp ("the request
// exceeds the available context size"), LM Studio ("...greater than the
// context length"), OpenAI and OpenRouter ("maximum context length").
func isOverflow(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{
		"context length", "maximum context", "context window", "context size",
		"maximum model length", "too many tokens", "prompt is too long", "context_length_exceeded",
	} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// modelMissing reports whether a message says the model is not there
// (vLLM: "The model `x` does not exist."; OpenRouter: "x is not a valid
// model ID"; LM Studio and others: "model not found").
func modelMissing(msg string) bool {
	m := strings.ToLower(msg)
	if !strings.Contains(m, "model") {
		return false
	}
	for _, s := range []string{"does not exist", "not found", "not a valid model", "no such model", "unknown model"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}
