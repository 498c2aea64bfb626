package fsync

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFsyncsAreCountedByKind(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 2 {
		if err := File(f, "test-file"); err != nil {
			t.Fatal(err)
		}
	}
	before := CountOf(KindDir)
	if err := Dir(dir); err != nil {
		t.Fatal(err)
	}
	if got := CountOf("test-file"); got != 2 {
		t.Errorf("test-file: %d fsyncs, want 2", got)
	}
	if got := CountOf(KindDir) - before; got < 1 {
		t.Errorf("dir: %d more fsyncs, want at least 1", got)
	}
	found := false
	for _, c := range Counts() {
		if c.Kind == "test-file" && c.N == 2 {
			found = true
		}
	}
	if !found {
		t.Errorf("Counts() = %v, want test-file 2", Counts())
	}
	if err := Dir(filepath.Join(dir, "missing")); err == nil {
		t.Error("Dir of a missing directory succeeded")
	}
}

func TestPauseSetting(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		kind string
		n    uint64
	}{{"log:4", "log", 4}, {"chick_events:1", "chick_events", 1}, {"", "", 0}, {"log", "", 0}, {"log:0", "", 0}, {"log:x", "", 0}, {":3", "", 0}} {
		p := parsePause(c.in)
		switch {
		case c.kind == "" && p != nil:
			t.Errorf("parsePause(%q) = %+v, want none", c.in, p)
		case c.kind != "" && (p == nil || p.kind != c.kind || p.n != c.n):
			t.Errorf("parsePause(%q) = %+v, want %s #%d", c.in, p, c.kind, c.n)
		}
	}
}

func TestMkdirAllSyncsEachNewParent(t *testing.T) {
	root := t.TempDir()
	before := CountOf(KindDir)
	if err := MkdirAll(filepath.Join(root, "a", "b", "c"), 0o700); err != nil {
		t.Fatal(err)
	}
	if n := CountOf(KindDir) - before; n != 3 {
		t.Errorf("%d directory fsyncs for three new directories, want 3 (each one's parent)", n)
	}
	before = CountOf(KindDir)
	if err := MkdirAll(filepath.Join(root, "a", "b", "c"), 0o700); err != nil {
		t.Fatal(err)
	}
	if n := CountOf(KindDir) - before; n != 0 {
		t.Errorf("%d directory fsyncs for directories that exist, want none", n)
	}
	f := filepath.Join(root, "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAll(filepath.Join(f, "x"), 0o700); err == nil {
		t.Error("MkdirAll under a file succeeded")
	}
}
