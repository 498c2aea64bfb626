// Package ollamatest is a fake Ollama server for tests: it speaks the real
// wire protocol (POST /api/chat answered with NDJSON, POST /api/show, GET
// /api/tags, POST /api/embed) on a loopback socket, so the real client library is
// exercised.
//
// A chat answer is either scripted (Turn's Text and Calls, which the fake
// streams in its own shape) or a recorded reply replayed as it is (Turn's
// Raw, usually from LoadReply: the shapes real models send through Ollama,
// kept in pkg/model/ollama/testdata/replies).
package ollamatest

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Call is a tool call the fake model makes.
type Call struct {
	Name string
	Args map[string]any
	// RawArgs, when set, is written as the call's arguments as it is, in
	// place of Args: a JSON string holding the object, say, as servers
	// imitating Ollama's API may send (real Ollama sends an object).
	RawArgs json.RawMessage
}

// Turn is one scripted answer to /api/chat.
type Turn struct {
	// Text is streamed in chunks of ChunkSize runes (default 4).
	Text      string
	ChunkSize int
	Calls     []Call
	// Status, when non-zero, answers with this HTTP status and Error.
	Status int
	Error  string
	// DoneReason defaults to "stop".
	DoneReason string
	// PromptTokens and OutputTokens are reported in the final line.
	PromptTokens, OutputTokens int
	// Delay waits before answering (honouring the client going away).
	Delay time.Duration
	// Truncate ends the stream without the final done line.
	Truncate bool
	// Raw, when set, is the answer's NDJSON lines, written as they are
	// (their model field included) in place of Text, Calls and the done
	// line; DoneReason, the token counts and ChunkSize do not apply, and
	// Truncate leaves out the last line. Each line goes out in two writes
	// with a flush between, cut inside the line at a point that varies from
	// line to line, so the client sees chunk boundaries inside the JSON.
	// Status and Delay still apply.
	Raw []string
}

// Request is a received chat request, decoded loosely.
type Request struct {
	Model    string           `json:"model"`
	Messages []RequestMessage `json:"messages"`
	Tools    []json.RawMessage
	Options  map[string]any `json:"options"`
	// Think is the request's "think" field as sent (nil: none).
	Think json.RawMessage `json:"think"`
	// Received is when the request's body had arrived whole, before the
	// fake decoded it: what a model server could start from.
	Received time.Time `json:"-"`
}

// RequestMessage is one message of a received request.
type RequestMessage struct {
	Role       string            `json:"role"`
	Content    string            `json:"content"`
	Images     []json.RawMessage `json:"images"`
	ToolCalls  []json.RawMessage `json:"tool_calls"`
	ToolName   string            `json:"tool_name"`
	ToolCallID string            `json:"tool_call_id"`
}

// LastUser returns the content of the last user message.
func (r Request) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// System returns the system message, if any.
func (r Request) System() string {
	for _, m := range r.Messages {
		if m.Role == "system" {
			return m.Content
		}
	}
	return ""
}

// Server is the fake.
type Server struct {
	*httptest.Server

	mu       sync.Mutex
	handler  func(Request) Turn
	turns    []Turn
	requests []Request
	forget   bool
	// Models known to /api/chat and /api/show; empty: any model.
	models        map[string]bool
	contextLength int
	capabilities  []string
	// modelCaps overrides capabilities per model.
	modelCaps map[string][]string
	// perToken, when set, is the bytes per token of SetRealUsage.
	perToken int
	// embed is /api/embed's state (embed.go).
	embed embedState
}

