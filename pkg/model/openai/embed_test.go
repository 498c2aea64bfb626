package openai_test

import (
	"slices"
	"testing"

	"github.com/mother-chat/mother/internal/recalldata"
	"github.com/mother-chat/mother/pkg/model/openai/openaitest"
)

// TestRecallEmbedOpenAI: Embed posts the texts to the server's
// /v1/embeddings through the go-openai client, returns one vector per
// text in their order, and the prompt tokens the server counted.
func TestRecallEmbedOpenAI(t *testing.T) {
	t.Parallel()
	fake := openaitest.New()
	defer fake.Close()
	p := newProvider(t, fake)
	texts := []string{"the backup runs at night", "lunch at noon"}
	vecs, u, err := p.Embed(t.Context(), "embed-model", texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 2 || len(vecs[0]) != recalldata.Dims || u.InputTokens == 0 {
		t.Fatalf("Embed = %d vectors (%d dims), usage %+v", len(vecs), len(vecs[0]), u)
	}
	reqs := fake.EmbedRequests()
	if len(reqs) != 1 || reqs[0].Model != "embed-model" || !slices.Equal(reqs[0].Input, texts) {
		t.Errorf("server got %+v", reqs)
	}
	want := recalldata.Embed(texts[1])
	for i := range want {
		if d := vecs[1][i] - want[i]; d > 1e-5 || d < -1e-5 {
			t.Fatalf("vector of text 1 differs at %d: %v, want %v (out of order?)", i, vecs[1][i], want[i])
		}
	}
}
