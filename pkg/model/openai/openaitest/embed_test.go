package openaitest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/mother-chat/mother/internal/recalldata"
)

// embedPost posts body to the fake's /v1/embeddings with a plain
// net/http client, as pkg/model/openai sends its requests, and decodes
// the answer into out; it returns the status.
func embedPost(t *testing.T, s *Server, key string, body any, out any) int {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, s.BaseURL()+"/embeddings", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("decode the answer (status %d): %v", resp.StatusCode, err)
	}
	return resp.StatusCode
}

type embedAnswer struct {
	Object string `json:"object"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Model string `json:"model"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

func sameVector(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d dimensions, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Abs(float64(got[i]-want[i])) > 1e-6 {
			t.Fatalf("%s: dimension %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// A plain HTTP client gets recalldata.Embed's vectors as floats, in
// order, with usage, and the fake records what was sent.
func TestRecallDataOpenAIEmbedHTTP(t *testing.T) {
	s := New()
	defer s.Close()
	s.SetKey("sk-1")
	texts := []string{"which plumber fixed the leak", "the dripping tap was repaired", "book the car service"}
	var a embedAnswer
	if st := embedPost(t, s, "sk-1", map[string]any{"model": "bge-m3", "input": texts, "encoding_format": "float", "user": "mother"}, &a); st != http.StatusOK {
		t.Fatalf("status %d: %+v", st, a.Error)
	}
	if a.Object != "list" || a.Model != "bge-m3" || len(a.Data) != 3 {
		t.Fatalf("answer %+v", a)
	}
	want := 0
	for i, text := range texts {
		d := a.Data[i]
		var v []float32
		if err := json.Unmarshal(d.Embedding, &v); err != nil {
			t.Fatal(err)
		}
		if d.Object != "embedding" || d.Index != i {
			t.Errorf("item %d: object %q index %d", i, d.Object, d.Index)
		}
		sameVector(t, text, v, recalldata.Embed(text))
		want += EmbedTokenCount(text)
	}
	if a.Usage.PromptTokens != want || a.Usage.TotalTokens != want || s.EmbedTokens() != want {
		t.Errorf("usage %+v, EmbedTokens %d, want %d", a.Usage, s.EmbedTokens(), want)
	}
	reqs := s.EmbedRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests recorded", len(reqs))
	}
	r := reqs[0]
	if r.Model != "bge-m3" || strings.Join(r.Input, "|") != strings.Join(texts, "|") || r.EncodingFormat != "float" ||
		r.Dimensions != nil || string(r.Extra["user"]) != `"mother"` || r.Header.Get("Authorization") != "Bearer sk-1" {
		t.Errorf("recorded %+v", r)
	}
	if len(s.Requests()) != 0 {
		t.Errorf("an embeddings request recorded as a chat request")
	}

	// The key is checked as for chat.
	if st := embedPost(t, s, "", map[string]any{"model": "bge-m3", "input": "x"}, &embedAnswer{}); st != http.StatusUnauthorized {
		t.Errorf("no key: status %d", st)
	}
}

// base64 is little-endian float32s; the real go-openai client decodes it
// (and asks for it when told to), and "dimensions" cuts the vectors.
func TestRecallDataOpenAIEmbedBase64(t *testing.T) {
	s := New()
	defer s.Close()
	var a embedAnswer
	text := "the boiler broke and the heating is off"
	if st := embedPost(t, s, "", map[string]any{"model": "e", "input": text, "encoding_format": "base64"}, &a); st != http.StatusOK {
		t.Fatalf("status %d", st)
	}
	var b64 string
	if err := json.Unmarshal(a.Data[0].Embedding, &b64); err != nil {
		t.Fatalf("base64 embedding is not a string: %s", a.Data[0].Embedding)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, len(raw)/4)
	for i := range got {
		got[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	sameVector(t, "decoded by hand", got, recalldata.Embed(text))

	cfg := goopenai.DefaultConfig("")
	cfg.BaseURL = s.BaseURL()
	c := goopenai.NewClientWithConfig(cfg)
	for _, format := range []goopenai.EmbeddingEncodingFormat{goopenai.EmbeddingEncodingFormatBase64, goopenai.EmbeddingEncodingFormatFloat} {
		resp, err := c.CreateEmbeddings(context.Background(), goopenai.EmbeddingRequestStrings{
			Input: []string{text, "a new radiator"}, Model: "e", EncodingFormat: format, Dimensions: 64})
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if len(resp.Data) != 2 || resp.Usage.TotalTokens != EmbedTokenCount(text)+EmbedTokenCount("a new radiator") {
			t.Fatalf("%s: %+v", format, resp)
		}
		sameVector(t, string(format)+" through go-openai", resp.Data[0].Embedding, unit(recalldata.Embed(text)[:64]))
	}
	reqs := s.EmbedRequests()
	if len(reqs) != 3 || reqs[1].EncodingFormat != "base64" || reqs[1].Dimensions == nil || *reqs[1].Dimensions != 64 {
		t.Errorf("recorded %+v", reqs)
	}

	// SetEmbed replaces the embedding.
	s.SetEmbed(func(string) []float32 { return []float32{0.6, 0.8} })
	resp, err := c.CreateEmbeddings(context.Background(), goopenai.EmbeddingRequestStrings{Input: []string{"x"}, Model: "e"})
	if err != nil {
		t.Fatal(err)
	}
	sameVector(t, "custom", resp.Data[0].Embedding, []float32{0.6, 0.8})
}

// Bad requests and failures get OpenAI's error body and status; the real
// client surfaces them as *goopenai.APIError.
func TestRecallDataOpenAIEmbedErrors(t *testing.T) {
	s := New()
	defer s.Close()
	s.SetModels(Model{ID: "bge-m3"})
	for _, c := range []struct {
		name   string
		body   map[string]any
		status int
		msg    string
	}{
		{"token ids", map[string]any{"model": "bge-m3", "input": []int{101, 2023, 102}}, 400, "token ids"},
		{"arrays of token ids", map[string]any{"model": "bge-m3", "input": [][]int{{101, 102}}}, 400, "token ids"},
		{"no input", map[string]any{"model": "bge-m3"}, 400, "'input' is a required property"},
		{"empty input", map[string]any{"model": "bge-m3", "input": ""}, 400, "empty string"},
		{"empty array", map[string]any{"model": "bge-m3", "input": []string{}}, 400, "empty array"},
		{"an object", map[string]any{"model": "bge-m3", "input": map[string]any{"text": "x"}}, 400, "'input' must be a string or an array of strings"},
		{"bad format", map[string]any{"model": "bge-m3", "input": "x", "encoding_format": "int8"}, 400, "'encoding_format'"},
		{"zero dimensions", map[string]any{"model": "bge-m3", "input": "x", "dimensions": 0}, 400, "'dimensions'"},
		{"unknown model", map[string]any{"model": "x", "input": "x"}, 404, "The model `x` does not exist."},
	} {
		var a embedAnswer
		st := embedPost(t, s, "", c.body, &a)
		if st != c.status || a.Error == nil || !strings.Contains(a.Error.Message, c.msg) {
			t.Errorf("%s: status %d, error %+v; want %d with %q", c.name, st, a.Error, c.status, c.msg)
		}
	}
	if s.EmbedTokens() != 0 {
		t.Errorf("refused requests counted %d tokens", s.EmbedTokens())
	}

	cfg := goopenai.DefaultConfig("")
	cfg.BaseURL = s.BaseURL()
	c := goopenai.NewClientWithConfig(cfg)
	s.FailEmbed(1, http.StatusTooManyRequests, "Rate limit reached")
	_, err := c.CreateEmbeddings(context.Background(), goopenai.EmbeddingRequestStrings{Input: []string{"x"}, Model: "bge-m3"})
	var apiErr *goopenai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusTooManyRequests || apiErr.Message != "Rate limit reached" {
		t.Errorf("failed request: %v", err)
	}
	if _, err := c.CreateEmbeddings(context.Background(), goopenai.EmbeddingRequestStrings{Input: []string{"x"}, Model: "bge-m3"}); err != nil {
		t.Errorf("after the one failure: %v", err)
	}
	if n := len(s.EmbedRequests()); n != 11 {
		t.Errorf("%d requests recorded, want every one of 11", n)
	}
}
