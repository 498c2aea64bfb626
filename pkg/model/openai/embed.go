package openai

import (
	"context"
	"fmt"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/mother-chat/mother/pkg/model"
)

var _ model.Embedder = (*Provider)(nil)

// Embed returns the embeddings of texts by name, from POST
// /v1/embeddings.
func (p *Provider) Embed(ctx context.Context, name string, texts []string) ([][]float32, model.Usage, error) {
	if len(texts) == 0 {
		return nil, model.Usage{}, nil
	}
	resp, err := p.client.CreateEmbeddings(ctx, goopenai.EmbeddingRequestStrings{Input: texts, Model: goopenai.EmbeddingModel(name)})
	if err != nil {
		if ctx.Err() != nil {
			return nil, model.Usage{}, ctx.Err()
		}
		return nil, model.Usage{}, fmt.Errorf("%s: embed %s: %w", p.where(), name, err)
	}
	out := make([][]float32, len(texts))
	for _, d := range resp.Data {
		if d.Index < 0 || d.Index >= len(texts) {
			return nil, model.Usage{}, fmt.Errorf("%s: embed %s: vector of index %d for %d texts", p.where(), name, d.Index, len(texts))
		}
		out[d.Index] = d.Embedding
	}
	for i, v := range out {
		if v == nil {
			return nil, model.Usage{}, fmt.Errorf("%s: embed %s: no vector for text %d", p.where(), name, i)
		}
	}
	return out, model.Usage{InputTokens: int64(resp.Usage.PromptTokens)}, nil
}
