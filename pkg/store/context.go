package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/jsonl"
	"github.com/mother-chat/mother/pkg/model"
)

// Context record types.
const (
	RecordSession    = "session"
	RecordMessage    = "message"
	RecordCompaction = "compaction"
	// RecordSeen marks a log message the context already holds in another
	// form (Mother's own reply, logged after the run), so sync skips it.
	RecordSeen = "seen"
)

// ContextRecord is one line of context.jsonl.
type ContextRecord struct {
	Type string    `json:"type"`
	Time time.Time `json:"ts"`
	// MsgID is the log message this record came from (synced user
	// messages) or stands for (seen).
	MsgID string `json:"msgId,omitempty"`
	// LogEnd, when set, is the sync cursor after this record: the offset
	// in log.jsonl just past message MsgID.
	LogEnd  int64          `json:"logEnd,omitempty"`
	Message *model.Message `json:"message,omitempty"`
	// Images are the channel-relative paths of a synced message's image
	// attachments; the session loads them inline for the model, so the
	// context file stays small.
	Images []string `json:"images,omitempty"`
	// Summary is the compaction summary of everything before this record.
	Summary  string `json:"summary,omitempty"`
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// Seen carries, on a compaction record, the seen ids that lie past the
	// cursor, so a rewrite does not forget them.
	Seen []string `json:"seen,omitempty"`
}

// Cursor is how far log.jsonl has been synced into the context.
type Cursor struct {
	Offset int64
	LastID string
}

// ContextState is the loaded context.jsonl.
type ContextState struct {
	Records []ContextRecord
	Cursor  Cursor
	// Seen holds ids of log messages the context holds in another form
	// (Mother's replies); compaction keeps only those past the cursor.
	Seen map[string]bool
	// IDs holds every log message id a record names: the messages synced
	// and the ones marked seen.
	IDs map[string]bool
}

func newContextState() *ContextState {
	return &ContextState{Seen: map[string]bool{}, IDs: map[string]bool{}}
}

// ReplaceContext replaces context.jsonl with recs through temp file, fsync
// and rename, without archiving what was there: it is for importers
// (mother migrate) writing a channel's first context. Records keep their
// times; a zero time is set to now.
func (c *Channel) ReplaceContext(recs []ContextRecord) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	buf, _, err := c.encodeRecords(recs)
	if err != nil {
		return fmt.Errorf("replace context: %w", err)
	}
	if err := atomicfile.WriteFile(c.ContextPath(), buf, 0o600); err != nil {
		return err
	}
	if err := c.ctx.Close(); err != nil {
		return err
	}
	nctx, _, err := jsonl.OpenWith(c.ContextPath(), contextOptions)
	if err != nil {
		return err
	}
	c.ctx = nctx
	c.cache, c.cacheEnd = nil, 0
	return nil
}

// encodeRecords is recs as context.jsonl lines, a zero time set to now,
// and the records as encoded (with those times).
func (c *Channel) encodeRecords(recs []ContextRecord) (buf []byte, stamped []ContextRecord, err error) {
	stamped = make([]ContextRecord, len(recs))
	for i, r := range recs {
		if r.Time.IsZero() {
			r.Time = c.clock.Now()
		}
		line, err := json.Marshal(r)
		if err != nil {
			return nil, nil, err
		}
		buf = append(append(buf, line...), '\n')
		stamped[i] = r
	}
	return buf, stamped, nil
}

// AppendContext appends records to context.jsonl, each as one line, with
// one write; an fsync follows within FlushAfter (see contextOptions).
func (c *Channel) AppendContext(recs ...ContextRecord) error {
	if len(recs) == 0 {
		return nil
	}
	buf, stamped, err := c.encodeRecords(recs)
	if err != nil {
		return fmt.Errorf("append context: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	start, end, err := c.ctx.AppendLines(buf)
	switch {
	case err != nil:
		// What reached the file is unknown: the next load parses it
		// again (a holder's state no longer follows the file).
		c.cache, c.cacheEnd = nil, 0
	case c.cache != nil && c.cacheEnd == start:
		// The parsed context is current up to these lines: take them in
		// as written, so the next load reads nothing back.
		for _, r := range stamped {
			c.cache.add(r)
		}
		c.cacheEnd = end
	}
	return err
}

// LoadContext reads context.jsonl. Its size is bounded by compaction; the
// parsed records of the store's most recently loaded channels are kept
// (maxCachedContexts), so a run reads only what was appended since the last
// load, not the whole file again. Lines that do not parse are skipped with
// a warning (they cannot come from Mother's own appends).
func (c *Channel) LoadContext() (ContextState, error) {
	c.mu.Lock()
	st, err := c.loadContextLocked()
	c.mu.Unlock()
	if err == nil && c.touched != nil {
		c.touched(c)
	}
	return st, err
}

// OpenContext is LoadContext without the copy: it returns the channel's
// parsed context itself, brought up to date, and keeps it (not dropped by
// the store's cache limit or an idle trim) until release is called. It is
// for the channel's single writer: the state follows every AppendContext
// and RewriteContext made through this Channel, in place, and must not be
// modified by the caller. After a failed append or rewrite it no longer
// follows the file (the next OpenContext parses it again).
func (c *Channel) OpenContext() (st *ContextState, release func(), err error) {
	c.mu.Lock()
	err = c.parseContextLocked()
	if err == nil {
		st = c.cache
		c.holders++
	}
	c.mu.Unlock()
	if err != nil {
		return nil, nil, fmt.Errorf("load context: %w", err)
	}
	if c.touched != nil {
		c.touched(c)
	}
	var once sync.Once
	return st, func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.holders--
			if c.holders == 0 && c.dropLater {
				c.cache, c.cacheEnd, c.dropLater = nil, 0, false
			}
		})
	}, nil
}

