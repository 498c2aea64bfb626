package recall

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/jsonl"
)

// Sources of documents.
const (
	sourceLog    = "log"
	sourceMemory = "memory"
)

// batchDocs is how many documents one transaction adds while catching
// up: one commit (no fsync: WAL, synchronous=NORMAL) per batch.
const batchDocs = 4096

// ownUsername is the name Mother logs her own lines under
// (mother.OwnUsername; repeated here so the index needs no Mother).
const ownUsername = "mother"

// DocOf is the document of a logged message ("" Kind: nothing to index).
func DocOf(m chat.ChannelMessage) Doc {
	text := m.Text
	for _, a := range m.Attachments {
		text += " (attached: " + a.Filename + ")"
	}
	if strings.TrimSpace(text) == "" || m.Choice {
		return Doc{}
	}
	who := m.Sender.Username
	if who == "" {
		who = m.Sender.ID
	}
	kind := KindUser
	if m.Sender.IsBot && m.Sender.Username == ownUsername {
		kind = KindMother
		if strings.HasPrefix(m.Text, "[chick ") {
			kind = KindChick
		}
	}
	return Doc{ID: m.ID, Time: m.Timestamp, Who: who, Kind: kind, Text: text}
}

// SyncChannel indexes what the channel's log.jsonl and MEMORY.md (in
// dir) hold beyond what is indexed, and returns how many documents it
// added. A log that no longer matches what was indexed (replaced,
// truncated, a line lost in a power cut) has its documents indexed anew.
func (ix *Index) SyncChannel(ctx context.Context, channel, dir string) (int, error) {
	ix.wmu.Lock()
	defer ix.wmu.Unlock()
	n, err := ix.syncLog(ctx, channel, filepath.Join(dir, "log.jsonl"))
	if err != nil {
		return n, err
	}
	m, err := ix.syncMemory(ctx, channel, filepath.Join(dir, "MEMORY.md"))
	return n + m, err
}

func (ix *Index) source(ctx context.Context, channel, source string) (pos int64, last string, err error) {
	err = ix.db.QueryRowContext(ctx, `SELECT pos, last FROM sources WHERE channel = ? AND source = ?`, channel, source).Scan(&pos, &last)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", nil
	}
	return pos, last, err
}

// lineIDEndingAt is the id on the line of path that ends (its newline
// included) at end.
func lineIDEndingAt(path string, end int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	start, err := jsonl.LineStart(f, end-1)
	if err != nil {
		return "", err
	}
	if end-1-start > 64<<20 {
		return "", errors.New("line too long")
	}
	buf := make([]byte, end-1-start)
	if _, err := f.ReadAt(buf, start); err != nil {
		return "", err
	}
	var m struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(buf, &m); err != nil {
		return "", err
	}
	return m.ID, nil
}

func (ix *Index) syncLog(ctx context.Context, channel, path string) (int, error) {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("recall index %s: %w", channel, err)
	}
	size := st.Size()
	pos, last, err := ix.source(ctx, channel, sourceLog)
	if err != nil {
		return 0, err
	}
	if pos == size {
		if pos == 0 {
			return 0, nil
		}
		if id, err := lineIDEndingAt(path, pos); err == nil && id == last {
			return 0, nil
		}
	}
	if pos > 0 {
		id, err := lineIDEndingAt(path, pos)
		if pos > size || err != nil || id != last {
			ix.logger.Warn("recall index does not match log.jsonl; indexing the channel anew", "channel", channel, "indexed_to", pos, "log_size", size)
			if err := ix.addBatch(ctx, channel, sourceLog, nil, 0, "", false, true); err != nil {
				return 0, err
			}
			pos = 0
		}
	}
	added := 0
	var batch []Doc
	dm := false
	var lastID string
	var end int64
	flush := func() error {
		if err := ix.addBatch(ctx, channel, sourceLog, batch, end, lastID, dm, false); err != nil {
			return err
		}
		added += len(batch)
		batch = batch[:0]
		return nil
	}
	err = jsonl.Scan(path, pos, size, func(line []byte, _, lineEnd int64) error {
		var m chat.ChannelMessage
		if err := json.Unmarshal(line, &m); err != nil || m.ID == "" {
			// A bad line is skipped (the store reports it), not indexed.
			end = lineEnd
			return nil
		}
		end, lastID = lineEnd, m.ID
		dm = dm || m.IsDM
		if d := DocOf(m); d.Kind != "" {
			batch = append(batch, d)
		}
		if len(batch) >= batchDocs {
			return flush()
		}
		return nil
	})
	if err != nil {
		return added, fmt.Errorf("recall index %s: %w", channel, err)
	}
	if end > pos && lastID != "" {
		if err := flush(); err != nil {
			return added, err
		}
	}
	return added, nil
}

