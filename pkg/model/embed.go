package model

import "context"

// Embedder is a provider that turns texts into vectors (Ollama's
// /api/embed, an OpenAI-compatible server's /v1/embeddings). It is an
// optional ability of a Provider, found by type assertion. The vectors
// come in the order of texts; Usage counts the tokens the server read.
type Embedder interface {
	Embed(ctx context.Context, model string, texts []string) ([][]float32, Usage, error)
}
