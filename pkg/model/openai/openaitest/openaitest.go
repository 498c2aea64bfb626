// Package openaitest is a fake OpenAI-compatible server for tests: it
// speaks the real wire protocol (POST /v1/chat/completions answered as
// server-sent events, POST /v1/embeddings, GET /v1/models, llama.cpp's
// GET /props, vLLM's and llama.cpp's POST /tokenize) on a loopback
// socket, so the real client library is exercised.
//
// Answers are scripted as Turns: text and thinking streamed in small
// chunks, tool calls streamed in fragments the way vLLM and OpenAI send
// them (several calls interleaved), usage where the servers put it, and
// the failures they have: an error status with OpenAI's error body and a
// Retry-After, an error line in the middle of the stream, a stream cut
// short.
package openaitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Call is a tool call the fake model makes.
type Call struct {
	// ID defaults to "call_<n>" (n from 1, in the turn).
	ID   string
	Name string
	// Args are sent as their JSON; RawArgs, when set, is sent as it is
	// instead (arguments that are not valid JSON, say).
	Args    map[string]any
	RawArgs string
}

// Usage is the token count a turn reports.
type Usage struct {
	Prompt, Completion int
}

// Turn is one scripted answer to a chat request.
type Turn struct {
	// Text is streamed in chunks of ChunkSize runes (default 4).
	Text      string
	ChunkSize int
	// Reasoning is streamed before the text, as delta.reasoning_content,
	// or as delta.reasoning when ReasoningField is "reasoning".
	Reasoning      string
	ReasoningField string
	// Calls are streamed after the text, each in fragments: the first
	// with its index, id, type and name and empty arguments, then the
	// arguments in pieces of ArgsChunk bytes (default 5), the calls'
	// pieces interleaved.
	Calls     []Call
	ArgsChunk int
	// FinishReason defaults to "tool_calls" with calls, else "stop".
	FinishReason string
	// Usage is reported on a chunk of its own with "choices": [] after
	// the finish, when the request asked for it (stream_options
	// include_usage); with UsageOnFinishChunk, on the finish chunk
	// instead, asked or not; with NoUsage, never. A zero Usage is made up
	// from the request and the text.
	Usage              Usage
	UsageOnFinishChunk bool
	NoUsage            bool
	// Status, when non-zero, answers with this HTTP status and an error
	// body {"error": {"message": Error, "type": ErrorType, "code":
	// ErrorCode}}; RetryAfter, when set, is sent as the Retry-After
	// header.
	Status     int
	Error      string
	ErrorType  string
	ErrorCode  any
	RetryAfter string
	// Delay waits before answering (honouring the client going away).
	Delay time.Duration
	// Truncate ends the stream after the text and the calls, without a
	// finish reason, usage or [DONE].
	Truncate bool
	// MidStreamError, when set, is sent after the text as an error line,
	// vLLM's data: {"error": {"message", "type", "code"}}, with
	// MidStreamCode for its code (default 500), then [DONE]; with
	// ErrorInChunk, as OpenRouter sends it: a chunk with an "error" member
	// and finish_reason "error".
	MidStreamError string
	MidStreamCode  any
	ErrorInChunk   bool
}

// Request is a received chat request.
type Request struct {
	Model    string            `json:"model"`
	Messages []Message         `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
	Stream   bool              `json:"stream"`
	// MaxTokens and MaxCompletionTokens are the output caps sent (nil:
	// none).
	MaxTokens           *int `json:"max_tokens"`
	MaxCompletionTokens *int `json:"max_completion_tokens"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// Extra are the body's other fields, as sent.
	Extra map[string]json.RawMessage `json:"-"`
	// Body is the request's body as it came.
	Body []byte `json:"-"`
	// Header is the request's headers.
	Header http.Header `json:"-"`
	// Received is when the body had arrived whole.
	Received time.Time `json:"-"`
}

