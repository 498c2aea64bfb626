// Package anthropictest is a fake Anthropic API for tests: it speaks the
// real wire protocol (POST /v1/messages answered with server-sent events,
// POST /v1/messages/count_tokens, GET /v1/models/{id}) on a loopback
// socket, so the real client library is exercised.
package anthropictest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"time"
)

// APIKey is the key the fake accepts unless SetAPIKey changes it.
const APIKey = "sk-ant-test"

// Call is a tool call the fake model makes.
type Call struct {
	Name string
	Args map[string]any
}

// Turn is one scripted answer to POST /v1/messages.
type Turn struct {
	// Text is streamed as text_delta events of ChunkSize runes (default 4).
	Text      string
	ChunkSize int
	Calls     []Call
	// Status, when non-zero, answers with this HTTP status and an error
	// body of ErrorType ("overloaded_error", "invalid_request_error", ...)
	// and Error (the message).
	Status    int
	ErrorType string
	Error     string
	// StreamError sends an SSE error event of ErrorType/Error after the
	// text, as the API does when it overloads mid-answer.
	StreamError bool
	// StopReason defaults to "tool_use" with calls and "end_turn" without.
	StopReason string
	// InputTokens and OutputTokens are reported in the usage.
	InputTokens, OutputTokens int
	// Delay waits before answering (honouring the client going away).
	Delay time.Duration
	// Truncate ends the stream before message_delta and message_stop.
	Truncate bool
}

// Request is a received messages request, decoded loosely.
type Request struct {
	Model     string            `json:"model"`
	MaxTokens int               `json:"max_tokens"`
	System    []Block           `json:"system"`
	Messages  []Message         `json:"messages"`
	Tools     []json.RawMessage `json:"tools"`
	Stream    bool              `json:"stream"`
	// Header holds the request's headers.
	Header http.Header `json:"-"`
}

// Message is one message of a received request.
type Message struct {
	Role    string  `json:"role"`
	Content []Block `json:"content"`
}

// Block is a content block of a received request.
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Content   []Block         `json:"content,omitempty"`
	Source    *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source,omitempty"`
}

// SystemText joins the system blocks.
func (r Request) SystemText() string {
	var parts []string
	for _, b := range r.System {
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n")
}

// LastUserText returns the text blocks of the last user message.
func (r Request) LastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			var parts []string
			for _, b := range r.Messages[i].Content {
				if b.Type == "text" {
					parts = append(parts, b.Text)
				}
			}
			return strings.Join(parts, "\n")
		}
	}
	return ""
}

// Count is the answer to one POST /v1/messages/count_tokens.
type Count struct {
	// InputTokens is the count answered.
	InputTokens int
	// Status, when non-zero, answers with this HTTP status and an error
	// body of ErrorType (default "api_error") and Error.
	Status    int
	ErrorType string
	Error     string
	// Delay waits before answering (honouring the client going away).
	Delay time.Duration
}

// DefaultCount is the fake's count when SetCounter set none: a token per
// 4 bytes of the system text, the messages' text, tool inputs and
// results and the tools' JSON, plus 8 per message, 346 when tools are
// offered (Anthropic's tool-use system prompt) and 4 for the request.
func DefaultCount(r Request) int {
	n := 4 + len(r.SystemText())/4
	var blocks func([]Block)
	blocks = func(bs []Block) {
		for _, b := range bs {
			n += (len(b.Text) + len(b.Input) + len(b.Name)) / 4
			if b.Source != nil {
				n += 85
			}
			blocks(b.Content)
		}
	}
	for _, m := range r.Messages {
		n += 8
		blocks(m.Content)
	}
	if len(r.Tools) > 0 {
		n += 346
	}
	for _, t := range r.Tools {
		n += len(t) / 4
	}
	return n
}

// Server is the fake.
type Server struct {
	*httptest.Server

	mu       sync.Mutex
	handler  func(Request) Turn
	turns    []Turn
	requests []Request
	key      string
	// models known to the API; empty: any model.
	models   map[string]bool
	maxInput int
	seq      int
	counter  func(Request) Count
	counts   []Request
}

