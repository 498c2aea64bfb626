package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/jsonl"
)

// Channel is one channel's directory and files.
type Channel struct {
	Adapter string
	ID      string
	dir     string
	logger  *slog.Logger
	clock   clock.Clock

	log *jsonl.File

	mu  sync.Mutex // guards ctx (replaced on rewrite) and daily appends
	ctx *jsonl.File
	// daily is the open daily log file named dailyName (kept open so a
	// message costs no open(2) for it).
	daily     *os.File
	dailyName string

	// cache is context.jsonl parsed up to cacheEnd (guarded by mu; nil
	// when not kept). Appends and rewrites through this Channel keep it
	// current in place. holders counts the OpenContext callers using it:
	// while there are any it is not dropped (dropLater remembers a drop
	// asked for meanwhile).
	cache     *ContextState
	cacheEnd  int64
	holders   int
	dropLater bool
	// touched tells the store this channel's context was loaded.
	touched func(*Channel)
	// appended tells the store a line was written to log.jsonl.
	appended func(*Channel)
}

// FlushAfter bounds how long a record written without waiting for its
// fsync (context.jsonl's, Mother's own replies in log.jsonl) stays without
// one.
const FlushAfter = time.Second

// The durability of the two files. log.jsonl is the record: every append
// that someone is told about (the dispatcher, a run) waits for the fsync
// that covers it (group commit). context.jsonl is the model's working
// copy: its appends are written at once (a killed process loses none) and
// fsynced within FlushAfter, since what a power loss could take from its
// end is rebuilt from log.jsonl by the next sync (the users' messages and
// Mother's replies; only the last second's tool calls are lost). The
// timers run on the real clock: they decide durability, never behaviour.
var (
	logOptions     = jsonl.Options{Sync: true, Kind: fsync.KindLog, FlushAfter: FlushAfter, Clock: clock.Real{}}
	contextOptions = jsonl.Options{Kind: fsync.KindContext, FlushAfter: FlushAfter, Clock: clock.Real{}}
)

func openChannel(dir, adapter, id string, logger *slog.Logger, clk clock.Clock) (*Channel, error) {
	for _, d := range []string{dir, filepath.Join(dir, "attachments"), filepath.Join(dir, "skills"), filepath.Join(dir, "scratch"), filepath.Join(dir, "daily")} {
		if err := fsync.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	mem := filepath.Join(dir, "MEMORY.md")
	if f, err := os.OpenFile(mem, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("create %s: %w", mem, err)
	}
	lg := logger.With("channel", adapter+"/"+id)
	log, torn, err := jsonl.OpenWith(filepath.Join(dir, "log.jsonl"), logOptions)
	if err != nil {
		return nil, err
	}
	if torn > 0 {
		lg.Warn("repaired torn last line of log.jsonl", "bytes", torn, "kept_in", "log.jsonl.torn")
	}
	ctx, torn, err := jsonl.OpenWith(filepath.Join(dir, "context.jsonl"), contextOptions)
	if err != nil {
		log.Close()
		return nil, err
	}
	if torn > 0 {
		lg.Warn("repaired torn last line of context.jsonl", "bytes", torn, "kept_in", "context.jsonl.torn")
	}
	return &Channel{Adapter: adapter, ID: id, dir: dir, logger: lg, clock: clk, log: log, ctx: ctx}, nil
}

func (c *Channel) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var derr error
	if c.daily != nil {
		derr = c.daily.Close()
		c.daily = nil
	}
	return errors.Join(c.log.Close(), c.ctx.Close(), derr)
}

// Dir is the channel directory.
func (c *Channel) Dir() string { return c.dir }

// QualifiedID is "<adapter>/<channelId>".
func (c *Channel) QualifiedID() string { return chat.QualifiedID(c.Adapter, c.ID) }

// LogPath is the path of log.jsonl.
func (c *Channel) LogPath() string { return filepath.Join(c.dir, "log.jsonl") }

// ContextPath is the path of context.jsonl.
func (c *Channel) ContextPath() string { return filepath.Join(c.dir, "context.jsonl") }
