package config

import "strings"

// Recall is Mother's search over the channels' history (the recall and
// recall_read tools, docs/agent.md): a full-text index under
// state/recall.db, and, when an embedding model is named, embeddings
// ranked together with it.
type Recall struct {
	// Enabled gives Mother and chicks the search (default true). Off, no
	// index is kept (state/recall.db may be deleted).
	Enabled *bool `json:"enabled"`
	// EmbedProvider serves the embeddings: "ollama" or "openai:<name>"
	// (an endpoint of providers.openai). Empty (the default): full-text
	// search alone.
	EmbedProvider string `json:"embedProvider"`
	// EmbedModel is the embedding model of EmbedProvider, such as
	// "nomic-embed-text"; required with EmbedProvider.
	EmbedModel string `json:"embedModel"`
}

// On reports whether recall is enabled.
func (r Recall) On() bool { return r.Enabled == nil || *r.Enabled }

func (r *Recall) setDefaults() {
	if r.Enabled == nil {
		on := true
		r.Enabled = &on
	}
}

func (c *Config) validateRecall(p *problems) {
	r := c.Recall
	switch {
	case r.EmbedProvider == "":
		if r.EmbedModel != "" {
			p.bad("recall.embedProvider", "missing, needed by recall.embedModel (\"ollama\" or \"openai:<name>\")")
		}
		return
	case r.EmbedProvider == "ollama":
	case r.EmbedProvider == "openai" || strings.HasPrefix(r.EmbedProvider, "openai:"):
		c.checkProvider(p, "recall.embedProvider", r.EmbedProvider)
	default:
		p.bad("recall.embedProvider", "%q serves no embeddings: use \"ollama\" or \"openai:<name>\" of providers.openai, or leave it empty for full-text search alone", r.EmbedProvider)
	}
	if r.EmbedModel == "" {
		p.bad("recall.embedModel", "missing, needed by recall.embedProvider")
	}
}
