package wire

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckWorkspacePath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"MEMORY.md", true},
		{"skills/greet/SKILL.md", true},
		{"attachments/a b.txt", true},
		{"..x/y..", true},
		{"", false},
		{"/etc/passwd", false},
		{"../escape", false},
		{"a/../../escape", false},
		{"a/..", false},
		{".", false},
		{"./a", false},
		{"a//b", false},
		{"a/", false},
		{"a\\..\\b", false},
		{"a\x00b", false},
		{FetchedMarker, false},
		{strings.Repeat("a/", MaxFetchPathBytes/2) + "b", false},
	} {
		err := CheckWorkspacePath(tc.path)
		if (err == nil) != tc.ok {
			t.Errorf("CheckWorkspacePath(%q) = %v, want ok %v", tc.path, err, tc.ok)
		}
	}
}

// FuzzCheckWorkspacePath: a path CheckWorkspacePath accepts, joined to a
// directory, names something strictly under that directory, and is
// already clean (what the chick writes is what Mother named).
func FuzzCheckWorkspacePath(f *testing.F) {
	for _, s := range []string{"MEMORY.md", "skills/a/SKILL.md", "../x", "a/../b", "/abs", "a//b", ".", "a/.", "a\\b", "..a/b.."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if CheckWorkspacePath(p) != nil {
			return
		}
		if filepath.Clean(p) != p {
			t.Fatalf("accepted %q, which is not clean (%q)", p, filepath.Clean(p))
		}
		const root = "/workspace"
		j := filepath.Join(root, p)
		if !strings.HasPrefix(j, root+"/") {
			t.Fatalf("accepted %q, which leads to %q", p, j)
		}
		if rel, err := filepath.Rel(root, j); err != nil || rel != p {
			t.Fatalf("accepted %q: relative %q, %v", p, rel, err)
		}
	})
}
