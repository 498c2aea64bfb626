package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/mother-chat/mother/pkg/broker"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/recall"
	"github.com/mother-chat/mother/pkg/store"
)

// recallIndexFile is the search index under the data directory: derived
// from the channels' files, deleted and rebuilt at will.
const recallIndexFile = "recall.db"

// recallEmbedder is the embedding model of recall.embedProvider through
// the broker (metered as kind embed), or nil: full-text search alone.
func recallEmbedder(cfg *config.Config, b *broker.Broker, logger *slog.Logger) recall.Embedder {
	r := cfg.Recall
	if !r.On() || r.EmbedProvider == "" {
		return nil
	}
	e, err := b.Embedder(r.EmbedProvider, r.EmbedModel)
	if err != nil {
		logger.Warn("recall without embeddings: full-text search alone", "provider", r.EmbedProvider, "model", r.EmbedModel, "err", err)
		return nil
	}
	return e
}

// startRecall opens the search index (state/recall.db) and starts its
// catch-up in the background; the store tells it of each stored line.
// The returned stop ends the indexer and closes the index. Without
// recall (config off, or an index that cannot be opened at all) it
// returns nil: Mother runs without the tools.
func startRecall(cfg *config.Config, st *store.Store, emb recall.Embedder, base *slog.Logger, clk clock.Clock) (*recall.Indexer, func()) {
	logger := base.With("component", "recall")
	if !cfg.Recall.On() {
		return nil, func() {}
	}
	state := filepath.Join(st.DataDir(), "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		logger.Error("recall index cannot be created; Mother runs without searching her history", "err", err)
		return nil, func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	ix, err := recall.Open(ctx, filepath.Join(state, recallIndexFile), logger)
	if err != nil {
		cancel()
		logger.Error("recall index cannot be opened; Mother runs without searching her history", "err", err)
		return nil, func() {}
	}
	opts := recall.IndexerOptions{Logger: base, Clock: clk}
	if emb != nil {
		opts.Embedder, opts.EmbedModel = emb, cfg.Recall.EmbedProvider+"/"+cfg.Recall.EmbedModel
	}
	idx := recall.NewIndexer(ix, st, opts)
	st.OnAppend(idx.Notify)
	done := make(chan struct{})
	go func() {
		defer close(done)
		idx.Run(ctx)
	}()
	return idx, func() {
		st.OnAppend(func(string, string) {})
		cancel()
		<-done
		ix.Close()
	}
}
