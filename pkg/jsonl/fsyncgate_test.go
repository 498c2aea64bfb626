package jsonl

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/mother-chat/mother/pkg/fsync"
)

// writeFaults holds the injected write failures by path: each test fails
// the writes of its own file only, so the tests stay parallel.
var writeFaults sync.Map // path -> func(b []byte) (n int, err error, fail bool)

func init() {
	real := writeFile
	writeFile = func(f *os.File, b []byte) (int, error) {
		if fn, ok := writeFaults.Load(f.Name()); ok {
			if n, err, fail := fn.(func([]byte) (int, error, bool))(b); fail {
				if n > 0 {
					// A short write: part of it lands.
					if _, werr := f.Write(b[:n]); werr != nil {
						return 0, werr
					}
				}
				return n, err
			}
		}
		return real(f, b)
	}
}

// failSyncs makes the next n fsyncs of path fail with EIO (n < 0: all of
// them until the returned func is called). It counts the failures.
func failSyncs(t *testing.T, path string, n int) (failed *atomic.Int64, stop func()) {
	t.Helper()
	failed = new(atomic.Int64)
	left := new(atomic.Int64)
	left.Store(int64(n))
	remove := fsync.InjectFault(func(p string) error {
		if p != path {
			return nil
		}
		if n >= 0 && left.Add(-1) < 0 {
			return nil
		}
		failed.Add(1)
		return syscall.EIO
	})
	t.Cleanup(remove)
	return failed, remove
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(bytes.TrimSpace(b)))
}