// Message is one message of a received request.
type Message struct {
	Role string `json:"role"`
	// Content is a string or an array of parts, as sent (nil: none).
	Content    json.RawMessage `json:"content"`
	ToolCalls  []ToolCall      `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

// ToolCall is a tool call in a received assistant message.
type ToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Part is one part of a message's content.
type Part struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// Text is the message's text: its string content, or its text parts
// joined.
func (m Message) Text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var b strings.Builder
	for _, p := range m.Parts() {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// Parts are the message's content parts (none for a string content).
func (m Message) Parts() []Part {
	var parts []Part
	_ = json.Unmarshal(m.Content, &parts)
	return parts
}

// LastUser returns the text of the last user message.
func (r Request) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Text()
		}
	}
	return ""
}

// System returns the system message's text, if any.
func (r Request) System() string {
	for _, m := range r.Messages {
		if m.Role == "system" {
			return m.Text()
		}
	}
	return ""
}

// Model is a model GET /v1/models lists.
type Model struct {
	ID string
	// MaxModelLen is reported as vLLM does ("max_model_len"); NCtxTrain
	// as llama.cpp does ("meta": {"n_ctx_train"}). Zero: not reported.
	MaxModelLen int
	NCtxTrain   int
}

// Server is the fake.
type Server struct {
	*httptest.Server

	mu       sync.Mutex
	handler  func(Request) Turn
	turns    []Turn
	requests []Request
	models   []Model
	known    map[string]bool // nil: any model
	key      string
	propsCtx int
	tokenize func(Request) Tokenize
	tokens   []Request
	// embed is /v1/embeddings' state (embed.go).
	embed embedState
}

// Tokenize is how POST /tokenize answers a chat (model, messages, tools,
// add_generation_prompt).
type Tokenize struct {
	// Count is answered as vLLM does: {"count", "max_model_len",
	// "tokens"}.
	Count int
	// LlamaCpp answers as llama.cpp does a body without "content":
	// {"tokens": []}.
	LlamaCpp bool
	// Status, when non-zero, answers with this status and OpenAI's error
	// body.
	Status int
	// Delay waits before answering (honouring the client going away).
	Delay time.Duration
}

// SetTokenize makes POST /tokenize answer with f; nil (the default)
// answers 404, as OpenAI and most servers do.
func (s *Server) SetTokenize(f func(Request) Tokenize) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokenize = f
}

// TokenizeRequests returns the /tokenize requests received so far.
func (s *Server) TokenizeRequests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.tokens...)
}

// tokenizeChat answers POST /tokenize.
func (s *Server) tokenizeChat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req Request
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err == nil {
		err = json.Unmarshal(body, &req.Extra)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad request: "+fmt.Sprint(err), "BadRequestError", http.StatusBadRequest)
		return
	}
	req.Body, req.Header = body, r.Header.Clone()
	s.mu.Lock()
	f := s.tokenize
	if f != nil {
		s.tokens = append(s.tokens, req)
	}
	s.mu.Unlock()
	if f == nil {
		writeError(w, http.StatusNotFound, "Not Found", "NotFoundError", http.StatusNotFound)
		return
	}
	t := f(req)
	if t.Delay > 0 {
		select {
		case <-time.After(t.Delay):
		case <-r.Context().Done():
			return
		}
	}
	switch {
	case t.Status != 0:
		writeError(w, t.Status, http.StatusText(t.Status), "InternalServerError", t.Status)
	case t.LlamaCpp:
		writeJSON(w, http.StatusOK, map[string]any{"tokens": []int{}})
	default:
		if len(req.Messages) == 0 {
			writeError(w, http.StatusBadRequest, "messages: Field required", "BadRequestError", http.StatusBadRequest)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"count": t.Count, "max_model_len": 32768, "tokens": make([]int, t.Count)})
	}
}

// New starts a fake that answers with turns in order; after the script
// runs out it answers "(no more scripted turns)".
func New(turns ...Turn) *Server {
	s := &Server{turns: turns}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// NewFunc starts a fake whose answers come from h.
func NewFunc(h func(Request) Turn) *Server {
	s := New()
	s.handler = h
	return s
}

// BaseURL is the API base, with its /v1, as a provider is configured with.
func (s *Server) BaseURL() string { return s.URL + "/v1" }

// Push appends scripted turns.
func (s *Server) Push(turns ...Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turns = append(s.turns, turns...)
}

// SetModels sets what GET /v1/models lists and restricts chat to those
// models: another gets vLLM's 404 "The model `x` does not exist.".
func (s *Server) SetModels(models ...Model) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = models
	s.known = map[string]bool{}
	for _, m := range models {
		s.known[m.ID] = true
	}
}

// SetKey makes every request need "Authorization: Bearer key"; others get
// OpenAI's 401. An empty key turns the check off.
func (s *Server) SetKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = key
}

// SetProps makes GET /props answer as llama.cpp's does, with the window
// the server holds as default_generation_settings.n_ctx; 0 (the default)
// answers 404, as other servers do.
func (s *Server) SetProps(nCtx int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.propsCtx = nCtx
}

// Requests returns the chat requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	key := s.key
	s.mu.Unlock()
	if key != "" && r.Header.Get("Authorization") != "Bearer "+key {
		writeError(w, http.StatusUnauthorized, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		s.chat(w, r)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		s.list(w)
	case r.Method == http.MethodGet && r.URL.Path == "/props":
		s.props(w)
	case r.Method == http.MethodPost && r.URL.Path == "/tokenize":
		s.tokenizeChat(w, r)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/embeddings":
		s.embeddings(w, r)
	default:
		writeError(w, http.StatusNotFound, "Not Found", "NotFoundError", http.StatusNotFound)
	}
}

// list answers GET /v1/models.
func (s *Server) list(w http.ResponseWriter) {
	s.mu.Lock()
	models := append([]Model(nil), s.models...)
	s.mu.Unlock()
	data := []map[string]any{}
	for _, m := range models {
		o := map[string]any{"id": m.ID, "object": "model", "created": 1767225600, "owned_by": "fake"}
		if m.MaxModelLen > 0 {
			o["max_model_len"] = m.MaxModelLen
			o["root"] = m.ID
		}
		if m.NCtxTrain > 0 {
			o["owned_by"] = "llamacpp"
			o["meta"] = map[string]any{"vocab_type": 2, "n_vocab": 151936, "n_ctx_train": m.NCtxTrain, "n_embd": 4096}
		}
		data = append(data, o)
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// props answers llama.cpp's GET /props.
func (s *Server) props(w http.ResponseWriter) {
	s.mu.Lock()
	n := s.propsCtx
	s.mu.Unlock()
	if n == 0 {
		writeError(w, http.StatusNotFound, "Not Found", "NotFoundError", http.StatusNotFound)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"default_generation_settings": map[string]any{"n_ctx": n, "params": map[string]any{"temperature": 0.8}},
		"total_slots":                 1,
	})
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	received := time.Now()
	var req Request
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err == nil {
		err = json.Unmarshal(body, &req.Extra)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad request: "+fmt.Sprint(err), "BadRequestError", http.StatusBadRequest)
		return
	}
	for _, k := range []string{"model", "messages", "tools", "stream", "max_tokens", "max_completion_tokens", "stream_options"} {
		delete(req.Extra, k)
	}
	req.Body, req.Header, req.Received = body, r.Header.Clone(), received
	s.mu.Lock()
	s.requests = append(s.requests, req)
	known := s.known == nil || s.known[req.Model]
	var turn Turn
	switch {
	case !known, s.handler != nil:
	case len(s.turns) > 0:
		turn, s.turns = s.turns[0], s.turns[1:]
	default:
		turn = Turn{Text: "(no more scripted turns)"}
	}
	h := s.handler
	s.mu.Unlock()
	if !known {
		writeError(w, http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist.", req.Model), "NotFoundError", http.StatusNotFound)
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
		if turn.RetryAfter != "" {
			w.Header().Set("Retry-After", turn.RetryAfter)
		}
		writeError(w, turn.Status, turn.Error, turn.ErrorType, turn.ErrorCode)
		return
	}
	if !req.Stream {
		s.whole(w, req, turn)
		return
	}
	s.stream(w, req, turn)
}

// chunkID is the id of every chunk of an answer.
const chunkID = "chatcmpl-fake"

// stream answers a streamed request as server-sent events.
func (s *Server) stream(w http.ResponseWriter, req Request, turn Turn) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	created := time.Now().Unix()
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": chunkID, "object": "chat.completion.chunk", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}}
	}
	send(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	field := "reasoning_content"
	if turn.ReasoningField == "reasoning" {
		field = "reasoning"
	}
	size := turn.ChunkSize
	if size <= 0 {
		size = 4
	}
	for _, piece := range pieces(turn.Reasoning, size) {
		send(chunk(map[string]any{field: piece}, nil))
	}
	for _, piece := range pieces(turn.Text, size) {
		send(chunk(map[string]any{"content": piece}, nil))
	}
	if turn.MidStreamError != "" {
		code := turn.MidStreamCode
		if code == nil {
			code = http.StatusInternalServerError
		}
		e := map[string]any{"message": turn.MidStreamError, "type": "InternalServerError", "param": nil, "code": code}
		if turn.ErrorInChunk {
			c := chunk(map[string]any{"content": ""}, "error")
			c["error"] = e
			send(c)
		} else {
			send(map[string]any{"error": e})
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
		return
	}
	for _, f := range fragments(turn) {
		send(chunk(map[string]any{"tool_calls": []any{f}}, nil))
	}
	if turn.Truncate {
		return
	}
	finish := turn.FinishReason
	if finish == "" {
		finish = "stop"
		if len(turn.Calls) > 0 {
			finish = "tool_calls"
		}
	}
	u := s.usage(req, turn)
	last := chunk(map[string]any{}, finish)
	if turn.UsageOnFinishChunk && !turn.NoUsage {
		last["usage"] = u
	}
	send(last)
	if !turn.NoUsage && !turn.UsageOnFinishChunk && req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		send(map[string]any{"id": chunkID, "object": "chat.completion.chunk", "created": created, "model": req.Model, "choices": []any{}, "usage": u})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// whole answers a request that did not ask for a stream with one
// chat.completion object.
func (s *Server) whole(w http.ResponseWriter, req Request, turn Turn) {
	msg := map[string]any{"role": "assistant", "content": turn.Text}
	if turn.Reasoning != "" {
		msg["reasoning_content"] = turn.Reasoning
	}
	var calls []any
	for i, c := range turn.Calls {
		calls = append(calls, map[string]any{"id": callID(c, i), "type": "function", "function": map[string]any{"name": c.Name, "arguments": argsText(c)}})
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	finish := turn.FinishReason
	if finish == "" {
		finish = "stop"
		if len(calls) > 0 {
			finish = "tool_calls"
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": chunkID, "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": s.usage(req, turn)})
}

// usage is the turn's usage, or one made up: ten tokens and a token a word
// of the last user message in, a token a word of the text out.
func (s *Server) usage(req Request, turn Turn) map[string]any {
	p, c := turn.Usage.Prompt, turn.Usage.Completion
	if p == 0 {
		p = 10 + len(strings.Fields(req.LastUser()))
	}
	if c == 0 {
		c = 1 + len(strings.Fields(turn.Text))
	}
	return map[string]any{"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
}

// fragments are the turn's tool calls as streamed fragments: each call's
// opening fragment (index, id, type, name, empty arguments), then the
// pieces of their arguments, a piece of each call in turn, so calls
// interleave.
func fragments(turn Turn) []map[string]any {
	size := turn.ArgsChunk
	if size <= 0 {
		size = 5
	}
	var out []map[string]any
	var rest [][]string
	for i, c := range turn.Calls {
		out = append(out, map[string]any{"index": i, "id": callID(c, i), "type": "function", "function": map[string]any{"name": c.Name, "arguments": ""}})
		var ps []string
		for a := argsText(c); a != ""; {
			n := min(size, len(a))
			ps, a = append(ps, a[:n]), a[n:]
		}
		rest = append(rest, ps)
	}
	for more := true; more; {
		more = false
		for i := range rest {
			if len(rest[i]) == 0 {
				continue
			}
			out = append(out, map[string]any{"index": i, "function": map[string]any{"arguments": rest[i][0]}})
			rest[i] = rest[i][1:]
			more = true
		}
	}
	return out
}

func callID(c Call, i int) string {
	if c.ID != "" {
		return c.ID
	}
	return fmt.Sprintf("call_%d", i+1)
}

func argsText(c Call) string {
	if c.RawArgs != "" {
		return c.RawArgs
	}
	if c.Args == nil {
		return "{}"
	}
	// As a model server writes it: "<" and "&" as they are.
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(c.Args)
	return strings.TrimSuffix(b.String(), "\n")
}

// pieces cuts s into pieces of size runes.
func pieces(s string, size int) []string {
	runes := []rune(s)
	var out []string
	for i := 0; i < len(runes); i += size {
		out = append(out, string(runes[i:min(i+size, len(runes))]))
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers with OpenAI's error shape, which vLLM, SGLang,
// llama.cpp and OpenRouter share.
func writeError(w http.ResponseWriter, status int, msg, typ string, code any) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}})
}
