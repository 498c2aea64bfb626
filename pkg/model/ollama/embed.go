package ollama

import (
	"context"
	"fmt"

	"github.com/ollama/ollama/api"

	"github.com/mother-chat/mother/pkg/model"
)

var _ model.Embedder = (*Provider)(nil)

// Embed returns the embeddings of texts by name, from POST /api/embed.
func (p *Provider) Embed(ctx context.Context, name string, texts []string) ([][]float32, model.Usage, error) {
	if len(texts) == 0 {
		return nil, model.Usage{}, nil
	}
	resp, err := p.client.Embed(ctx, &api.EmbedRequest{Model: name, Input: texts})
	if err != nil {
		return nil, model.Usage{}, fmt.Errorf("ollama embed %s: %w", name, err)
	}
	if len(resp.Embeddings) != len(texts) {
		return nil, model.Usage{}, fmt.Errorf("ollama embed %s: %d vectors for %d texts", name, len(resp.Embeddings), len(texts))
	}
	return resp.Embeddings, model.Usage{InputTokens: int64(resp.PromptEvalCount)}, nil
}