// New starts a fake that answers with turns in order; after the script
// runs out it answers "(no more scripted turns)".
func New(turns ...Turn) *Server {
	s := &Server{turns: turns, key: APIKey, maxInput: 200000}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// NewFunc starts a fake whose answers come from h.
func NewFunc(h func(Request) Turn) *Server {
	s := New()
	s.handler = h
	return s
}

// Push appends scripted turns.
func (s *Server) Push(turns ...Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turns = append(s.turns, turns...)
}

// SetModels restricts the known models; others get 404 not_found_error.
func (s *Server) SetModels(names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = map[string]bool{}
	for _, n := range names {
		s.models[n] = true
	}
}

// SetMaxInputTokens sets what the Models API reports as max_input_tokens.
func (s *Server) SetMaxInputTokens(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxInput = n
}

// SetAPIKey sets the key the fake accepts.
func (s *Server) SetAPIKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = key
}

// SetCounter sets how POST /v1/messages/count_tokens answers (nil:
// DefaultCount).
func (s *Server) SetCounter(f func(Request) Count) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counter = f
}

// CountRequests returns the count_tokens requests received so far.
func (s *Server) CountRequests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.counts...)
}

// Requests returns the messages requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	key := s.key
	s.mu.Unlock()
	if r.Header.Get("x-api-key") != key {
		apiError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	}
	if r.Header.Get("anthropic-version") == "" {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version header is required")
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		s.messages(w, r)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		s.countTokens(w, r)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/models/"):
		s.model(w, strings.TrimPrefix(r.URL.Path, "/v1/models/"))
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		s.modelList(w)
	default:
		apiError(w, http.StatusNotFound, "not_found_error", "no route "+r.Method+" "+r.URL.Path)
	}
}

func (s *Server) known(model string) bool { return len(s.models) == 0 || s.models[model] }

func (s *Server) model(w http.ResponseWriter, id string) {
	s.mu.Lock()
	known, n := s.known(id), s.maxInput
	s.mu.Unlock()
	if !known {
		apiError(w, http.StatusNotFound, "not_found_error", "model: "+id)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": id, "type": "model", "display_name": id, "created_at": "2025-01-01T00:00:00Z",
		"max_input_tokens": n, "max_tokens": 64000,
	})
}

