package jsonl

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/fsync"
)

func TestBatchAndGroupCommitShareOneFsync(t *testing.T) {
	t.Parallel()
	kind := "test-" + t.Name()
	path := filepath.Join(t.TempDir(), "l.jsonl")
	j, _, err := OpenWith(path, Options{Sync: true, Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, end, err := j.AppendBatch(map[string]int{"a": 1}, map[string]int{"a": 2}, map[string]int{"a": 3}); err != nil || end != 24 {
		t.Fatalf("AppendBatch = %d, %v", end, err)
	}
	if got := fsync.CountOf(kind); got != 1 {
		t.Errorf("a batch of 3 took %d fsyncs, want 1", got)
	}
	// Three writes made before one commit: that commit covers them all.
	var end Pos
	for i := range 3 {
		_, end, err = j.Write(fmt.Appendf(nil, "{\"b\":%d}\n", i))
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Commit(end); err != nil {
		t.Fatal(err)
	}
	if got := fsync.CountOf(kind); got != 2 {
		t.Errorf("3 writes and one commit: %d fsyncs in all, want 2", got)
	}
	// An earlier offset is covered already: no fsync.
	if err := j.Commit(Pos{End: end.End - 8}); err != nil {
		t.Fatal(err)
	}
	if got := fsync.CountOf(kind); got != 2 {
		t.Errorf("committing a covered offset ran an fsync (%d in all, want 2)", got)
	}
}

func TestConcurrentAppendsAreWholeAndDurable(t *testing.T) {
	t.Parallel()
	kind := "test-" + t.Name()
	path := filepath.Join(t.TempDir(), "l.jsonl")
	j, _, err := OpenWith(path, Options{Sync: true, Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				_, end, err := j.Append(map[string]int{"w": w, "i": i})
				if err != nil {
					errs <- err
					return
				}
				j.smu.Lock()
				covered := j.synced >= end
				j.smu.Unlock()
				if !covered {
					errs <- fmt.Errorf("append to %d returned before an fsync covered it", end)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	if err := Scan(path, 0, -1, func(line []byte, _, _ int64) error {
		seen[string(line)] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != writers*each {
		t.Errorf("%d distinct lines, want %d", len(seen), writers*each)
	}
	if n := fsync.CountOf(kind); n == 0 || n > writers*each {
		t.Errorf("%d fsyncs for %d appends", n, writers*each)
	}
	t.Logf("%d appends from %d goroutines took %d fsyncs", writers*each, writers, fsync.CountOf(kind))
}

func TestWriteRefusesPartialLines(t *testing.T) {
	t.Parallel()
	j, _, err := Open(filepath.Join(t.TempDir(), "l.jsonl"), false)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, _, err := j.Write([]byte(`{"a":1}`)); err == nil {
		t.Error("Write of a line without newline succeeded")
	}
	if _, _, err := j.Write(nil); err == nil {
		t.Error("Write of nothing succeeded")
	}
}

func TestCommitAfterCloseFails(t *testing.T) {
	t.Parallel()
	j, _, err := Open(filepath.Join(t.TempDir(), "l.jsonl"), true)
	if err != nil {
		t.Fatal(err)
	}
	_, end, err := j.Write([]byte("{}\n"))
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	if err := j.Commit(end); err == nil {
		t.Error("Commit after Close succeeded")
	}
	if _, _, err := j.Append(1); err == nil {
		t.Error("Append after a failed commit succeeded")
	}
}

func TestDeferredAppendsAreFlushedLaterOrByTheNextCommit(t *testing.T) {
	t.Parallel()
	kind := "test-" + t.Name()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	path := filepath.Join(t.TempDir(), "l.jsonl")
	j, _, err := OpenWith(path, Options{Sync: true, Kind: kind, FlushAfter: time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.AppendDeferred("mine"); err != nil {
		t.Fatal(err)
	}
	if got := fsync.CountOf(kind); got != 0 {
		t.Fatalf("a deferred append ran %d fsyncs at once", got)
	}
	// An acknowledged append covers the deferred one with its own fsync.
	if _, _, err := j.Append("theirs"); err != nil {
		t.Fatal(err)
	}
	if got := fsync.CountOf(kind); got != 1 {
		t.Fatalf("%d fsyncs after one acknowledged append, want 1", got)
	}
	clk.Advance(time.Second) // the pending flush finds nothing to do
	if got := fsync.CountOf(kind); got != 1 {
		t.Errorf("the deferred flush ran an fsync for bytes already covered (%d in all)", got)
	}
	_, end, err := j.AppendDeferred("mine again")
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if got := fsync.CountOf(kind); got != 2 {
		t.Errorf("%d fsyncs after the flush delay, want 2", got)
	}
	j.smu.Lock()
	synced := j.synced
	j.smu.Unlock()
	if synced < end {
		t.Errorf("synced to %d after the flush, want %d", synced, end)
	}
	if _, _, err := j.AppendDeferred("last"); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if got := fsync.CountOf(kind); got != 3 {
		t.Errorf("Close left a deferred append without fsync (%d fsyncs, want 3)", got)
	}
}
