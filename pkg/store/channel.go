package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/jsonl"
	"github.com/mother-chat/mother/pkg/model"
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

// LoggedMessage is a message read from log.jsonl with its end offset.
type LoggedMessage struct {
	Msg chat.ChannelMessage
	End int64
}

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

// AppendMessage logs one message (a whole message, never a chunk) to
// log.jsonl and a one-line entry to the day's daily log. It returns once
// an fsync covers the line.
func (c *Channel) AppendMessage(m chat.ChannelMessage) (LoggedMessage, error) {
	return c.appendMessage(m, false)
}

// AppendOwnMessage is AppendMessage for a message nobody waits on being
// logged (Mother's reply, already posted): it returns once the line is
// written, and the log's next fsync (the next message's, or FlushAfter
// later) makes it durable. After a power loss in between, the run's
// recovery finds the answer missing from the log and posts it again.
func (c *Channel) AppendOwnMessage(m chat.ChannelMessage) (LoggedMessage, error) {
	return c.appendMessage(m, true)
}

// WriteMessage is AppendMessage in two steps: it writes the line to
// log.jsonl (and the day's daily log entry) and returns before the fsync;
// CommitLog(End) then returns once an fsync covers it (joining one in
// flight: group commit). In between the caller may start work that shows
// nothing (Mother sends the model its request while the line goes to
// disk), but nothing the message causes may be shown, acknowledged or
// answered before CommitLog has returned nil.
func (c *Channel) WriteMessage(m chat.ChannelMessage) (LoggedMessage, error) {
	return c.appendMessage(m, true)
}

// CommitLog returns once every line of log.jsonl before end is on disk.
func (c *Channel) CommitLog(end int64) error { return c.log.Commit(end) }

func (c *Channel) appendMessage(m chat.ChannelMessage, deferred bool) (LoggedMessage, error) {
	if m.ID == "" {
		return LoggedMessage{}, errors.New("append message: empty id")
	}
	if m.Attachments == nil {
		m.Attachments = []chat.ChannelAttachment{}
	}
	var end int64
	var err error
	if deferred {
		_, end, err = c.log.AppendDeferred(m)
	} else {
		_, end, err = c.log.Append(m)
	}
	if err != nil {
		return LoggedMessage{}, err
	}
	if err := c.appendDaily(m); err != nil {
		// The log is the record; a daily-log failure is reported, not fatal.
		c.logger.Warn("daily log append failed", "err", err)
	}
	return LoggedMessage{Msg: m, End: end}, nil
}

// DailyLine renders a message as its line in the daily log and names the
// day's file ("2006-01-02.md"), in local time (now stands in for a missing
// timestamp).
func DailyLine(m chat.ChannelMessage, now time.Time) (file, line string) {
	t := m.Timestamp
	if t.IsZero() {
		t = now
	}
	t = t.Local()
	name := m.Sender.Username
	if name == "" {
		name = m.Sender.ID
	}
	text := strings.Join(strings.Fields(strings.ReplaceAll(m.Text, "\n", " ")), " ")
	line = fmt.Sprintf("- %s [%s]: %s", t.Format("15:04:05"), name, text)
	for _, a := range m.Attachments {
		line += fmt.Sprintf(" (attached: %s)", a.LocalPath)
	}
	return t.Format("2006-01-02") + ".md", line + "\n"
}

func (c *Channel) appendDaily(m chat.ChannelMessage) error {
	file, line := DailyLine(m, c.clock.Now())
	return c.AppendDaily(file, line)
}