// addBatch adds docs of channel from source and moves the source's
// position to pos (last: the id or stamp there) in one transaction;
// replace first removes what the source had indexed.
func (ix *Index) addBatch(ctx context.Context, channel, source string, docs []Doc, pos int64, last string, dm, replace bool) error {
	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("recall index %s: %w", channel, err)
	}
	defer tx.Rollback()
	if replace {
		if _, err := tx.ExecContext(ctx, `DELETE FROM docs WHERE channel = ? AND source = ?`, channel, source); err != nil {
			return fmt.Errorf("recall index %s: %w", channel, err)
		}
	}
	dmv := 0
	if dm {
		dmv = 1
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO channels (channel, num, dm) VALUES (?, (SELECT coalesce(max(num), 0) + 1 FROM channels), ?)
		ON CONFLICT (channel) DO UPDATE SET dm = max(dm, excluded.dm)`, channel, dmv); err != nil {
		return fmt.Errorf("recall index %s: %w", channel, err)
	}
	lo, hi, err := channelRange(ctx, tx, channel)
	if err != nil {
		return fmt.Errorf("recall index %s: %w", channel, err)
	}
	var next int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(rowid) + 1, ?) FROM docs WHERE rowid BETWEEN ? AND ?`, lo, lo, hi).Scan(&next); err != nil {
		return fmt.Errorf("recall index %s: %w", channel, err)
	}
	if next+int64(len(docs)) > hi {
		return fmt.Errorf("recall index %s: the channel's range of rowids is full", channel)
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO docs (rowid, channel, source, id, ts, who, kind, text) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("recall index %s: %w", channel, err)
	}
	defer ins.Close()
	for i, d := range docs {
		if _, err := ins.ExecContext(ctx, next+int64(i), channel, source, d.ID, d.Time.UnixNano(), d.Who, d.Kind, d.Text); err != nil {
			return fmt.Errorf("recall index %s: %w", channel, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO sources (channel, source, pos, last) VALUES (?, ?, ?, ?)
		ON CONFLICT (channel, source) DO UPDATE SET pos = excluded.pos, last = excluded.last`, channel, source, pos, last); err != nil {
		return fmt.Errorf("recall index %s: %w", channel, err)
	}
	return tx.Commit()
}

// syncMemory indexes MEMORY.md anew when its size or time changed: one
// document per paragraph (blank-line separated) or list item.
func (ix *Index) syncMemory(ctx context.Context, channel, path string) (int, error) {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("recall index %s: %w", channel, err)
	}
	stamp := strconv.FormatInt(st.ModTime().UnixNano(), 10)
	pos, last, err := ix.source(ctx, channel, sourceMemory)
	if err != nil {
		return 0, err
	}
	if pos == st.Size() && last == stamp {
		return 0, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("recall index %s: %w", channel, err)
	}
	var docs []Doc
	for i, p := range Paragraphs(string(b)) {
		docs = append(docs, Doc{ID: fmt.Sprintf("memory:%d", i+1), Time: st.ModTime(), Who: "memory", Kind: KindMemory, Text: p})
	}
	if err := ix.addBatch(ctx, channel, sourceMemory, docs, st.Size(), stamp, false, true); err != nil {
		return 0, err
	}
	return len(docs), nil
}

// Paragraphs splits a markdown file into its paragraphs and list items
// (headings are kept with what follows them).
func Paragraphs(s string) []string {
	var out []string
	var cur []string
	heading := ""
	emit := func() {
		if len(cur) > 0 {
			p := strings.Join(cur, "\n")
			if heading != "" {
				p = heading + "\n" + p
			}
			out = append(out, p)
			cur = nil
		}
	}
	for _, line := range strings.Split(s, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case t == "":
			emit()
		case strings.HasPrefix(t, "#"):
			emit()
			heading = t
		case strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "* "):
			emit()
			cur = append(cur, t)
		default:
			cur = append(cur, t)
		}
	}
	emit()
	return out
}
