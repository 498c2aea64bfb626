package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileReplacesAndLeavesNoTemp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	for _, content := range []string{"old", "new content"} {
		if err := WriteFile(path, []byte(content), 0o640); err != nil {
			t.Fatalf("WriteFile(%q) = %v", content, err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("ReadFile = %q, %v, want %q", got, err, content)
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o640 {
		t.Errorf("perm = %v, want 0640", st.Mode().Perm())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only f.json: %v", len(ents), ents)
	}
}

func TestWriteFileMissingDirFails(t *testing.T) {
	t.Parallel()
	if err := WriteFile(filepath.Join(t.TempDir(), "no", "f"), []byte("x"), 0o600); err == nil {
		t.Error("WriteFile into a missing directory succeeded")
	}
}

func TestWriteFileNoSyncReplaces(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "marker.json")
	for _, content := range []string{"one", "two"} {
		if err := WriteFileNoSync(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path); string(got) != content {
			t.Errorf("content %q, want %q", got, content)
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("%d entries left, want the file alone", len(entries))
	}
	if err := WriteFileNoSync(filepath.Join(path, "under-a-file"), nil, 0o600); err == nil {
		t.Error("a write under a file succeeded")
	}
}
