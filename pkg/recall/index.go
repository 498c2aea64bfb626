// Package recall is the search index over the channels' history: every
// message of log.jsonl (people's, Mother's answers, the chicks' results)
// and the channel's MEMORY.md, in SQLite FTS5 (modernc.org/sqlite, pure
// Go) under the data directory's state/. The index is derived, never the
// truth: it is filled from the files, caught up at start and as lines are
// stored, and rebuilt when it is missing, damaged or does not match the
// files. Deleting it loses nothing.
//
// Scope is the caller's business: Search and Around take one channel and
// return only that channel's documents; who may name which channel is
// decided by Mother (pkg/mother, mayRecallChannel) and by the nest for
// chicks (a chick only ever its own channel).
package recall

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
	"unicode"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
)

// schemaVersion changes whenever the tables change: an index of another
// version is deleted and rebuilt from the files.
const schemaVersion = "2"

// Kinds of documents.
const (
	KindUser   = "user"   // a person's message (or another bot's)
	KindMother = "mother" // Mother's answer or notice
	KindChick  = "chick"  // a chick's result, relayed by Mother
	KindMemory = "memory" // a paragraph of the channel's MEMORY.md
)

// Doc is one searchable document of a channel.
type Doc struct {
	// ID is the message id in log.jsonl, or "memory:<n>" for the n-th
	// paragraph of MEMORY.md.
	ID   string
	Time time.Time
	// Who is the sender's name ("memory" for MEMORY.md).
	Who  string
	Kind string
	Text string
}

// Hit is a document found by Search, best first.
type Hit struct {
	Doc
	// Channel is the qualified channel ("<adapter>/<id>").
	Channel string
	// Score is higher for better hits (comparable only within one result).
	Score float64
}

// Index is the open index. Its methods are safe for concurrent use; one
// writer at a time fills it.
type Index struct {
	db     *sql.DB
	path   string
	logger *slog.Logger

	// wmu serialises writers (catch-up, memory re-index, embeddings).
	wmu sync.Mutex
}

// Open opens the index at path, creating it; an index that cannot be
// opened, fails its check or has another schema is deleted and created
// anew (the caller then catches it up from the files).
func Open(ctx context.Context, path string, logger *slog.Logger) (*Index, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ix, err := open(ctx, path, logger)
	if err == nil {
		return ix, nil
	}
	logger.Warn("recall index unusable; rebuilding it from the channels' files", "path", path, "err", err)
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		if rerr := os.Remove(p); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			return nil, fmt.Errorf("recall index: remove %s: %w", p, rerr)
		}
	}
	return open(ctx, path, logger)
}

func open(ctx context.Context, path string, logger *slog.Logger) (*Index, error) {
	// WAL and synchronous=NORMAL: a transaction is atomic through a
	// crash (the last ones may be lost after a power cut, and are
	// indexed again from the files), and a commit costs no fsync. A small
	// page cache keeps Mother's memory low; the OS caches the file.
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() +
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=cache_size(-2000)&_pragma=temp_store(MEMORY)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("recall index %s: %w", path, err)
	}
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(1)
	db.SetConnMaxIdleTime(time.Minute)
	fail := func(err error) (*Index, error) {
		db.Close()
		return nil, fmt.Errorf("recall index %s: %w", path, err)
	}
	var check string
	if err := db.QueryRowContext(ctx, `PRAGMA quick_check`).Scan(&check); err != nil {
		return fail(err)
	}
	if check != "ok" {
		return fail(fmt.Errorf("quick_check: %s", check))
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
		return fail(err)
	}
	var ver string
	switch err := db.QueryRowContext(ctx, `SELECT v FROM meta WHERE k='schema'`).Scan(&ver); {
	case errors.Is(err, sql.ErrNoRows):
		if err := create(ctx, db); err != nil {
			return fail(err)
		}
	case err != nil:
		return fail(err)
	case ver != schemaVersion:
		return fail(fmt.Errorf("schema %q, want %q", ver, schemaVersion))
	}
	return &Index{db: db, path: path, logger: logger}, nil
}