// modelList answers GET /v1/models: the models SetModels named, sorted,
// in one page.
func (s *Server) modelList(w http.ResponseWriter) {
	s.mu.Lock()
	names := make([]string, 0, len(s.models))
	for n := range s.models {
		names = append(names, n)
	}
	s.mu.Unlock()
	sort.Strings(names)
	data := []map[string]any{}
	for _, n := range names {
		data = append(data, map[string]any{"id": n, "type": "model", "display_name": n, "created_at": "2025-01-01T00:00:00Z"})
	}
	var first, last any
	if len(names) > 0 {
		first, last = names[0], names[len(names)-1]
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data, "has_more": false, "first_id": first, "last_id": last})
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	var req Request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "bad JSON: "+err.Error())
		return
	}
	req.Header = r.Header.Clone()
	if msg := validate(req); msg != "" {
		apiError(w, http.StatusBadRequest, "invalid_request_error", msg)
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, req)
	known := s.known(req.Model)
	var turn Turn
	switch {
	case !known, s.handler != nil:
	case len(s.turns) > 0:
		turn, s.turns = s.turns[0], s.turns[1:]
	default:
		turn = Turn{Text: "(no more scripted turns)"}
	}
	h := s.handler
	s.seq++
	id := fmt.Sprintf("msg_%04d", s.seq)
	s.mu.Unlock()
	if !known {
		apiError(w, http.StatusNotFound, "not_found_error", "model: "+req.Model)
		return
	}
	if h != nil {
		turn = h(req)
	}
	if turn.Delay > 0 {
		select {
		case <-time.After(turn.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if turn.Status != 0 {
		typ := turn.ErrorType
		if typ == "" {
			typ = "api_error"
		}
		apiError(w, turn.Status, typ, turn.Error)
		return
	}
	if !req.Stream {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "this fake only streams")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("request-id", "req_"+id)
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(event string, v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if fl != nil {
			fl.Flush()
		}
	}
	in := turn.InputTokens
	if in == 0 {
		in = 10 + len(strings.Fields(req.LastUserText()))
	}
	out := turn.OutputTokens
	if out == 0 {
		out = 1 + len(strings.Fields(turn.Text)) + 5*len(turn.Calls)
	}
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": in, "output_tokens": 1},
	}})
	send("ping", map[string]any{"type": "ping"})
	idx := 0
	if turn.Text != "" {
		send("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
		size := turn.ChunkSize
		if size <= 0 {
			size = 4
		}
		runes := []rune(turn.Text)
		for i := 0; i < len(runes); i += size {
			j := min(i+size, len(runes))
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "text_delta", "text": string(runes[i:j])}})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	if turn.StreamError {
		typ := turn.ErrorType
		if typ == "" {
			typ = "overloaded_error"
		}
		send("error", map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": turn.Error}})
		return
	}
	for i, c := range turn.Calls {
		args := c.Args
		if args == nil {
			args = map[string]any{}
		}
		b, _ := json.Marshal(args)
		send("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{
			"type": "tool_use", "id": fmt.Sprintf("toolu_%s_%d", id, i+1), "name": c.Name, "input": map[string]any{}}})
		// Stream the arguments in two pieces, as partial JSON.
		half := len(b) / 2
		for _, part := range []string{string(b[:half]), string(b[half:])} {
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	if turn.Truncate {
		return
	}
	stop := turn.StopReason
	if stop == "" {
		stop = "end_turn"
		if len(turn.Calls) > 0 {
			stop = "tool_use"
		}
	}
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": out}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// countTokens answers POST /v1/messages/count_tokens as the API does:
// the request is a messages request without max_tokens or stream (model,
// messages, system, tools), the answer {"input_tokens": N}.
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	var raw map[string]json.RawMessage
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &raw)
	}
	if err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "bad JSON: "+err.Error())
		return
	}
	for _, k := range []string{"max_tokens", "stream"} {
		if _, ok := raw[k]; ok {
			apiError(w, http.StatusBadRequest, "invalid_request_error", k+": Extra inputs are not permitted")
			return
		}
	}
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "bad JSON: "+err.Error())
		return
	}
	req.Header = r.Header.Clone()
	if req.Model == "" {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "model: Field required")
		return
	}
	if msg := validateMessages(req); msg != "" {
		apiError(w, http.StatusBadRequest, "invalid_request_error", msg)
		return
	}
	s.mu.Lock()
	s.counts = append(s.counts, req)
	known, f := s.known(req.Model), s.counter
	s.mu.Unlock()
	if !known {
		apiError(w, http.StatusNotFound, "not_found_error", "model: "+req.Model)
		return
	}
	c := Count{InputTokens: DefaultCount(req)}
	if f != nil {
		c = f(req)
	}
	if c.Delay > 0 {
		select {
		case <-time.After(c.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if c.Status != 0 {
		typ := c.ErrorType
		if typ == "" {
			typ = "api_error"
		}
		apiError(w, c.Status, typ, c.Error)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"input_tokens": c.InputTokens})
}

// validate checks what the real API rejects and a client bug could
// produce: roles that do not alternate, tool results that do not answer
// the previous turn's tool calls.
func validate(r Request) string {
	if r.Model == "" || r.MaxTokens <= 0 {
		return "model and max_tokens are required"
	}
	return validateMessages(r)
}

// validateMessages checks the messages of a request as validate does.
func validateMessages(r Request) string {
	if len(r.Messages) == 0 {
		return "messages: at least one message is required"
	}
	if r.Messages[0].Role != "user" {
		return "messages: first message must use the \"user\" role"
	}
	for i, m := range r.Messages {
		if len(m.Content) == 0 {
			return fmt.Sprintf("messages.%d: content must not be empty", i)
		}
		if i > 0 && r.Messages[i-1].Role == m.Role {
			return fmt.Sprintf("messages.%d: roles must alternate between \"user\" and \"assistant\"", i)
		}
		calls := map[string]bool{}
		if i > 0 {
			for _, b := range r.Messages[i-1].Content {
				if b.Type == "tool_use" {
					calls[b.ID] = true
				}
			}
		}
		seenOther := false
		for _, b := range m.Content {
			switch b.Type {
			case "tool_result":
				if seenOther {
					return fmt.Sprintf("messages.%d: tool_result blocks must come first", i)
				}
				if !calls[b.ToolUseID] {
					return fmt.Sprintf("messages.%d: tool_result for unknown tool_use id %s", i, b.ToolUseID)
				}
				delete(calls, b.ToolUseID)
			default:
				seenOther = true
			}
		}
		if m.Role == "user" && len(calls) > 0 {
			return fmt.Sprintf("messages.%d: tool_use ids without tool_result: %v", i, calls)
		}
	}
	return ""
}

func apiError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
