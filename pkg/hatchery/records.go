package hatchery

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/chat"
	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/jsonl"
)

// instanceID is this Mother's identity on the Docker hosts, kept in
// <dir>/instance so it survives restarts.
func instanceID(dir string) (string, error) {
	p := filepath.Join(dir, "instance")
	b, err := os.ReadFile(p)
	if err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("hatchery: read instance id: %w", err)
	}
	id := "m-" + randomHex(8)
	if err := atomicfile.WriteFile(p, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("hatchery: %w", err)
	}
	return id, nil
}

// loadRecords reads chicks.jsonl (last line per chick wins), keeps the
// chicks that are still alive or ended less than a week ago, and rewrites
// the file with just those.
func (h *Hatchery) loadRecords() error {
	path := filepath.Join(h.dir, "chicks.jsonl")
	recs := map[string]Record{}
	err := jsonl.Scan(path, 0, -1, func(line []byte, start, _ int64) error {
		var r Record
		if err := json.Unmarshal(line, &r); err != nil || r.ID == "" {
			h.logger.Warn("skipping unreadable chicks.jsonl line", "offset", start)
			return nil
		}
		recs[r.ID] = r
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("hatchery: load records: %w", err)
	}
	// A torn tail is repaired by OpenJSONL; open first so ScanLines above
	// never saw one as a record (it skips lines without a newline).
	var buf []byte
	cutoff := h.clock.Now().Add(-7 * 24 * time.Hour)
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range recs {
			if !yield(id) {
				return
			}
		}
	})
	for _, id := range ids {
		r := recs[id]
		if r.State.Final() && r.Removed && r.EndedAt.Before(cutoff) {
			os.RemoveAll(filepath.Join(h.dir, id))
			continue
		}
		line, _ := json.Marshal(r)
		buf = append(append(buf, line...), '\n')
		c := &chick{rec: r, stopCh: make(chan struct{}), ended: make(chan struct{}), restored: true}
		if r.State.Final() {
			c.stopped = true
			close(c.stopCh)
			close(c.ended)
		}
		h.chicks[id] = c
	}
	if err := atomicfile.WriteFile(path, buf, 0o600); err != nil {
		// The file keeps what it had (more lines, the same last word on
		// each chick): a full disk is no reason to stay down.
		h.logger.Warn("chicks.jsonl not compacted; kept as it is", "err", err)
	}
	j, torn, err := jsonl.OpenWith(path, jsonl.Options{Sync: true, Kind: fsync.KindChicks})
	if err != nil {
		return fmt.Errorf("hatchery: %w", err)
	}
	if torn > 0 {
		h.logger.Warn("repaired torn last line of chicks.jsonl", "bytes", torn)
	}
	h.records = j
	h.pruneLocked()
	return nil
}

// persist appends c's record. A record that could not be stored (a full
// or failing disk) is appended again, as it is then, with the next record
// that can be. Callers hold h.mu.
func (h *Hatchery) persist(c *chick) {
	if h.records == nil {
		return
	}
	if _, _, err := h.records.Append(c.rec); err != nil {
		if h.unpersisted == nil {
			h.unpersisted = map[string]bool{}
		}
		if !h.unpersisted[c.rec.ID] {
			h.logger.Error("cannot persist chick record; it is written again with the next one that can be", "chick", c.rec.ID, "err", err)
		}
		h.unpersisted[c.rec.ID] = true
		return
	}
	delete(h.unpersisted, c.rec.ID)
	for id := range h.unpersisted {
		o, ok := h.chicks[id]
		if !ok {
			delete(h.unpersisted, id)
			continue
		}
		if _, _, err := h.records.Append(o.rec); err != nil {
			return
		}
		delete(h.unpersisted, id)
		h.logger.Info("chick record persisted after an earlier failure", "chick", id)
	}
}

func (h *Hatchery) info(c *chick) Info {
	in := Info{Record: c.rec, Channel: chat.QualifiedID(c.rec.Adapter, c.rec.ChannelID)}
	in.TokenHash = ""
	in.System = ""
	if h.meter != nil {
		in.Usage = h.meter.ChickUsage(c.rec.ID)
		if fm, ok := h.meter.(FallbackMeter); ok {
			in.AnsweredBy = fm.ChickAnsweredBy(c.rec.ID)
		}
	}
	return in
}

// Reported records that the end of chick id has been told to its channel
// (see Record.Unreported).
func (h *Hatchery) Reported(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.chicks[id]
	if !ok || !c.rec.Unreported {
		return
	}
	c.rec.Unreported = false
	h.persist(c)
	h.pruneLocked()
}

// MaxRemembered is how many ended chicks (their containers gone) the
// hatchery keeps in memory, for momctl chicks ls --all and list_chicks.
// Older ones are forgotten, so a Mother that runs for months does not grow
// with every chick; their records stay in chicks.jsonl until the weekly
// compaction at start.
const MaxRemembered = 200

// pruneLocked forgets the oldest ended chicks beyond MaxRemembered.
// Callers hold h.mu.
func (h *Hatchery) pruneLocked() {
	var ended []*chick
	for _, c := range h.chicks {
		if c.rec.State.Final() && (c.rec.Removed || c.rec.ContainerID == "") && !c.rec.Unreported {
			ended = append(ended, c)
		}
	}
	if len(ended) <= MaxRemembered {
		return
	}
	sort.Slice(ended, func(i, j int) bool {
		if !ended[i].rec.EndedAt.Equal(ended[j].rec.EndedAt) {
			return ended[i].rec.EndedAt.Before(ended[j].rec.EndedAt)
		}
		return ended[i].rec.ID < ended[j].rec.ID
	})
	f, _ := h.meter.(Forgetter)
	for _, c := range ended[:len(ended)-MaxRemembered] {
		delete(h.chicks, c.rec.ID)
		if f != nil {
			f.ForgetChick(c.rec.ID)
		}
	}
}

// State returns a chick's state ("" if unknown).
func (h *Hatchery) State(id string) State {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c, ok := h.chicks[id]; ok {
		return c.rec.State
	}
	return ""
}

// Get returns one chick.
func (h *Hatchery) Get(id string) (Info, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.chicks[id]
	if !ok {
		return Info{}, fmt.Errorf("chick %s: %w", id, ErrUnknownChick)
	}
	return h.info(c), nil
}

// Ended returns a channel closed when the chick has ended.
func (h *Hatchery) Ended(id string) (<-chan struct{}, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.chicks[id]
	if !ok {
		return nil, fmt.Errorf("chick %s: %w", id, ErrUnknownChick)
	}
	return c.ended, nil
}

// List returns the chicks that are alive (all: also the remembered ended
// ones), oldest first.
func (h *Hatchery) List(all bool) []Info {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Info
	for _, c := range h.chicks {
		if all || !c.rec.State.Final() {
			out = append(out, h.info(c))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}
