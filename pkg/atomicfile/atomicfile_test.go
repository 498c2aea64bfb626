package atomicfile

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

func TestOverwriteInPlace(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "marker.json")
	page := os.Getpagesize()
	long := `{"a":"` + strings.Repeat("x", 100) + `"}`
	var first os.FileInfo
	longest := 0
	for i, content := range []string{long, `{"a":1}`, long + " ", `{}`} {
		if err := Overwrite(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(path)
		if strings.TrimRight(string(got), " ") != strings.TrimRight(content, " ") || len(got) < len(content) {
			t.Errorf("write %d: file holds %q, want %q padded with spaces", i, got, content)
		}
		longest = max(longest, len(content))
		if len(got) != longest {
			t.Errorf("write %d: %d bytes, want the longest content's length (padded)", i, len(got))
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = st
		} else if !os.SameFile(first, st) {
			t.Errorf("write %d replaced the file; want it written in place", i)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("perm = %v", st.Mode().Perm())
		}
	}
	// Past a page the write goes through a fresh file, and the next short
	// one brings it back down.
	big := strings.Repeat("y", page+1)
	for _, content := range []string{big, `{"b":2}`} {
		if err := Overwrite(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path); string(got) != content {
			t.Errorf("file holds %d bytes, want exactly %d", len(got), len(content))
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("%d entries left, want the file alone", len(entries))
	}
	if err := Overwrite(filepath.Join(path, "under-a-file"), nil, 0o600); err == nil {
		t.Error("a write under a file succeeded")
	}
}

// TestOverwriteKilled kills a process that overwrites a file with two
// contents of different lengths, again and again, at random moments:
// the file always holds one of them whole.
func TestOverwriteKilled(t *testing.T) {
	if path := os.Getenv("ATOMICFILE_OVERWRITE_LOOP"); path != "" {
		contents := [][]byte{[]byte(`{"n":"` + strings.Repeat("a", 3000) + `"}`), []byte(`{"n":"b"}`)}
		for i := 0; ; i++ {
			if err := Overwrite(path, contents[i%2], 0o600); err != nil {
				os.Exit(3)
			}
		}
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "marker.json")
	for i := range 40 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestOverwriteKilled$")
		cmd.Env = append(os.Environ(), "ATOMICFILE_OVERWRITE_LOOP="+path)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		b, err := os.ReadFile(path)
		if err != nil {
			continue // killed before it created the file
		}
		var v struct{ N string }
		if len(bytes.TrimSpace(b)) == 0 {
			continue // killed between creating the file and its first write
		}
		if err := json.Unmarshal(b, &v); err != nil || (v.N != "b" && v.N != strings.Repeat("a", 3000)) {
			t.Fatalf("kill %d left %d bytes that are neither content (%v): %.80q", i, len(b), err, b)
		}
	}
}
