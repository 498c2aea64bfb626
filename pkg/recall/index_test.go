package recall

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/chat"
)

func logLines(t *testing.T, msgs ...chat.ChannelMessage) string {
	t.Helper()
	var b strings.Builder
	for _, m := range msgs {
		line, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

func msg(id, text string) chat.ChannelMessage {
	return chat.ChannelMessage{ID: id, ChannelID: "local", Timestamp: time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC), Sender: chat.Sender{ID: "u1", Username: "ann"}, Text: text}
}

func searchIDs(t *testing.T, ix *Index, query string) []string {
	t.Helper()
	hits, err := ix.Search(t.Context(), "cli/local", query, 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, h := range hits {
		ids = append(ids, h.ID)
	}
	return ids
}

// TestRecallIndexFollowsLog: the index takes only the lines added since
// it last looked; a log that no longer matches what was indexed (rewritten
// under the same size or shorter) is indexed anew, the old text gone; a
// MEMORY.md rewrite replaces its paragraphs; a torn last line waits.
func TestRecallIndexFollowsLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "log.jsonl")
	ix, err := Open(t.Context(), filepath.Join(t.TempDir(), "recall.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	sync := func() int {
		n, err := ix.SyncChannel(t.Context(), "cli/local", dir)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	first := logLines(t, msg("1", "the backup runs at night"), msg("2", "lunch at noon"))
	os.WriteFile(logPath, []byte(first), 0o600)
	if n := sync(); n != 2 {
		t.Fatalf("first sync added %d, want 2", n)
	}
	if n := sync(); n != 0 {
		t.Errorf("a second sync added %d, want 0", n)
	}
	// One line more, and a torn one after it.
	more := first + logLines(t, msg("3", "the backup disk is full")) + `{"id":"4","text":"half a li`
	os.WriteFile(logPath, []byte(more), 0o600)
	if n := sync(); n != 1 {
		t.Errorf("sync after one line added %d, want 1", n)
	}
	if got := searchIDs(t, ix, "backup"); len(got) != 2 {
		t.Errorf("backup hits = %v, want 1 and 3", got)
	}
	// Rewritten: other messages, the index follows.
	os.WriteFile(logPath, []byte(logLines(t, msg("9", "the garden party is on Sunday"))), 0o600)
	sync()
	if got := searchIDs(t, ix, "backup"); len(got) != 0 {
		t.Errorf("after the log was replaced, backup hits = %v, want none", got)
	}
	if got := searchIDs(t, ix, "garden party"); len(got) != 1 || got[0] != "9" {
		t.Errorf("garden hits = %v, want [9]", got)
	}
	// MEMORY.md: paragraphs and items, replaced when it changes.
	mem := filepath.Join(dir, "MEMORY.md")
	os.WriteFile(mem, []byte("# People\n- Ann keeps the keys\n\n- Bob feeds the cat\n"), 0o600)
	sync()
	if got := searchIDs(t, ix, "keys"); len(got) != 1 || got[0] != "memory:1" {
		t.Errorf("memory hits = %v, want [memory:1]", got)
	}
	os.WriteFile(mem, []byte("- Carol keeps the spare bike\n"), 0o600)
	os.Chtimes(mem, time.Now().Add(time.Minute), time.Now().Add(time.Minute))
	sync()
	if got := searchIDs(t, ix, "keys"); len(got) != 0 {
		t.Errorf("after MEMORY.md changed, keys hits = %v, want none", got)
	}
	docs, at, err := ix.Around(t.Context(), "cli/local", "9", 3, 3)
	if err != nil || len(docs) != 1 || at != 0 {
		t.Errorf("Around(9) = %v, %d, %v", docs, at, err)
	}
	if _, _, err := ix.Around(t.Context(), "cli/local", "1", 1, 1); err != ErrNotFound {
		t.Errorf("Around(a message no longer in the log) = %v, want ErrNotFound", err)
	}
}

// TestRecallIndexDamaged: an index file that is not a database, or of
// another schema, is deleted and built anew from the files: nothing lost.
func TestRecallIndexDamaged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "log.jsonl"), []byte(logLines(t, msg("1", "the backup runs at night"))), 0o600)
	for name, damage := range map[string]func(path string){
		"garbage": func(path string) { os.WriteFile(path, []byte(strings.Repeat("not sqlite ", 1000)), 0o600) },
		"schema": func(path string) {
			ix, err := Open(t.Context(), path, nil)
			if err != nil {
				t.Fatal(err)
			}
			ix.db.Exec(`UPDATE meta SET v = 'old' WHERE k = 'schema'`)
			ix.Close()
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "recall.db")
			damage(path)
			ix, err := Open(t.Context(), path, nil)
			if err != nil {
				t.Fatalf("Open(%s index) = %v, want it rebuilt", name, err)
			}
			defer ix.Close()
			if _, err := ix.SyncChannel(t.Context(), "cli/local", dir); err != nil {
				t.Fatal(err)
			}
			if got := searchIDs(t, ix, "backup"); fmt.Sprint(got) != "[1]" {
				t.Errorf("hits = %v, want [1]", got)
			}
		})
	}
}
