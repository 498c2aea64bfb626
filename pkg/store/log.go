package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/jsonl"
)

// LoggedMessage is a message read from log.jsonl with its end offset.
type LoggedMessage struct {
	Msg chat.ChannelMessage
	End int64
	// pos is the write's position, for CommitLog (set by WriteMessage).
	pos jsonl.Pos
}

// AppendMessage logs one message (a whole message, never a chunk) to
// log.jsonl and a one-line entry to the day's daily log. It returns once
// an fsync covers the line.
func (c *Channel) AppendMessage(m chat.ChannelMessage) (LoggedMessage, error) {
	return c.appendMessage(m, false)
}

// WriteMessage is AppendMessage in two steps: it writes the line to
// log.jsonl (and the day's daily log entry) and returns before the fsync;
// CommitLog then returns once an fsync covers it (joining one in
// flight: group commit). In between the caller may start work that shows
// nothing (Mother sends the model its request while the line goes to
// disk), but nothing the message causes may be shown, acknowledged or
// answered before CommitLog has returned nil.
func (c *Channel) WriteMessage(m chat.ChannelMessage) (LoggedMessage, error) {
	return c.appendMessage(m, true)
}

// CommitLog returns once the line WriteMessage wrote for lm, and every
// line before it, is on disk. It fails if the fsync fails, and if a
// failure since the write cut the line away (jsonl.File): the message was
// then never stored, and must not be acknowledged.
func (c *Channel) CommitLog(lm LoggedMessage) error { return c.log.Commit(lm.pos) }

func (c *Channel) appendMessage(m chat.ChannelMessage, deferred bool) (LoggedMessage, error) {
	if m.ID == "" {
		return LoggedMessage{}, errors.New("append message: empty id")
	}
	if m.Attachments == nil {
		m.Attachments = []chat.ChannelAttachment{}
	}
	var pos jsonl.Pos
	var err error
	if deferred {
		_, pos, err = c.log.WriteDeferred(m)
	} else {
		var line []byte
		if line, err = json.Marshal(m); err != nil {
			return LoggedMessage{}, fmt.Errorf("append message: %w", err)
		}
		if _, pos, err = c.log.Write(append(line, '\n')); err == nil {
			err = c.log.Commit(pos)
		}
	}
	if err != nil {
		return LoggedMessage{}, err
	}
	if err := c.appendDaily(m); err != nil {
		// The log is the record; a daily-log failure is reported, not fatal.
		c.logger.Warn("daily log append failed", "err", err)
	}
	if c.appended != nil {
		c.appended(c)
	}
	return LoggedMessage{Msg: m, End: pos.End, pos: pos}, nil
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