func create(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, q := range []string{
		// sources: how far each file of a channel is indexed. For the
		// log, pos is the byte offset after the last indexed line and
		// last the id on that line; for MEMORY.md, pos is its size and
		// last its modification time (ns).
		`CREATE TABLE sources (channel TEXT NOT NULL, source TEXT NOT NULL, pos INTEGER NOT NULL, last TEXT NOT NULL, PRIMARY KEY (channel, source))`,
		// channels: dm is 1 once a direct message was seen in it; num
		// gives the channel its range of document rowids (rank.go).
		`CREATE TABLE channels (channel TEXT PRIMARY KEY, num INTEGER NOT NULL UNIQUE, dm INTEGER NOT NULL DEFAULT 0)`,
		`CREATE TABLE docs (rowid INTEGER PRIMARY KEY, channel TEXT NOT NULL, source TEXT NOT NULL, id TEXT NOT NULL, ts INTEGER NOT NULL, who TEXT NOT NULL, kind TEXT NOT NULL, text TEXT NOT NULL)`,
		`CREATE INDEX docs_channel_id ON docs (channel, id)`,
		`CREATE INDEX docs_channel_source ON docs (channel, source)`,
		`CREATE VIRTUAL TABLE fts USING fts5 (text, content='docs', content_rowid='rowid', tokenize='porter unicode61 remove_diacritics 2')`,
		`CREATE TRIGGER docs_ai AFTER INSERT ON docs BEGIN INSERT INTO fts (rowid, text) VALUES (new.rowid, new.text); END`,
		`CREATE TRIGGER docs_ad AFTER DELETE ON docs BEGIN INSERT INTO fts (fts, rowid, text) VALUES ('delete', old.rowid, old.text); END`,
		// vecs: one embedding per document (float32, little endian).
		`CREATE TABLE vecs (rowid INTEGER PRIMARY KEY, model TEXT NOT NULL, v BLOB NOT NULL)`,
		`CREATE TRIGGER docs_ad_vec AFTER DELETE ON docs BEGIN DELETE FROM vecs WHERE rowid = old.rowid; END`,
		`INSERT INTO meta (k, v) VALUES ('schema', '` + schemaVersion + `')`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("create schema: %w", err)
		}
	}
	return tx.Commit()
}

// Close closes the index.
func (ix *Index) Close() error { return ix.db.Close() }

// Path is the index file.
func (ix *Index) Path() string { return ix.path }

// IsDM reports whether channel (qualified) is a direct message, as far
// as its indexed messages tell.
func (ix *Index) IsDM(ctx context.Context, channel string) (bool, error) {
	var dm int
	err := ix.db.QueryRowContext(ctx, `SELECT dm FROM channels WHERE channel = ?`, channel).Scan(&dm)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return dm == 1, err
}

// Known reports whether channel (qualified) has anything indexed.
func (ix *Index) Known(ctx context.Context, channel string) (bool, error) {
	var n int
	err := ix.db.QueryRowContext(ctx, `SELECT count(*) FROM channels WHERE channel = ?`, channel).Scan(&n)
	return n > 0, err
}

// Count is the number of documents of channel ("" for all).
func (ix *Index) Count(ctx context.Context, channel string) (int, error) {
	var n int
	var err error
	if channel == "" {
		err = ix.db.QueryRowContext(ctx, `SELECT count(*) FROM docs`).Scan(&n)
	} else {
		err = ix.db.QueryRowContext(ctx, `SELECT count(*) FROM docs WHERE channel = ?`, channel).Scan(&n)
	}
	return n, err
}