// TestFailedFsyncGivesUpTheDescriptor: after a failed fsync the file never
// fsyncs that descriptor again; it opens the file again, cut back to what
// was durable (the record whose fsync failed was never acknowledged, and
// is gone), and the next append is durable on the new descriptor.
func TestFailedFsyncGivesUpTheDescriptor(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "l.jsonl")
	j, _, err := OpenWith(path, Options{Sync: true, Kind: "test-" + t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, _, err := j.Append("a"); err != nil {
		t.Fatal(err)
	}
	old := j.f
	failed, _ := failSyncs(t, path, 1)
	if _, _, err := j.Append("b"); err == nil || !errors.Is(err, syscall.EIO) {
		t.Fatalf("append whose fsync failed: err = %v, want EIO", err)
	}
	if failed.Load() != 1 {
		t.Fatalf("%d fsyncs failed, want 1", failed.Load())
	}
	if j.f == old || j.f == nil {
		t.Fatalf("the descriptor whose fsync failed is still in use (or none is open)")
	}
	if _, err := old.Write([]byte("x\n")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("the old descriptor is not closed: write gave %v", err)
	}
	if got := lines(t, path); strings.Join(got, " ") != `"a"` {
		t.Errorf("after the failure the file holds %q, want only the durable record", got)
	}
	if _, _, err := j.Append("c"); err != nil {
		t.Fatalf("append after the reopen: %v", err)
	}
	if got := lines(t, path); strings.Join(got, " ") != `"a" "c"` {
		t.Errorf("file = %q, want a then c", got)
	}
	if j.Size() != int64(len(`"a"`+"\n"+`"c"`+"\n")) {
		t.Errorf("Size = %d", j.Size())
	}
}

// TestCommitAfterTheCutFails: a write made before a failure whose Commit
// comes after it fails, even when a write made after the reopen ends at
// the same offset (and that one succeeds).
func TestCommitAfterTheCutFails(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "l.jsonl")
	j, _, err := OpenWith(path, Options{Kind: "test-" + t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	_, before, err := j.Write([]byte("\"b\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	failSyncs(t, path, 1)
	if err := j.Flush(); err == nil {
		t.Fatal("flush with a failing fsync succeeded")
	}
	_, after, err := j.Write([]byte("\"c\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if before.End != after.End {
		t.Fatalf("test premise: ends %d and %d differ", before.End, after.End)
	}
	if err := j.Commit(after); err != nil {
		t.Errorf("commit of the write after the reopen: %v", err)
	}
	if err := j.Commit(before); err == nil {
		t.Error("commit of the write the failure cut away succeeded")
	}
	if got := lines(t, path); strings.Join(got, " ") != `"c"` {
		t.Errorf("file = %q, want c alone", got)
	}
}

// TestWriteEIOGivesUpTheDescriptor: a write failing with EIO is the
// disk's failure: the unsynced writes before it are given up too (their
// commits fail), and the next append goes to a fresh descriptor.
func TestWriteEIOGivesUpTheDescriptor(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "l.jsonl")
	j, _, err := OpenWith(path, Options{Kind: "test-" + t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, _, err := j.Append("a"); err != nil {
		t.Fatal(err)
	}
	if err := j.Flush(); err != nil {
		t.Fatal(err)
	}
	_, pending, err := j.Write([]byte("\"b\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	old := j.f
	writeFaults.Store(path, func([]byte) (int, error, bool) { return 0, syscall.EIO, true })
	_, _, err = j.Write([]byte("\"x\"\n"))
	writeFaults.Delete(path)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("write: err = %v, want EIO", err)
	}
	if j.f == old {
		t.Fatal("the descriptor whose write failed with EIO is still in use")
	}
	if err := j.Commit(pending); err == nil {
		t.Error("commit of an unsynced write from before the EIO succeeded")
	}
	if _, _, err := j.Append("c"); err != nil {
		t.Fatal(err)
	}
	if err := j.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := lines(t, path); strings.Join(got, " ") != `"a" "c"` {
		t.Errorf("file = %q, want a then c", got)
	}
}

// TestFullDiskKeepsTheDescriptor: ENOSPC (a short write, then none) is no
// failure of the disk: the short write is cut away, the descriptor kept,
// and the unsynced write before it still commits.
func TestFullDiskKeepsTheDescriptor(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "l.jsonl")
	j, _, err := OpenWith(path, Options{Kind: "test-" + t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	_, pending, err := j.Write([]byte("\"a\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	old := j.f
	writeFaults.Store(path, func(b []byte) (int, error, bool) { return len(b) / 2, syscall.ENOSPC, true })
	if _, _, err := j.Write([]byte("\"long record\"\n")); !NoSpace(err) {
		t.Fatalf("write on a full disk: err = %v, want ENOSPC", err)
	}
	writeFaults.Store(path, func([]byte) (int, error, bool) { return 0, syscall.ENOSPC, true })
	if _, _, err := j.Write([]byte("\"x\"\n")); !NoSpace(err) {
		t.Fatalf("write on a full disk: err = %v, want ENOSPC", err)
	}
	writeFaults.Delete(path)
	if j.f != old {
		t.Error("a full disk made the file give up its descriptor")
	}
	if err := j.Commit(pending); err != nil {
		t.Errorf("commit of the write before the full disk: %v", err)
	}
	if _, _, err := j.Append("b"); err != nil {
		t.Fatal(err)
	}
	if got := lines(t, path); strings.Join(got, " ") != `"a" "b"` {
		t.Errorf("file = %q, want a then b, no torn part", got)
	}
}

// TestFailingDiskRefusesUntilItWorks: while every fsync fails, every
// append fails (opening again fails too) and none is kept; once the disk
// works, the next append reopens the file and succeeds.
func TestFailingDiskRefusesUntilItWorks(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "l.jsonl")
	j, _, err := OpenWith(path, Options{Sync: true, Kind: "test-" + t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if _, _, err := j.Append("a"); err != nil {
		t.Fatal(err)
	}
	failed, stop := failSyncs(t, path, -1)
	for i := range 3 {
		if _, _, err := j.Append(fmt.Sprint("fail", i)); err == nil {
			t.Fatalf("append %d on a failing disk succeeded", i)
		}
	}
	if failed.Load() < 3 {
		t.Errorf("only %d fsyncs were tried", failed.Load())
	}
	stop()
	if _, _, err := j.Append("b"); err != nil {
		t.Fatalf("append once the disk works: %v", err)
	}
	if got := lines(t, path); strings.Join(got, " ") != `"a" "b"` {
		t.Errorf("file = %q, want a then b", got)
	}
}

// TestGroupCommitFailureKeepsExactlyTheAcknowledged: appenders share
// fsyncs while some fail: every append acknowledged is in the file, in
// one whole line, and no append that got an error is.
func TestGroupCommitFailureKeepsExactlyTheAcknowledged(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "l.jsonl")
	j, _, err := OpenWith(path, Options{Sync: true, Kind: "test-" + t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	remove := fsync.InjectFault(func(p string) error {
		if p == path && n.Add(1)%3 == 0 {
			return syscall.EIO
		}
		return nil
	})
	defer remove()
	const writers, each = 6, 40
	var mu sync.Mutex
	acked := map[string]bool{}
	refused := map[string]bool{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				rec := fmt.Sprintf("w%d-%d", w, i)
				_, _, err := j.Append(rec)
				mu.Lock()
				if err == nil {
					acked[rec] = true
				} else {
					refused[rec] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if len(refused) == 0 || len(acked) == 0 {
		t.Fatalf("test premise: %d acknowledged, %d refused", len(acked), len(refused))
	}
	got := map[string]bool{}
	for _, l := range lines(t, path) {
		rec := strings.Trim(l, `"`)
		if got[rec] {
			t.Errorf("%s is in the file twice", rec)
		}
		got[rec] = true
		if refused[rec] {
			t.Errorf("%s was refused but is in the file", rec)
		}
	}
	for rec := range acked {
		if !got[rec] {
			t.Errorf("%s was acknowledged but is not in the file", rec)
		}
	}
	t.Logf("%d acknowledged, %d refused", len(acked), len(refused))
}
