package recall

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/store"
)

// Files is where the indexer finds the channels (a *store.Store).
type Files interface {
	ListChannels() ([]store.ChannelRef, error)
	ChannelDir(adapter, channelID string) (string, error)
}

// Status is how far the index is, for the log and the status page.
type Status struct {
	// CatchingUp is true while the start's catch-up runs.
	CatchingUp bool
	// Channels is how many channels the catch-up covers, Done how many
	// it has finished.
	Channels, Done int
	// Added counts the documents indexed since start.
	Added int
	// Docs is the number of documents in the index when last counted.
	Docs int
	// Embedded counts the documents given an embedding since start;
	// EmbedModel is the model ("" without embeddings).
	Embedded   int
	EmbedModel string
	// Err is the last indexing failure ("" for none).
	Err string
}

// Indexer keeps the index caught up with the files: all channels at
// start (Run), then each channel Notify names, a moment after (lines
// arrive in bursts; no write of the index is on the path of a message).
type Indexer struct {
	ix     *Index
	files  Files
	logger *slog.Logger
	clock  clock.Clock
	embed  *embedder

	// busy, when set, is told of each piece of indexing work (SetBusy).
	busy atomic.Pointer[func() func()]

	mu      sync.Mutex
	pending map[string]store.ChannelRef
	status  Status
	wake    chan struct{}
}

// IndexerOptions build an Indexer.
type IndexerOptions struct {
	Logger *slog.Logger
	Clock  clock.Clock
	// Embedder, if set, gives documents an embedding in the background
	// and makes Search rank by meaning as well as by words.
	Embedder Embedder
	// EmbedModel names the embedding model (kept with each vector).
	EmbedModel string
}

// NewIndexer returns an indexer of ix over files.
func NewIndexer(ix *Index, files Files, opts IndexerOptions) *Indexer {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	r := &Indexer{ix: ix, files: files, logger: opts.Logger.With("component", "recall"), clock: opts.Clock,
		pending: map[string]store.ChannelRef{}, wake: make(chan struct{}, 1)}
	if opts.Embedder != nil {
		r.embed = &embedder{ix: ix, e: opts.Embedder, model: opts.EmbedModel, logger: r.logger}
		r.status.EmbedModel = opts.EmbedModel
	}
	r.status.CatchingUp = true
	return r
}

// SetBusy has begin called before each piece of indexing work (a
// channel's sync, a batch of embeddings) and the func it returns called
// after: Mother counts it as work, so the memory and code pages it
// touched are handed back once she is quiet (pkg/memtrim).
func (r *Indexer) SetBusy(begin func() (end func())) { r.busy.Store(&begin) }

// working is begin's end, or a no-op without SetBusy.
func (r *Indexer) working() func() {
	if b := r.busy.Load(); b != nil {
		return (*b)()
	}
	return func() {}
}

// Index is the index the indexer fills.
func (r *Indexer) Index() *Index { return r.ix }

// notifyDelay is how long after a Notify the channel is indexed: the
// lines of one answer (the question, tool notices, the answer) go in one
// transaction.
//
// Five seconds: a conversation's burst of lines goes in one transaction,
// after Mother has handed back what the burst mapped, and the memory the
// indexing touches is handed back after it in turn (SetBusy). Nothing
// waits for it: a search indexes its channel's newest lines first.
const notifyDelay = 5 * time.Second

