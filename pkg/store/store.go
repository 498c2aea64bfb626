// Package store keeps Mother's state as plain files under the data
// directory, in one layout for every platform:
//
//	<data>/config.json
//	<data>/workspace/MEMORY.md, MOTHER.md, SYSTEM.md, skills/, events/
//	<data>/workspace/channels/<adapter>/<channelId>/
//	    log.jsonl       every message the channel saw (chat.ChannelMessage)
//	    context.jsonl   the model context (ContextRecord), with a sync cursor
//	    attachments/ MEMORY.md skills/ scratch/ daily/YYYY-MM-DD.md
//
// Appends are whole lines and fsynced; torn tails are repaired on open;
// rewrites go through a temp file, fsync and rename.
package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/fsync"

	"github.com/mother-chat/mother/pkg/clock"
)

// Store is the root of the on-disk layout.
type Store struct {
	dataDir   string
	workspace string
	logger    *slog.Logger
	clock     clock.Clock

	mu       sync.Mutex
	channels map[string]*Channel
	closed   bool

	// onAppend is told of every line written to a channel's log.jsonl
	// (OnAppend).
	onAppend atomic.Pointer[func(adapter, channelID string)]

	lruMu  sync.Mutex
	cached []*Channel // channels whose parsed context is kept, oldest first
}

// OnAppend sets f to be told, after each line written to a channel's
// log.jsonl, which channel it was (a derived index follows the log this
// way). f must not block: it runs on the path of every message.
func (s *Store) OnAppend(f func(adapter, channelID string)) { s.onAppend.Store(&f) }

func (s *Store) appended(c *Channel) {
	if f := s.onAppend.Load(); f != nil {
		(*f)(c.Adapter, c.ID)
	}
}

// maxCachedContexts is how many channels keep their parsed context in
// memory between runs.
const maxCachedContexts = 8

// touched moves c to the end of the cached list and drops the oldest
// channel's parsed context beyond maxCachedContexts.
func (s *Store) touched(c *Channel) {
	s.lruMu.Lock()
	for i, o := range s.cached {
		if o == c {
			s.cached = append(s.cached[:i], s.cached[i+1:]...)
			break
		}
	}
	s.cached = append(s.cached, c)
	var evict *Channel
	if len(s.cached) > maxCachedContexts {
		evict = s.cached[0]
		s.cached = append(s.cached[:0], s.cached[1:]...)
	}
	s.lruMu.Unlock()
	if evict != nil {
		evict.dropCache()
	}
}

// DropContextCaches forgets every channel's parsed context. Mother calls it
// once she has been idle for a while (with the memory trim): the cache is
// for bursts of messages, and between conversations a context parsed again
// on the next message costs less than the memory held for it, which grows
// with the context up to the model's window.
func (s *Store) DropContextCaches() {
	s.lruMu.Lock()
	cached := s.cached
	s.cached = nil
	s.lruMu.Unlock()
	for _, c := range cached {
		c.dropCache()
	}
}

// Options tune a Store.
type Options struct {
	Logger *slog.Logger
	// Clock dates daily log files and context records (default clock.Real).
	Clock clock.Clock
}

// Open creates the layout under dataDir if needed and returns the store.
func Open(dataDir string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	ws := filepath.Join(abs, "workspace")
	for _, d := range []string{abs, ws, filepath.Join(ws, "channels"), filepath.Join(ws, "events"), filepath.Join(ws, "skills")} {
		if err := fsync.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	return &Store{
		dataDir:   abs,
		workspace: ws,
		logger:    opts.Logger.With("component", "store"),
		clock:     opts.Clock,
		channels:  map[string]*Channel{},
	}, nil
}

// DataDir is the absolute data directory.
func (s *Store) DataDir() string { return s.dataDir }

// Workspace is <data>/workspace.
func (s *Store) Workspace() string { return s.workspace }

// EventsDir is <data>/workspace/events.
func (s *Store) EventsDir() string { return filepath.Join(s.workspace, "events") }

// ChannelDir is the directory of one channel, without creating it.
func (s *Store) ChannelDir(adapter, channelID string) (string, error) {
	if err := ValidName(adapter); err != nil {
		return "", fmt.Errorf("adapter name: %w", err)
	}
	if err := ValidName(channelID); err != nil {
		return "", fmt.Errorf("channel id: %w", err)
	}
	return filepath.Join(s.workspace, "channels", adapter, channelID), nil
}

// Channel opens (creating and repairing) one channel's store. Channels are
// cached; every caller gets the same *Channel.
func (s *Store) Channel(adapter, channelID string) (*Channel, error) {
	key := adapter + "/" + channelID
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("store closed")
	}
	if c, ok := s.channels[key]; ok {
		return c, nil
	}
	dir, err := s.ChannelDir(adapter, channelID)
	if err != nil {
		return nil, err
	}
	c, err := openChannel(dir, adapter, channelID, s.logger, s.clock)
	if err != nil {
		return nil, err
	}
	c.touched = s.touched
	c.appended = s.appended
	s.channels[key] = c
	return c, nil
}

// ChannelRef names a channel found on disk.
type ChannelRef struct{ Adapter, ID string }

// ListChannels returns the channels present on disk, sorted.
func (s *Store) ListChannels() ([]ChannelRef, error) {
	root := filepath.Join(s.workspace, "channels")
	adapters, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("list channels: %w", err)
	}
	var out []ChannelRef
	for _, a := range adapters {
		if !a.IsDir() || ValidName(a.Name()) != nil {
			continue
		}
		chans, err := os.ReadDir(filepath.Join(root, a.Name()))
		if err != nil {
			return nil, fmt.Errorf("list channels: %w", err)
		}
		for _, c := range chans {
			if c.IsDir() && ValidName(c.Name()) == nil {
				out = append(out, ChannelRef{Adapter: a.Name(), ID: c.Name()})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Adapter != out[j].Adapter {
			return out[i].Adapter < out[j].Adapter
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Close closes every open channel.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var errs []error
	for _, c := range s.channels {
		errs = append(errs, c.close())
	}
	return errors.Join(errs...)
}

// ValidName checks an adapter name or channel id used as a path element;
// the rule is chat.ValidID's.
func ValidName(s string) error { return chat.ValidID(s) }
