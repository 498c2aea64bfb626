package ollamatest

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"github.com/mother-chat/mother/internal/recalldata"
)

func embedClient(t *testing.T, s *Server) *api.Client {
	t.Helper()
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	return api.NewClient(u, http.DefaultClient)
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
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

// The real client's Embed gets recalldata.Embed's vectors, in order, with
// the token count, and the fake records what was sent.
func TestRecallDataOllamaEmbedClient(t *testing.T) {
	s := New()
	defer s.Close()
	s.SetModels("nomic-embed-text")
	c := embedClient(t, s)
	texts := []string{"the kitchen tap is leaking again", "a dripping faucet in the kitchen", "car insurance renewal is due"}
	truncate := true
	resp, err := c.Embed(context.Background(), &api.EmbedRequest{Model: "nomic-embed-text", Input: texts,
		Truncate: &truncate, KeepAlive: &api.Duration{Duration: 5 * time.Minute}, Options: map[string]any{"num_ctx": 2048}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Model != "nomic-embed-text" || len(resp.Embeddings) != 3 {
		t.Fatalf("model %q, %d embeddings", resp.Model, len(resp.Embeddings))
	}
	for i, text := range texts {
		sameVector(t, text, resp.Embeddings[i], recalldata.Embed(text))
	}
	if near, far := cosine(resp.Embeddings[0], resp.Embeddings[1]), cosine(resp.Embeddings[0], resp.Embeddings[2]); near <= far {
		t.Errorf("cosine of the two leaks %.3f, of a leak and insurance %.3f", near, far)
	}
	want := 0
	for _, text := range texts {
		want += EmbedTokenCount(text)
	}
	if resp.PromptEvalCount != want || s.EmbedTokens() != want {
		t.Errorf("prompt_eval_count %d, EmbedTokens %d, want %d", resp.PromptEvalCount, s.EmbedTokens(), want)
	}
	if resp.TotalDuration <= 0 || resp.LoadDuration <= 0 {
		t.Errorf("durations %v, %v", resp.TotalDuration, resp.LoadDuration)
	}

	// A lone string is one text.
	one, err := c.Embed(context.Background(), &api.EmbedRequest{Model: "nomic-embed-text", Input: "the boiler is broken"})
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Embeddings) != 1 {
		t.Fatalf("%d embeddings for one string", len(one.Embeddings))
	}
	sameVector(t, "one string", one.Embeddings[0], recalldata.Embed("the boiler is broken"))

	reqs := s.EmbedRequests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests recorded", len(reqs))
	}
	r := reqs[0]
	if r.Model != "nomic-embed-text" || strings.Join(r.Input, "|") != strings.Join(texts, "|") ||
		r.Truncate == nil || !*r.Truncate || string(r.KeepAlive) != `"5m0s"` || r.Options["num_ctx"] != float64(2048) {
		t.Errorf("recorded %+v (keep_alive %s)", r, r.KeepAlive)
	}
	if reqs[1].Truncate != nil || len(reqs[1].Input) != 1 || string(reqs[1].RawInput) != `"the boiler is broken"` {
		t.Errorf("recorded %+v (raw input %s)", reqs[1], reqs[1].RawInput)
	}
	if len(s.Requests()) != 0 {
		t.Errorf("embed requests recorded as chat requests")
	}
}

// SetEmbed replaces the embedding; the fake scales it to unit length and
// cuts it to "dimensions" as Ollama does; an empty input embeds nothing.
func TestRecallDataOllamaEmbedSetEmbed(t *testing.T) {
	s := New()
	defer s.Close()
	s.SetEmbed(func(text string) []float32 { return []float32{float32(len(text)), 0, 0, 3} })
	c := embedClient(t, s)
	resp, err := c.Embed(context.Background(), &api.EmbedRequest{Model: "m", Input: []string{"four"}})
	if err != nil {
		t.Fatal(err)
	}
	sameVector(t, "custom", resp.Embeddings[0], []float32{0.8, 0, 0, 0.6})
	resp, err = c.Embed(context.Background(), &api.EmbedRequest{Model: "m", Input: []string{"four"}, Dimensions: 3})
	if err != nil {
		t.Fatal(err)
	}
	sameVector(t, "cut to 3", resp.Embeddings[0], []float32{1, 0, 0})
	resp, err = c.Embed(context.Background(), &api.EmbedRequest{Model: "m", Input: ""})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Embeddings == nil || len(resp.Embeddings) != 0 || resp.PromptEvalCount != 0 {
		t.Errorf("empty input: %+v", resp)
	}
}

// The failures come back through the real client as api.StatusError with
// Ollama's status and message.
func TestRecallDataOllamaEmbedErrors(t *testing.T) {
	s := New()
	defer s.Close()
	s.SetModels("nomic-embed-text")
	c := embedClient(t, s)
	ctx := context.Background()
	statusErr := func(err error) api.StatusError {
		t.Helper()
		var se api.StatusError
		if !errors.As(err, &se) {
			t.Fatalf("error %v (%T), want an api.StatusError", err, err)
		}
		return se
	}

	_, err := c.Embed(ctx, &api.EmbedRequest{Model: "x", Input: "hello"})
	if se := statusErr(err); se.StatusCode != http.StatusNotFound || se.ErrorMessage != `model "x" not found, try pulling it first` {
		t.Errorf("unknown model: %d %q", se.StatusCode, se.ErrorMessage)
	}

	_, err = c.Embed(ctx, &api.EmbedRequest{Model: "nomic-embed-text", Input: []any{"hello", 7}})
	if se := statusErr(err); se.StatusCode != http.StatusBadRequest || se.ErrorMessage != "invalid input type" {
		t.Errorf("a number in the input: %d %q", se.StatusCode, se.ErrorMessage)
	}

	s.FailEmbed(1, http.StatusInternalServerError, "llama runner process has terminated")
	_, err = c.Embed(ctx, &api.EmbedRequest{Model: "nomic-embed-text", Input: "hello"})
	if se := statusErr(err); se.StatusCode != http.StatusInternalServerError || se.ErrorMessage != "llama runner process has terminated" {
		t.Errorf("failed: %d %q", se.StatusCode, se.ErrorMessage)
	}
	if _, err := c.Embed(ctx, &api.EmbedRequest{Model: "nomic-embed-text", Input: "hello"}); err != nil {
		t.Errorf("after the one failure: %v", err)
	}

	s.SetContextLength(4)
	long := strings.Repeat("the washing machine is leaking ", 4)
	no := false
	_, err = c.Embed(ctx, &api.EmbedRequest{Model: "nomic-embed-text", Input: long, Truncate: &no})
	if se := statusErr(err); se.StatusCode != http.StatusBadRequest || se.ErrorMessage != "the input length exceeds the context length" {
		t.Errorf("too long, no truncation: %d %q", se.StatusCode, se.ErrorMessage)
	}
	resp, err := c.Embed(ctx, &api.EmbedRequest{Model: "nomic-embed-text", Input: long})
	if err != nil {
		t.Fatal(err)
	}
	if resp.PromptEvalCount != 4 {
		t.Errorf("truncated input counted %d tokens, want the context's 4", resp.PromptEvalCount)
	}
	sameVector(t, "truncated", resp.Embeddings[0], recalldata.Embed(long[:16]))
	if n := len(s.EmbedRequests()); n != 6 {
		t.Errorf("%d requests recorded, want every one of 6", n)
	}
}