// New starts a fake that answers with turns in order; after the script
// runs out it answers "(no more scripted turns)".
func New(turns ...Turn) *Server {
	s := &Server{turns: turns, contextLength: 32768, capabilities: []string{"completion", "tools"}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// NewFunc starts a fake whose answers come from h.
func NewFunc(h func(Request) Turn) *Server {
	s := New()
	s.handler = h
	return s
}

// SetFunc makes h answer every later chat request, as NewFunc does.
func (s *Server) SetFunc(h func(Request) Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = h
}

// SetModels restricts the known models; others get 404 "model not found".
func (s *Server) SetModels(names ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.models = map[string]bool{}
	for _, n := range names {
		s.models[n] = true
	}
}

// SetContextLength sets what /api/show reports.
func (s *Server) SetContextLength(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.contextLength = n
}

// SetCapabilities sets what /api/show lists as the model's capabilities
// (default "completion", "tools"; add "vision" for a multimodal model).
func (s *Server) SetCapabilities(caps ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.capabilities = caps
}

// SetModelCapabilities sets what /api/show lists for one model, over
// SetCapabilities (a model without "tools", say).
func (s *Server) SetModelCapabilities(model string, caps ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.modelCaps == nil {
		s.modelCaps = map[string][]string{}
	}
	s.modelCaps[model] = caps
}

// SetRealUsage makes the fake count tokens as a real model about does:
// a token per n bytes of the prompt's text (messages, their tool calls,
// the tools' schemas) and of the answer, reported in place of a turn's
// unset PromptTokens and OutputTokens; and it honours the request's
// num_predict, cutting the answer (text first, then the tool calls) to
// that many tokens, with done_reason "length".
func (s *Server) SetRealUsage(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.perToken = n
}

// realUsage applies SetRealUsage's counting (n bytes a token) to turn
// answering req.
func realUsage(n int, req Request, turn Turn) Turn {
	in := 0
	for _, m := range req.Messages {
		in += 4*n + len(m.Role) + len(m.Content)
		for _, c := range m.ToolCalls {
			in += len(c)
		}
	}
	for _, t := range req.Tools {
		in += len(t)
	}
	limit := -1
	if v, ok := req.Options["num_predict"].(float64); ok && v > 0 {
		limit = int(v) * n
	}
	out := len(turn.Text)
	if limit >= 0 && out > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(turn.Text[cut]) {
			cut--
		}
		turn.Text, out, turn.Calls, turn.DoneReason = turn.Text[:cut], cut, nil, "length"
	}
	for i, c := range turn.Calls {
		b, _ := json.Marshal(map[string]any{"name": c.Name, "arguments": c.Args})
		if limit >= 0 && out+len(b) > limit {
			turn.Calls, turn.DoneReason = turn.Calls[:i], "length"
			break
		}
		out += len(b)
	}
	if turn.PromptTokens == 0 {
		turn.PromptTokens = max(1, (in+n-1)/n)
	}
	if turn.OutputTokens == 0 {
		turn.OutputTokens = max(1, (out+n-1)/n)
	}
	return turn
}

// Push appends scripted turns.
func (s *Server) Push(turns ...Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turns = append(s.turns, turns...)
}

// ForgetRequests stops the fake keeping the requests it receives (a long
// benchmark's would fill its heap, and its collections would be counted
// against the process under test); Requests and EmbedRequests then return
// none.
func (s *Server) ForgetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forget, s.requests, s.embed.requests = true, nil, nil
}

// Requests returns the chat requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api/chat":
		s.chat(w, r)
	case "/api/show":
		s.show(w, r)
	case "/api/embed":
		s.embedHandler(w, r)
	case "/api/tags":
		s.tags(w)
	case "/api/version":
		writeJSON(w, http.StatusOK, map[string]string{"version": "0.17.0"})
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found: " + r.URL.Path})
	}
}

// tags answers GET /api/tags: the models SetModels named, sorted.
func (s *Server) tags(w http.ResponseWriter) {
	s.mu.Lock()
	names := make([]string, 0, len(s.models))
	for n := range s.models {
		names = append(names, n)
	}
	s.mu.Unlock()
	sort.Strings(names)
	models := []map[string]any{}
	for _, n := range names {
		models = append(models, map[string]any{"name": n, "model": n, "modified_at": "2026-01-01T00:00:00Z", "size": 9_000_000_000,
			"digest": fmt.Sprintf("%x", sha256.Sum256([]byte(n))), "details": map[string]any{"format": "gguf", "family": "fake", "parameter_size": "14B", "quantization_level": "Q4_K_M"}})
	}
	writeJSON(w, http.StatusOK, map[string]any{"models": models})
}

func (s *Server) known(model string) bool {
	return len(s.models) == 0 || s.models[model]
}