// AppendDaily appends text to daily/<file>. The daily log is derived from
// log.jsonl for people's eyes (grep) and is not fsynced; the day's file
// stays open while it is the one written.
func (c *Channel) AppendDaily(file, text string) error {
	name := filepath.Base(file)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.daily == nil || c.dailyName != name {
		if c.daily != nil {
			c.daily.Close()
			c.daily = nil
		}
		f, err := os.OpenFile(filepath.Join(c.dir, "daily", name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		c.daily, c.dailyName = f, name
	}
	if _, err := c.daily.WriteString(text); err != nil {
		c.daily.Close()
		c.daily = nil
		return err
	}
	return nil
}

// ReplaceLog replaces log.jsonl with data (whole JSONL lines), atomically.
// It is for importing history (mother migrate) into a channel nothing else
// uses at the time, not for normal operation.
func (c *Channel) ReplaceLog(data []byte) error {
	if len(data) > 0 && data[len(data)-1] != '\n' {
		return errors.New("replace log: data does not end with a newline")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := atomicfile.WriteFile(c.LogPath(), data, 0o600); err != nil {
		return err
	}
	if err := c.log.Close(); err != nil {
		return err
	}
	nlog, _, err := jsonl.OpenWith(c.LogPath(), logOptions)
	if err != nil {
		return err
	}
	c.log = nlog
	return nil
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

// MaxFallbackMessages caps how many messages a sync without a usable cursor
// brings into the context (a fresh context over an existing log).
const MaxFallbackMessages = 100

// Pending returns the messages logged after cur and up to offset upTo
// (upTo <= 0: to the end) that the context does not hold yet (seen reports
// ids it holds), and the new cursor.
//
// The normal path costs O(new messages): it checks that the line ending at
// cur.Offset is message cur.LastID (reading that one line backwards) and
// reads from there. If the cursor does not match the log (log replaced or
// truncated), it falls back to a full scan keyed by message id, returning
// at most MaxFallbackMessages of the most recent unseen messages.
func (c *Channel) Pending(cur Cursor, upTo int64, seen func(id string) bool) ([]LoggedMessage, Cursor, error) {
	if seen == nil {
		seen = func(string) bool { return false }
	}
	size := c.log.Size()
	if upTo > 0 && upTo < size {
		size = upTo
	}
	start := cur.Offset
	fallback := false
	switch {
	case start == 0:
		fallback = cur.LastID != "" || size > 0
	case start > c.log.Size():
		fallback = true
	case start > size:
		// Already synced past upTo: nothing to do.
		return nil, cur, nil
	default:
		id, err := c.idEndingAt(start)
		if err != nil || id != cur.LastID {
			fallback = true
		}
	}
	if fallback {
		if cur.Offset != 0 {
			c.logger.Warn("sync cursor does not match log.jsonl; rescanning by message id", "cursor", cur.Offset, "log_size", size)
		}
		start = 0
	}
	var out []LoggedMessage
	next := cur
	err := jsonl.Scan(c.LogPath(), start, size, func(line []byte, _, end int64) error {
		var m chat.ChannelMessage
		if err := json.Unmarshal(line, &m); err != nil {
			c.logger.Warn("skipping unreadable log.jsonl line", "end", end, "err", err)
			return nil
		}
		next = Cursor{Offset: end, LastID: m.ID}
		if m.ID == "" || seen(m.ID) {
			return nil
		}
		out = append(out, LoggedMessage{Msg: m, End: end})
		if fallback && len(out) > 2*MaxFallbackMessages {
			out = append(out[:0], out[len(out)-MaxFallbackMessages:]...)
		}
		return nil
	})
	if err != nil {
		return nil, cur, fmt.Errorf("sync log: %w", err)
	}
	if fallback && len(out) > MaxFallbackMessages {
		out = out[len(out)-MaxFallbackMessages:]
	}
	return out, next, nil
}

// LogSize is the length of log.jsonl's whole lines: the offset the next
// message will start at.
func (c *Channel) LogSize() int64 { return c.log.Size() }

// FindMessage returns the first message in log.jsonl from offset from (a
// line start, such as an earlier LogSize or a message's end; an offset
// past the end means the log was replaced, and the whole log is searched)
// that match accepts, with its end offset.
func (c *Channel) FindMessage(from int64, match func(chat.ChannelMessage) bool) (LoggedMessage, bool, error) {
	size := c.log.Size()
	if from > size || from < 0 {
		from = 0
	}
	var found LoggedMessage
	errFound := errors.New("found")
	err := jsonl.Scan(c.LogPath(), from, size, func(line []byte, _, end int64) error {
		var m chat.ChannelMessage
		if json.Unmarshal(line, &m) != nil || !match(m) {
			return nil
		}
		found = LoggedMessage{Msg: m, End: end}
		return errFound
	})
	switch {
	case errors.Is(err, errFound):
		return found, true, nil
	case err != nil:
		return LoggedMessage{}, false, fmt.Errorf("find message: %w", err)
	}
	return LoggedMessage{}, false, nil
}

// IDsAfter returns the ids of the messages logged after offset; it reads
// only that part of the log.
func (c *Channel) IDsAfter(offset int64) (map[string]bool, error) {
	ids := map[string]bool{}
	size := c.log.Size()
	if offset > size {
		offset = 0
	}
	err := jsonl.Scan(c.LogPath(), offset, size, func(line []byte, _, _ int64) error {
		var m struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(line, &m) == nil && m.ID != "" {
			ids[m.ID] = true
		}
		return nil
	})
	return ids, err
}

// idEndingAt returns the id of the log line that ends exactly at off.
func (c *Channel) idEndingAt(off int64) (string, error) {
	f, err := os.Open(c.LogPath())
	if err != nil {
		return "", err
	}
	defer f.Close()
	nl := make([]byte, 1)
	if _, err := f.ReadAt(nl, off-1); err != nil || nl[0] != '\n' {
		return "", errors.New("cursor not at a line end")
	}
	startOff, err := jsonl.LineStart(f, off-1)
	if err != nil {
		return "", err
	}
	line := make([]byte, off-1-startOff)
	if _, err := f.ReadAt(line, startOff); err != nil {
		return "", err
	}
	var m struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return "", err
	}
	return m.ID, nil
}
