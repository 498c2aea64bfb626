package recall

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"strings"
	"time"
)

// Embedder turns texts into vectors: the configured model server's
// embedding endpoint, called through the broker (reserved and metered
// like every model call).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// embedBatch is how many documents one embedding call carries.
const embedBatch = 32

// maxEmbedChars cuts a long document before it is embedded (its words
// are all in the full-text index).
const maxEmbedChars = 2000

// fuseDepth is how many hits of each ranking the fusion looks at, and
// rrfK the constant of reciprocal rank fusion (1/(k+rank)). A small k
// lets the first few places of either ranking decide, which is what a
// search returning five hits needs: on the labelled history of
// internal/recalldata, recall@5 was 0.85 with the usual k=60 (made for
// fusing long lists), 0.91 with k=3.
const (
	fuseDepth = 50
	rrfK      = 3
)

type embedder struct {
	ix     *Index
	e      Embedder
	model  string
	logger *slog.Logger
}

// batch embeds up to embedBatch documents that have no vector of the
// model yet, and reports how many it embedded.
func (em *embedder) batch(ctx context.Context) (int, error) {
	rows, err := em.ix.db.QueryContext(ctx, `SELECT d.rowid, d.text FROM docs d LEFT JOIN vecs v ON v.rowid = d.rowid
		WHERE v.rowid IS NULL OR v.model != ? LIMIT ?`, em.model, embedBatch)
	if err != nil {
		return 0, fmt.Errorf("recall embeddings: %w", err)
	}
	var ids []int64
	var texts []string
	for rows.Next() {
		var id int64
		var text string
		if err := rows.Scan(&id, &text); err != nil {
			rows.Close()
			return 0, fmt.Errorf("recall embeddings: %w", err)
		}
		if len(text) > maxEmbedChars {
			text = text[:maxEmbedChars]
		}
		ids, texts = append(ids, id), append(texts, text)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("recall embeddings: %w", err)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	vecs, err := em.e.Embed(ctx, texts)
	if err != nil {
		return 0, fmt.Errorf("recall embeddings: %w", err)
	}
	if len(vecs) != len(ids) {
		return 0, fmt.Errorf("recall embeddings: %d vectors for %d texts", len(vecs), len(ids))
	}
	em.ix.wmu.Lock()
	defer em.ix.wmu.Unlock()
	tx, err := em.ix.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("recall embeddings: %w", err)
	}
	defer tx.Rollback()
	for i, id := range ids {
		// A document deleted meanwhile (its channel indexed anew) gets
		// no vector: the insert names an existing rowid only.
		if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO vecs (rowid, model, v) SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM docs WHERE rowid = ?)`,
			id, em.model, encodeVec(vecs[i]), id); err != nil {
			return 0, fmt.Errorf("recall embeddings: %w", err)
		}
	}
	return len(ids), tx.Commit()
}

// search ranks the channel's documents by words and by meaning and fuses
// the two rankings (reciprocal rank fusion). If the query cannot be
// embedded, the words alone rank.
func (em *embedder) search(ctx context.Context, channel, query string, limit int) ([]Hit, error) {
	words, err := em.ix.ftsRowids(ctx, channel, query, fuseDepth)
	if err != nil {
		return nil, err
	}
	qv, err := em.e.Embed(ctx, []string{query})
	if err != nil || len(qv) != 1 {
		if err == nil {
			err = errors.New("no vector")
		}
		em.logger.Debug("query not embedded; searching by words alone", "err", err)
		return em.ix.Search(ctx, channel, query, limit)
	}
	meaning, err := em.ix.nearest(ctx, channel, em.model, qv[0], fuseDepth)
	if err != nil {
		return nil, err
	}
	score := map[int64]float64{}
	for i, id := range words {
		score[id] += 1 / float64(rrfK+i+1)
	}
	for i, id := range meaning {
		score[id] += 1 / float64(rrfK+i+1)
	}
	ids := make([]int64, 0, len(score))
	for id := range score {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		if score[ids[i]] != score[ids[j]] {
			return score[ids[i]] > score[ids[j]]
		}
		return ids[i] > ids[j]
	})
	if len(ids) > limit {
		ids = ids[:limit]
	}
	docs, err := em.ix.docs(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]Hit, 0, len(ids))
	for _, id := range ids {
		if d, ok := docs[id]; ok {
			out = append(out, Hit{Doc: d, Channel: channel, Score: score[id]})
		}
	}
	return out, nil
}

// ftsRowids ranks the channel's documents matching query by BM25.
func (ix *Index) ftsRowids(ctx context.Context, channel, query string, limit int) ([]int64, error) {
	best, err := ix.rankWords(ctx, channel, query, limit)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(best))
	for i, r := range best {
		out[i] = r.rowid
	}
	return out, nil
}

// nearest ranks the channel's documents with a vector of model by cosine
// similarity to q (an exact scan: a channel's few thousand vectors take
// milliseconds).
func (ix *Index) nearest(ctx context.Context, channel, model string, q []float32, limit int) ([]int64, error) {
	lo, hi, err := channelRange(ctx, ix.db, channel)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("recall search: %w", err)
	}
	rows, err := ix.db.QueryContext(ctx, `SELECT rowid, v FROM vecs WHERE rowid BETWEEN ? AND ? AND model = ?`, lo, hi, model)
	if err != nil {
		return nil, fmt.Errorf("recall search: %w", err)
	}
	defer rows.Close()
	qn := norm(q)
	type scored struct {
		id  int64
		sim float64
	}
	var best []scored
	for rows.Next() {
		var id int64
		var blob []byte
		if err := rows.Scan(&id, &blob); err != nil {
			return nil, err
		}
		sim := cosine(q, qn, blob)
		if len(best) < limit || sim > best[len(best)-1].sim {
			i := sort.Search(len(best), func(i int) bool { return best[i].sim < sim })
			best = append(best, scored{})
			copy(best[i+1:], best[i:])
			best[i] = scored{id, sim}
			if len(best) > limit {
				best = best[:limit]
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]int64, len(best))
	for i, b := range best {
		out[i] = b.id
	}
	return out, nil
}

// docs reads documents by rowid.
func (ix *Index) docs(ctx context.Context, ids []int64) (map[int64]Doc, error) {
	out := map[int64]Doc{}
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := ix.db.QueryContext(ctx, `SELECT rowid, id, ts, who, kind, text FROM docs WHERE rowid IN (?`+strings.Repeat(",?", len(ids)-1)+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("recall search: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var rowid, ts int64
		var d Doc
		if err := rows.Scan(&rowid, &d.ID, &ts, &d.Who, &d.Kind, &d.Text); err != nil {
			return nil, err
		}
		d.Time = time.Unix(0, ts)
		out[rowid] = d
	}
	return out, rows.Err()
}

func encodeVec(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func norm(v []float32) float64 {
	var s float64
	for _, f := range v {
		s += float64(f) * float64(f)
	}
	return math.Sqrt(s)
}

// cosine is the cosine similarity of q (of norm qn) and the encoded
// vector b (0 when the lengths differ or a norm is 0).
func cosine(q []float32, qn float64, b []byte) float64 {
	if len(b) != 4*len(q) || qn == 0 {
		return 0
	}
	var dot, bn float64
	for i := range q {
		f := float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		dot += float64(q[i]) * f
		bn += f * f
	}
	if bn == 0 {
		return 0
	}
	return dot / (qn * math.Sqrt(bn))
}
