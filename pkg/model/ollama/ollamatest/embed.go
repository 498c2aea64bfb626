package ollamatest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"

	"github.com/mother-chat/mother/internal/recalldata"
)

// EmbedRequest is a received POST /api/embed request, as Ollama's
// api.EmbedRequest carries it.
type EmbedRequest struct {
	Model string
	// Input is the texts to embed: a lone string as one text, an empty
	// string as none.
	Input []string
	// RawInput is the request's "input" as sent.
	RawInput json.RawMessage
	// Truncate is the request's "truncate" (nil: not sent, which Ollama
	// takes as true).
	Truncate *bool
	// KeepAlive is the request's "keep_alive" as sent (nil: none).
	KeepAlive json.RawMessage
	// Dimensions is the request's "dimensions" (0: none).
	Dimensions int
	Options    map[string]any
	// Received is when the body had arrived whole.
	Received time.Time
}

// embedState is the fake's /api/embed state, under Server.mu.
type embedState struct {
	fn       func(string) []float32
	requests []EmbedRequest
	tokens   int
	// failN requests left to fail (negative: every one) with failStatus
	// and failMsg.
	failN      int
	failStatus int
	failMsg    string
}

// SetEmbed makes f compute the embedding of each input text (nil: the
// default, recalldata.Embed, a deterministic bag-of-concepts vector).
// Whatever f returns is scaled to unit length, as Ollama does.
func (s *Server) SetEmbed(f func(string) []float32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.embed.fn = f
}

// FailEmbed makes the next n /api/embed requests (n < 0: every one until
// FailEmbed(0, 0, "")) answer with status and {"error": message}, as
// Ollama answers a failed request.
func (s *Server) FailEmbed(n, status int, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.embed.failN, s.embed.failStatus, s.embed.failMsg = n, status, message
}

// EmbedRequests returns the /api/embed requests received so far, failed
// ones included.
func (s *Server) EmbedRequests() []EmbedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]EmbedRequest(nil), s.embed.requests...)
}

// EmbedTokens is the sum of the prompt_eval_count the fake has answered
// /api/embed with.
func (s *Server) EmbedTokens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.embed.tokens
}

// EmbedTokenCount is the tokens the fake counts for one text: a token
// per four bytes, rounded up, at least one (Ollama counts the model's
// tokenizer's tokens, BOS and EOS included).
func EmbedTokenCount(text string) int {
	return max(1, (len(text)+3)/4)
}

// embedHandler answers POST /api/embed as Ollama's server does: the input
// checked (a string or an array of strings, else 400 "invalid input
// type"), then the model (404 as for a model never pulled), then each
// text embedded, truncated to the context length unless "truncate" is
// false (then 400), scaled to unit length and cut to "dimensions".
func (s *Server) embedHandler(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method not allowed"})
		return
	}
	body, err := io.ReadAll(r.Body)
	received := time.Now()
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	if len(body) == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "missing request body"})
		return
	}
	var raw struct {
		Model      string          `json:"model"`
		Input      json.RawMessage `json:"input"`
		Truncate   *bool           `json:"truncate"`
		KeepAlive  json.RawMessage `json:"keep_alive"`
		Dimensions int             `json:"dimensions"`
		Options    map[string]any  `json:"options"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	req := EmbedRequest{Model: raw.Model, RawInput: raw.Input, Truncate: raw.Truncate, KeepAlive: raw.KeepAlive,
		Dimensions: raw.Dimensions, Options: raw.Options, Received: received}
	input, inputErr := embedInput(raw.Input)
	req.Input = input

	s.mu.Lock()
	if !s.forget {
		s.embed.requests = append(s.embed.requests, req)
	}
	known, ctxLen, fn := s.known(req.Model), s.contextLength, s.embed.fn
	failStatus, failMsg := 0, ""
	if s.embed.failN != 0 {
		failStatus, failMsg = s.embed.failStatus, s.embed.failMsg
		if s.embed.failN > 0 {
			s.embed.failN--
		}
	}
	s.mu.Unlock()

	switch {
	case failStatus != 0:
		writeJSON(w, failStatus, map[string]string{"error": failMsg})
		return
	case inputErr != nil:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": inputErr.Error()})
		return
	case !known:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("model %q not found, try pulling it first", req.Model)})
		return
	}
	if fn == nil {
		fn = recalldata.Embed
	}
	embeddings := [][]float32{}
	total := 0
	for _, text := range input {
		n := EmbedTokenCount(text)
		if ctxLen > 0 && n > ctxLen {
			if req.Truncate != nil && !*req.Truncate {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the input length exceeds the context length"})
				return
			}
			text, n = text[:min(len(text), ctxLen*4)], ctxLen
		}
		e, err := unit(fn(text))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		if req.Dimensions > 0 && req.Dimensions < len(e) {
			if e, err = unit(e[:req.Dimensions]); err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
				return
			}
		}
		embeddings = append(embeddings, e)
		total += n
	}
	s.mu.Lock()
	s.embed.tokens += total
	s.mu.Unlock()
	resp := map[string]any{"model": req.Model, "embeddings": embeddings}
	if len(input) > 0 {
		resp["total_duration"] = 14_000_000 + 2_000_000*len(input)
		resp["load_duration"] = 1_500_000
		resp["prompt_eval_count"] = total
	}
	writeJSON(w, http.StatusOK, resp)
}

// embedInput reads /api/embed's "input": a string (empty: no text), an
// array of strings, or absent; anything else is Ollama's "invalid input
// type".
func embedInput(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		return many, nil
	}
	return nil, errors.New("invalid input type")
}

// unit returns v scaled to unit length, as Ollama normalises every
// embedding; a NaN or an infinity is Ollama's error.
func unit(v []float32) ([]float32, error) {
	var sum float64
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, errors.New("embedding contains NaN or Inf values")
		}
		sum += float64(x) * float64(x)
	}
	norm := 1 / max(math.Sqrt(sum), 1e-12)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) * norm)
	}
	return out, nil
}
