package openaitest

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"

	"github.com/mother-chat/mother/internal/recalldata"
)

// EmbedRequest is a received POST /v1/embeddings request.
type EmbedRequest struct {
	Model string `json:"model"`
	// Input is the texts to embed (a lone string as one); nil when the
	// input was not strings.
	Input []string `json:"-"`
	// RawInput is the request's "input" as sent.
	RawInput json.RawMessage `json:"input"`
	// EncodingFormat is "float", "base64" or "" (not sent: float).
	EncodingFormat string `json:"encoding_format"`
	// Dimensions is the request's "dimensions" (nil: not sent).
	Dimensions *int `json:"dimensions"`
	// Extra are the body's other fields, as sent.
	Extra map[string]json.RawMessage `json:"-"`
	// Body is the request's body as it came.
	Body []byte `json:"-"`
	// Header is the request's headers.
	Header http.Header `json:"-"`
	// Received is when the body had arrived whole.
	Received time.Time `json:"-"`
}

// embedState is the fake's /v1/embeddings state, under Server.mu.
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
// default, recalldata.Embed, a deterministic bag-of-concepts vector). The
// fake sends what f returns as it is (OpenAI's embeddings are of unit
// length; f should make them so), cut to "dimensions" and scaled back to
// unit length when the request asks for fewer.
func (s *Server) SetEmbed(f func(string) []float32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.embed.fn = f
}

// FailEmbed makes the next n /v1/embeddings requests (n < 0: every one
// until FailEmbed(0, 0, "")) answer with status and OpenAI's error body
// carrying message.
func (s *Server) FailEmbed(n, status int, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.embed.failN, s.embed.failStatus, s.embed.failMsg = n, status, message
}

// EmbedRequests returns the /v1/embeddings requests received so far,
// failed ones included.
func (s *Server) EmbedRequests() []EmbedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]EmbedRequest(nil), s.embed.requests...)
}

// EmbedTokens is the sum of the usage.total_tokens the fake has answered
// /v1/embeddings with.
func (s *Server) EmbedTokens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.embed.tokens
}

// EmbedTokenCount is the tokens the fake counts for one text: a token per
// four bytes, rounded up, at least one.
func EmbedTokenCount(text string) int {
	return max(1, (len(text)+3)/4)
}

// embeddings answers POST /v1/embeddings as OpenAI-compatible servers
// (OpenAI, vLLM, llama.cpp) do: "input" a string or an array of strings
// (token arrays, which some servers take, are refused here with a 400
// saying so), "encoding_format" float or base64 (little-endian float32),
// "dimensions" cutting the vectors, and usage counted.
func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	received := time.Now()
	var req EmbedRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err == nil {
		err = json.Unmarshal(body, &req.Extra)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad request: "+fmt.Sprint(err), "invalid_request_error", nil)
		return
	}
	for _, k := range []string{"model", "input", "encoding_format", "dimensions"} {
		delete(req.Extra, k)
	}
	req.Body, req.Header, req.Received = body, r.Header.Clone(), received
	input, inputErr := embeddingInput(req.RawInput)
	req.Input = input

	s.mu.Lock()
	s.embed.requests = append(s.embed.requests, req)
	known := s.known == nil || s.known[req.Model]
	fn := s.embed.fn
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
		writeError(w, failStatus, failMsg, errorType(failStatus), failStatus)
		return
	case !known:
		writeError(w, http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist.", req.Model), "NotFoundError", http.StatusNotFound)
		return
	case inputErr != "":
		writeError(w, http.StatusBadRequest, inputErr, "invalid_request_error", nil)
		return
	case req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64":
		writeError(w, http.StatusBadRequest, fmt.Sprintf("'%s' is not one of ['float', 'base64'] - 'encoding_format'", req.EncodingFormat), "invalid_request_error", nil)
		return
	case req.Dimensions != nil && *req.Dimensions < 1:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%d is less than the minimum of 1 - 'dimensions'", *req.Dimensions), "invalid_request_error", nil)
		return
	}
	if fn == nil {
		fn = recalldata.Embed
	}
	data := []map[string]any{}
	total := 0
	for i, text := range input {
		e := fn(text)
		if req.Dimensions != nil && *req.Dimensions < len(e) {
			e = unit(e[:*req.Dimensions])
		}
		var v any = e
		if req.EncodingFormat == "base64" {
			v = base64Floats(e)
		}
		data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": v})
		total += EmbedTokenCount(text)
	}
	s.mu.Lock()
	s.embed.tokens += total
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data, "model": req.Model,
		"usage": map[string]any{"prompt_tokens": total, "total_tokens": total}})
}

// embeddingInput reads "input": a non-empty string, or a non-empty array
// of non-empty strings. What is wrong comes back as OpenAI-style message
// naming the field; token arrays are named as such.
func embeddingInput(raw json.RawMessage) ([]string, string) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, "'input' is a required property"
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, "'input' cannot be an empty string"
		}
		return []string{one}, ""
	}
	var many []json.RawMessage
	if json.Unmarshal(raw, &many) != nil {
		return nil, "'input' must be a string or an array of strings"
	}
	if len(many) == 0 {
		return nil, "'input' cannot be an empty array"
	}
	var texts []string
	for i, m := range many {
		var s string
		if json.Unmarshal(m, &s) != nil {
			if t := bytes.TrimSpace(m); len(t) > 0 && (t[0] == '[' || (t[0] >= '0' && t[0] <= '9')) {
				return nil, "'input' as token ids is not supported by this server: send the text"
			}
			return nil, fmt.Sprintf("'input'[%d] must be a string", i)
		}
		if s == "" {
			return nil, fmt.Sprintf("'input'[%d] cannot be an empty string", i)
		}
		texts = append(texts, s)
	}
	return texts, ""
}

// base64Floats is v as OpenAI's base64 encoding sends it: the float32s in
// little-endian order, base64 (standard alphabet, padded).
func base64Floats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// unit returns v scaled to unit length (a zero vector stays zero).
func unit(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	if sum == 0 {
		return out
	}
	norm := 1 / math.Sqrt(sum)
	for i, x := range v {
		out[i] = float32(float64(x) * norm)
	}
	return out
}

// errorType is the "type" OpenAI's error body gives a status.
func errorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_exceeded"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}