func (s *Server) show(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string `json:"model"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	s.mu.Lock()
	known, n, caps := s.known(req.Model), s.contextLength, s.capabilities
	if c, ok := s.modelCaps[req.Model]; ok {
		caps = c
	}
	s.mu.Unlock()
	if !known {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("model '%s' not found", req.Model)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"modelfile":    "FROM fake",
		"details":      map[string]any{"family": "fake"},
		"model_info":   map[string]any{"general.architecture": "fake", "fake.context_length": n},
		"capabilities": caps,
	})
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	var raw struct {
		Request
		Tools []json.RawMessage `json:"tools"`
	}
	body, err := io.ReadAll(r.Body)
	received := time.Now()
	if err == nil {
		err = json.Unmarshal(body, &raw)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad request: " + err.Error()})
		return
	}
	req := raw.Request
	req.Tools, req.Received = raw.Tools, received
	s.mu.Lock()
	if !s.forget {
		s.requests = append(s.requests, req)
	}
	known := s.known(req.Model)
	var turn Turn
	switch {
	case !known:
	case s.handler != nil:
	case len(s.turns) > 0:
		turn, s.turns = s.turns[0], s.turns[1:]
	default:
		turn = Turn{Text: "(no more scripted turns)"}
	}
	h, perToken := s.handler, s.perToken
	s.mu.Unlock()
	if !known {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("model '%s' not found, try pulling it first", req.Model)})
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
		writeJSON(w, turn.Status, map[string]string{"error": turn.Error})
		return
	}
	if perToken > 0 && len(turn.Raw) == 0 {
		turn = realUsage(perToken, req, turn)
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	if len(turn.Raw) > 0 {
		writeRaw(w, fl, turn.Raw, turn.Truncate)
		return
	}
	enc := json.NewEncoder(w)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	line := func(v any) {
		_ = enc.Encode(v)
		if fl != nil {
			fl.Flush()
		}
	}
	size := turn.ChunkSize
	if size <= 0 {
		size = 4
	}
	runes := []rune(turn.Text)
	for i := 0; i < len(runes); i += size {
		j := min(i+size, len(runes))
		line(map[string]any{"model": req.Model, "created_at": now, "message": map[string]any{"role": "assistant", "content": string(runes[i:j])}, "done": false})
	}
	if len(turn.Calls) > 0 {
		var calls []map[string]any
		for i, c := range turn.Calls {
			var args any = c.Args
			switch {
			case c.RawArgs != nil:
				args = c.RawArgs
			case c.Args == nil:
				args = map[string]any{}
			}
			calls = append(calls, map[string]any{"id": fmt.Sprintf("call_%d", i+1), "function": map[string]any{"index": i, "name": c.Name, "arguments": args}})
		}
		line(map[string]any{"model": req.Model, "created_at": now, "message": map[string]any{"role": "assistant", "content": "", "tool_calls": calls}, "done": false})
	}
	if turn.Truncate {
		return
	}
	reason := turn.DoneReason
	if reason == "" {
		reason = "stop"
	}
	pt, ot := turn.PromptTokens, turn.OutputTokens
	if pt == 0 {
		pt = 10 + len(strings.Fields(req.LastUser()))
	}
	if ot == 0 {
		ot = 1 + len(strings.Fields(turn.Text))
	}
	line(map[string]any{"model": req.Model, "created_at": now, "message": map[string]any{"role": "assistant", "content": ""},
		"done": true, "done_reason": reason, "prompt_eval_count": pt, "eval_count": ot, "total_duration": 123456789})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeRaw writes lines as NDJSON, each in two writes with a flush after
// each, so that every line crosses a chunk boundary; with truncate the last
// line is left out.
func writeRaw(w io.Writer, fl http.Flusher, lines []string, truncate bool) {
	if truncate {
		lines = lines[:len(lines)-1]
	}
	for i, l := range lines {
		cut := rawCut(l, i)
		_, _ = io.WriteString(w, l[:cut])
		if fl != nil {
			fl.Flush()
		}
		_, _ = io.WriteString(w, l[cut:]+"\n")
		if fl != nil {
			fl.Flush()
		}
	}
}

// rawCuts are where, as a fraction of its length, line i is cut: a third of
// the way in, then past the middle, then near the start, and so on.
var rawCuts = [][2]int{{1, 3}, {3, 5}, {1, 7}, {5, 6}, {1, 2}}

// rawCut is the byte offset at which line i of a raw answer is cut: inside
// the line, never at its start or its end (a line of one byte is not cut).
func rawCut(line string, i int) int {
	if len(line) < 2 {
		return len(line)
	}
	f := rawCuts[i%len(rawCuts)]
	return min(max(len(line)*f[0]/f[1], 1), len(line)-1)
}

// Reply is a recorded /api/chat answer, as kept in
// pkg/model/ollama/testdata/replies (see the README there): header lines
// "# key: value" giving its provenance, then the NDJSON lines Ollama
// streamed.
type Reply struct {
	// Name is the file's name without its .ndjson extension.
	Name string
	// Model and Ollama are the model and the Ollama release the shape is
	// recorded for (the release as the sources give it).
	Model, Ollama string
	// Sources are where the shape comes from: a URL and what it shows.
	Sources []string
	// Shows says in a line what the reply is.
	Shows string
	// Notes say what in the lines is deliberate or inferred rather than
	// recorded (optional).
	Notes []string
	// Lines are the NDJSON lines, each one JSON object; the last has
	// "done": true.
	Lines []string
}

// LoadReply reads a recorded reply. Its errors name the file and, for a
// malformed line, the line's number: every header line must be a known
// "# key: value", every other line a JSON object whose model is the
// header's, and the last, and only it, must have "done": true.
func LoadReply(path string) (Reply, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Reply{}, err
	}
	r := Reply{Name: strings.TrimSuffix(filepath.Base(path), ".ndjson")}
	fail := func(n int, format string, args ...any) (Reply, error) {
		return Reply{}, fmt.Errorf("%s:%d: %s", path, n, fmt.Sprintf(format, args...))
	}
	lines := strings.Split(string(data), "\n")
	last, done := 0, false // the last stream line: its number, whether it is the done line
	for i, l := range lines {
		n := i + 1
		l = strings.TrimSuffix(l, "\r")
		if strings.TrimSpace(l) == "" {
			continue
		}
		if strings.HasPrefix(l, "#") {
			if len(r.Lines) > 0 {
				return fail(n, "header line after the stream began")
			}
			key, value, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(l, "#")), ":")
			value = strings.TrimSpace(value)
			if !ok || value == "" {
				return fail(n, "header line is not \"# key: value\"")
			}
			once := func(field *string) error {
				if *field != "" {
					return fmt.Errorf("%q given twice", key)
				}
				*field = value
				return nil
			}
			var err error
			switch key {
			case "model":
				err = once(&r.Model)
			case "ollama":
				err = once(&r.Ollama)
			case "shows":
				err = once(&r.Shows)
			case "source":
				r.Sources = append(r.Sources, value)
			case "note":
				r.Notes = append(r.Notes, value)
			default:
				err = fmt.Errorf("unknown header key %q", key)
			}
			if err != nil {
				return fail(n, "%v", err)
			}
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &obj); err != nil || obj == nil {
			return fail(n, "not a JSON object")
		}
		var head struct {
			Model string `json:"model"`
			Done  bool   `json:"done"`
		}
		if err := json.Unmarshal([]byte(l), &head); err != nil {
			return fail(n, "%v", err)
		}
		if r.Model != "" && head.Model != r.Model {
			return fail(n, "model %q, but the header says %q", head.Model, r.Model)
		}
		if done {
			return fail(n, "a line after the done line")
		}
		r.Lines = append(r.Lines, l)
		last, done = n, head.Done
	}
	switch {
	case len(r.Lines) == 0:
		return Reply{}, fmt.Errorf("%s: no stream lines", path)
	case !done:
		return fail(last, "the last line does not have \"done\": true")
	case r.Model == "":
		return Reply{}, errors.New(path + ": no \"model\" in the header")
	case r.Ollama == "":
		return Reply{}, errors.New(path + ": no \"ollama\" in the header")
	case len(r.Sources) == 0:
		return Reply{}, errors.New(path + ": no \"source\" in the header")
	case r.Shows == "":
		return Reply{}, errors.New(path + ": no \"shows\" in the header")
	}
	return r, nil
}

// Turn is the reply as a scripted turn that replays its lines.
func (r Reply) Turn() Turn {
	return Turn{Raw: append([]string(nil), r.Lines...)}
}
