package recall

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Ranking by words, bounded in cost.
//
// Each channel owns a range of document rowids (its number << 40, up to
// 2^40 documents), so the full-text index finds a channel's documents by
// seeking in its posting lists: no join, and no cost for the other
// channels' documents.
//
// BM25 has to score every document that matches any word of the query,
// and in a channel of a million messages a common word matches tens of
// thousands: that, not the index, is what makes a slow query. Two bounds
// keep a query's work small whatever the channel's size, and change
// nothing for a channel of a few thousand messages:
//
//   - a word found in more than commonDocs documents of the channel is
//     left out when the query has a rarer one (it adds little to BM25
//     beside a rare word, and costs the most);
//   - at most rankWindow matching documents, the newest first, are
//     scored.
const (
	channelBits = 40
	commonDocs  = 5000
	rankWindow  = 2000
)

type ranked struct {
	rowid int64
	bm25  float64 // lower is better, as bm25() gives it
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// channelRange is the range of rowids of channel's documents;
// sql.ErrNoRows when the channel has none.
func channelRange(ctx context.Context, q querier, channel string) (lo, hi int64, err error) {
	var num int64
	if err := q.QueryRowContext(ctx, `SELECT num FROM channels WHERE channel = ?`, channel).Scan(&num); err != nil {
		return 0, 0, err
	}
	return num << channelBits, (num+1)<<channelBits - 1, nil
}

// rankWords ranks the channel's documents that match the words of query,
// best first, at most limit.
func (ix *Index) rankWords(ctx context.Context, channel, query string, limit int) ([]ranked, error) {
	terms := matchTerms(query)
	if len(terms) == 0 {
		return nil, nil
	}
	lo, hi, err := channelRange(ctx, ix.db, channel)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("recall search: %w", err)
	}
	terms, err = ix.leaveOutCommon(ctx, terms, lo, hi)
	if err != nil {
		return nil, err
	}
	rows, err := ix.db.QueryContext(ctx, `SELECT rowid, bm25(fts) FROM fts
		WHERE fts MATCH ? AND rowid BETWEEN ? AND ? ORDER BY rowid DESC LIMIT ?`, strings.Join(terms, " OR "), lo, hi, rankWindow)
	if err != nil {
		return nil, fmt.Errorf("recall search: %w", err)
	}
	defer rows.Close()
	var out []ranked
	for rows.Next() {
		var r ranked
		if err := rows.Scan(&r.rowid, &r.bm25); err != nil {
			return nil, fmt.Errorf("recall search: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("recall search: %w", err)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].bm25 < out[j].bm25 }) // ties: newer first, as read
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// leaveOutCommon drops the terms found in more than commonDocs documents
// of the channel (rowids lo to hi), unless all are: then the rarest alone
// is kept. Counting stops at commonDocs+1, and reads no positions, so a
// common word costs little to count.
func (ix *Index) leaveOutCommon(ctx context.Context, terms []string, lo, hi int64) ([]string, error) {
	if len(terms) < 2 {
		return terms, nil
	}
	var keep []string
	rarest, rarestN := "", -1
	for _, t := range terms {
		var n int
		if err := ix.db.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT rowid FROM fts WHERE fts MATCH ? AND rowid BETWEEN ? AND ? LIMIT ?)`,
			t, lo, hi, commonDocs+1).Scan(&n); err != nil {
			return nil, fmt.Errorf("recall search: %w", err)
		}
		if n <= commonDocs {
			keep = append(keep, t)
		}
		if rarestN < 0 || n < rarestN {
			rarest, rarestN = t, n
		}
	}
	if len(keep) == 0 {
		keep = []string{rarest}
	}
	return keep, nil
}