// Search returns up to limit documents of channel (qualified) that match
// query best, by BM25 over the words of query (any of them; the rarer a
// word, the more it counts).
func (ix *Index) Search(ctx context.Context, channel, query string, limit int) ([]Hit, error) {
	if limit <= 0 {
		limit = 5
	}
	best, err := ix.rankWords(ctx, channel, query, limit)
	if err != nil || len(best) == 0 {
		return nil, err
	}
	ids := make([]int64, len(best))
	for i, r := range best {
		ids[i] = r.rowid
	}
	docs, err := ix.docs(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]Hit, 0, len(best))
	for _, r := range best {
		if d, ok := docs[r.rowid]; ok {
			out = append(out, Hit{Doc: d, Channel: channel, Score: -r.bm25}) // bm25() is lower for better matches
		}
	}
	return out, nil
}

// ErrNotFound: no document of the channel has that id.
var ErrNotFound = errors.New("no such message in this channel's history")

// Around returns the document id of channel with up to before messages
// logged before it and after messages logged after it, in order, and the
// position of the document in the result. A memory paragraph comes with
// the paragraphs around it.
func (ix *Index) Around(ctx context.Context, channel, id string, before, after int) ([]Doc, int, error) {
	var rowid int64
	var source string
	err := ix.db.QueryRowContext(ctx, `SELECT rowid, source FROM docs WHERE channel = ? AND id = ? ORDER BY rowid DESC LIMIT 1`, channel, id).Scan(&rowid, &source)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("recall read: %w", err)
	}
	q := func(cond, order string, n int) ([]Doc, error) {
		rows, err := ix.db.QueryContext(ctx, `SELECT id, ts, who, kind, text FROM docs
			WHERE channel = ? AND source = ? AND rowid `+cond+` ? ORDER BY rowid `+order+` LIMIT ?`, channel, source, rowid, n)
		if err != nil {
			return nil, fmt.Errorf("recall read: %w", err)
		}
		defer rows.Close()
		var out []Doc
		for rows.Next() {
			var d Doc
			var ts int64
			if err := rows.Scan(&d.ID, &ts, &d.Who, &d.Kind, &d.Text); err != nil {
				return nil, err
			}
			d.Time = time.Unix(0, ts)
			out = append(out, d)
		}
		return out, rows.Err()
	}
	pre, err := q("<", "DESC", before)
	if err != nil {
		return nil, 0, err
	}
	self, err := q("=", "ASC", 1)
	if err != nil {
		return nil, 0, err
	}
	post, err := q(">", "ASC", after)
	if err != nil {
		return nil, 0, err
	}
	out := make([]Doc, 0, len(pre)+1+len(post))
	for i := len(pre) - 1; i >= 0; i-- {
		out = append(out, pre[i])
	}
	at := len(out)
	out = append(out, self...)
	out = append(out, post...)
	return out, at, nil
}

// stopWords are left out of a query: they match nearly everything and
// say nothing of what is sought.
var stopWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an and are as at be been but by can could did do does
		for from had has have he her him his how i if in into is it its me my of on or our
		she so than that the their them then there these they this to us was we were what
		when where which who whom why will with would you your about said say says tell told
		anything something ago last month week`) {
		stopWords[w] = true
	}
}

// MatchExpr turns a question in words into an FTS5 expression: its words
// (letters and digits), less the stop words, each quoted, joined by OR.
// "" when nothing is left to look for.
func MatchExpr(query string) string { return strings.Join(matchTerms(query), " OR ") }

// matchTerms is the words of query as FTS5 terms (quoted), less the stop
// words; the stop words after all when nothing else is left.
func matchTerms(query string) []string {
	var terms []string
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(query), func(r rune) bool {
		return !(r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r))
	}) {
		if stopWords[w] || seen[w] {
			continue
		}
		seen[w] = true
		terms = append(terms, `"`+w+`"`)
	}
	if len(terms) == 0 {
		// Only stop words: look for them after all.
		for _, w := range strings.Fields(strings.ToLower(query)) {
			w = strings.Map(func(r rune) rune {
				if r == '"' {
					return -1
				}
				return r
			}, w)
			if w != "" && !seen[w] {
				seen[w] = true
				terms = append(terms, `"`+w+`"`)
			}
		}
	}
	return terms
}
