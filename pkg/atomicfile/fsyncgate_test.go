package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/mother-chat/mother/pkg/fsync"
)

// TestFailedFsyncIsFinal: when the temp file's fsync fails, WriteFile
// fails, path keeps its old content, the temp file is gone, and that temp
// file is never fsynced again; the next WriteFile writes a new temp file
// (fsynced once, on its own descriptor) and replaces path. A failed fsync
// of the directory fails WriteFile too: the new content is there but not
// known to be durable.
func TestFailedFsyncIsFinal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	synced := map[string]int{} // temp file -> fsyncs asked
	failTemp, failDir := true, false
	defer fsync.InjectFault(func(p string) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case p == dir && failDir:
			return syscall.EIO
		case filepath.Dir(p) != dir || !strings.Contains(filepath.Base(p), ".tmp-"):
			return nil
		}
		synced[p]++
		if failTemp {
			return syscall.EIO
		}
		return nil
	})()
	if err := WriteFile(path, []byte("new"), 0o600); !errors.Is(err, syscall.EIO) {
		t.Fatalf("WriteFile with a failing fsync = %v, want EIO", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("after the failure path holds %q, want the old content", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("a temp file was left behind: %v", ents)
	}
	mu.Lock()
	failTemp = false
	mu.Unlock()
	if err := WriteFile(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("path holds %q, want new", b)
	}
	mu.Lock()
	if len(synced) != 2 {
		t.Errorf("fsyncs by temp file: %v, want two temp files", synced)
	}
	for name, n := range synced {
		if n != 1 {
			t.Errorf("temp file %s was fsynced %d times, want once", filepath.Base(name), n)
		}
	}
	failDir = true
	mu.Unlock()
	if err := WriteFile(path, []byte("newer"), 0o600); !errors.Is(err, syscall.EIO) {
		t.Errorf("WriteFile with a failing directory fsync = %v, want EIO", err)
	}
}

// TestWriteFailuresAreReported: a write refused for want of space reaches
// the failure hook.
func TestWriteFailuresAreReported(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "missing", "f")
	var mu sync.Mutex
	var heard []string
	defer fsync.OnFailure(func(p string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if p == path {
			heard = append(heard, err.Error())
		}
	})()
	if err := WriteFile(path, []byte("x"), 0o600); err == nil {
		t.Fatal("WriteFile into a missing directory succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heard) != 1 {
		t.Errorf("the failure hook heard %q, want the one failure", heard)
	}
}