// Notify tells the indexer that a line was stored in the channel. It
// never blocks.
func (r *Indexer) Notify(adapter, channelID string) {
	r.mu.Lock()
	r.pending[chat.QualifiedID(adapter, channelID)] = store.ChannelRef{Adapter: adapter, ID: channelID}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Status says how far the index is.
func (r *Indexer) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// Run catches the index up with every channel, logging its progress, then
// indexes the channels Notify names until ctx ends.
func (r *Indexer) Run(ctx context.Context) {
	r.catchUp(ctx)
	for {
		if r.embed != nil {
			r.embedSome(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		select {
		case <-ctx.Done():
			return
		case <-clock.After(r.clock, notifyDelay):
		}
		r.mu.Lock()
		refs := r.pending
		r.pending = map[string]store.ChannelRef{}
		r.mu.Unlock()
		for _, ref := range refs {
			if _, err := r.sync(ctx, ref); err != nil && ctx.Err() == nil {
				r.logger.Warn("recall index not updated", "channel", chat.QualifiedID(ref.Adapter, ref.ID), "err", err)
			}
		}
	}
}

// embedSome gives the documents without an embedding one, a batch at a
// time, until none is left, ctx ends or new lines wait to be indexed.
func (r *Indexer) embedSome(ctx context.Context) {
	for ctx.Err() == nil && len(r.wake) == 0 {
		end := r.working()
		n, err := r.embed.batch(ctx)
		end()
		r.mu.Lock()
		r.status.Embedded += n
		if err != nil {
			r.status.Err = err.Error()
		}
		r.mu.Unlock()
		if err != nil || n == 0 {
			if err != nil && ctx.Err() == nil {
				r.logger.Warn("embeddings paused", "err", err)
			}
			return
		}
	}
}

func (r *Indexer) sync(ctx context.Context, ref store.ChannelRef) (int, error) {
	defer r.working()()
	dir, err := r.files.ChannelDir(ref.Adapter, ref.ID)
	if err != nil {
		return 0, err
	}
	n, err := r.ix.SyncChannel(ctx, chat.QualifiedID(ref.Adapter, ref.ID), dir)
	r.mu.Lock()
	r.status.Added += n
	if err != nil {
		r.status.Err = err.Error()
	}
	r.mu.Unlock()
	return n, err
}

func (r *Indexer) catchUp(ctx context.Context) {
	start := r.clock.Now()
	refs, err := r.files.ListChannels()
	if err != nil {
		r.logger.Error("recall index not caught up", "err", err)
	}
	r.mu.Lock()
	r.status.Channels = len(refs)
	r.mu.Unlock()
	r.logger.Info("recall index catching up", "path", r.ix.Path(), "channels", len(refs))
	added := 0
	for i, ref := range refs {
		if ctx.Err() != nil {
			return
		}
		n, err := r.sync(ctx, ref)
		if err != nil && ctx.Err() == nil {
			r.logger.Warn("recall index: channel not caught up", "channel", chat.QualifiedID(ref.Adapter, ref.ID), "err", err)
		}
		added += n
		r.mu.Lock()
		r.status.Done = i + 1
		r.mu.Unlock()
		if n > 0 {
			r.logger.Info("recall index progress", "channel", chat.QualifiedID(ref.Adapter, ref.ID), "added", n, "channels_done", i+1, "channels", len(refs))
		}
	}
	docs, _ := r.ix.Count(ctx, "")
	r.mu.Lock()
	r.status.CatchingUp = false
	r.status.Docs = docs
	r.mu.Unlock()
	r.logger.Info("recall index caught up", "added", added, "docs", docs, "took", clock.Since(r.clock, start).Round(time.Millisecond).String())
}

// Search finds the documents of the channel (adapter, channelID) that
// answer query best: by words (BM25), fused with meaning when embeddings
// are on (reciprocal rank fusion). The channel's newest lines are
// indexed first.
func (r *Indexer) Search(ctx context.Context, adapter, channelID, query string, limit int) ([]Hit, error) {
	if limit <= 0 {
		limit = 5
	}
	if err := r.fresh(ctx, adapter, channelID); err != nil {
		return nil, err
	}
	channel := chat.QualifiedID(adapter, channelID)
	if r.embed == nil {
		return r.ix.Search(ctx, channel, query, limit)
	}
	return r.embed.search(ctx, channel, query, limit)
}

// Around reads the messages around document id of the channel.
func (r *Indexer) Around(ctx context.Context, adapter, channelID, id string, before, after int) ([]Doc, int, error) {
	if err := r.fresh(ctx, adapter, channelID); err != nil {
		return nil, 0, err
	}
	return r.ix.Around(ctx, chat.QualifiedID(adapter, channelID), id, before, after)
}

// IsDM reports whether the channel is a direct message, as its messages
// say (after indexing its newest lines).
func (r *Indexer) IsDM(ctx context.Context, adapter, channelID string) (bool, error) {
	if err := r.fresh(ctx, adapter, channelID); err != nil {
		return false, err
	}
	return r.ix.IsDM(ctx, chat.QualifiedID(adapter, channelID))
}

// fresh indexes the channel's newest lines (while the start's catch-up
// runs, after the channel it is on: a search never misses what is on
// disk).
func (r *Indexer) fresh(ctx context.Context, adapter, channelID string) error {
	if _, err := r.sync(ctx, store.ChannelRef{Adapter: adapter, ID: channelID}); err != nil {
		return fmt.Errorf("recall: %w", err)
	}
	return nil
}