// parseContextLocked brings the cache up to the file's end, reading only
// what was appended since it was last current.
func (c *Channel) parseContextLocked() error {
	size := c.ctx.Size()
	if c.cache == nil || c.cacheEnd > size {
		c.cache, c.cacheEnd = newContextState(), 0
	}
	st := c.cache
	err := jsonl.Scan(c.ContextPath(), c.cacheEnd, size, func(line []byte, start, _ int64) error {
		var r ContextRecord
		if err := json.Unmarshal(line, &r); err != nil {
			c.logger.Warn("skipping unreadable context.jsonl line", "offset", start, "err", err)
			return nil
		}
		st.add(r)
		return nil
	})
	if err != nil {
		c.cache, c.cacheEnd = nil, 0
		return err
	}
	c.cacheEnd = size
	return nil
}

func (c *Channel) loadContextLocked() (ContextState, error) {
	if err := c.parseContextLocked(); err != nil {
		return ContextState{}, fmt.Errorf("load context: %w", err)
	}
	st := c.cache
	out := ContextState{Records: append([]ContextRecord(nil), st.Records...), Cursor: st.Cursor, Seen: make(map[string]bool, len(st.Seen)), IDs: make(map[string]bool, len(st.IDs))}
	for id := range st.Seen {
		out.Seen[id] = true
	}
	for id := range st.IDs {
		out.IDs[id] = true
	}
	return out, nil
}

// add takes in one record read or written, in file order.
func (st *ContextState) add(r ContextRecord) {
	st.Records = append(st.Records, r)
	if r.LogEnd > 0 {
		st.Cursor = Cursor{Offset: r.LogEnd, LastID: r.MsgID}
	}
	if r.MsgID != "" {
		st.IDs[r.MsgID] = true
		if r.Type == RecordSeen {
			st.Seen[r.MsgID] = true
		}
	}
	for _, id := range r.Seen {
		st.Seen[id] = true
		st.IDs[id] = true
	}
}

// reset makes st the state of exactly recs, in place (holders keep their
// pointer).
func (st *ContextState) reset(recs []ContextRecord) {
	*st = *newContextState()
	for _, r := range recs {
		st.add(r)
	}
}

// dropCache forgets the parsed context (the store keeps only a few), or,
// while OpenContext holders use it, once the last has released it.
func (c *Channel) dropCache() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holders > 0 {
		c.dropLater = true
		return
	}
	c.cache, c.cacheEnd = nil, 0
}

// RewriteContext replaces context.jsonl with recs (after a compaction). The
// old file's records are appended to context.archive.jsonl first, so nothing
// is lost; then the new content goes in through temp file, fsync, rename.
func (c *Channel) RewriteContext(recs []ContextRecord) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, err := os.Open(c.ContextPath())
	if err != nil {
		return fmt.Errorf("rewrite context: %w", err)
	}
	arch, err := os.OpenFile(filepath.Join(c.dir, "context.archive.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		old.Close()
		return fmt.Errorf("rewrite context: %w", err)
	}
	_, cerr := io.Copy(arch, io.LimitReader(old, c.ctx.Size()))
	serr := fsync.File(arch, fsync.KindContext)
	if err := errors.Join(cerr, serr, arch.Close(), old.Close()); err != nil {
		return fmt.Errorf("archive context: %w", err)
	}
	buf, stamped, err := c.encodeRecords(recs)
	if err != nil {
		return fmt.Errorf("rewrite context: %w", err)
	}
	if err := atomicfile.WriteFile(c.ContextPath(), buf, 0o600); err != nil {
		return err
	}
	if err := c.ctx.Close(); err != nil {
		c.cache, c.cacheEnd = nil, 0
		return err
	}
	nctx, _, err := jsonl.OpenWith(c.ContextPath(), contextOptions)
	if err != nil {
		c.cache, c.cacheEnd = nil, 0
		return err
	}
	c.ctx = nctx
	if c.cache != nil {
		// The new content, parsed as written, in the same state a
		// holder has.
		c.cache.reset(stamped)
		c.cacheEnd = int64(len(buf))
	}
	return nil
}
