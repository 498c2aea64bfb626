package tools

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixture builds a workspace with links that stay inside and links that
// escape, next to an "outside" directory holding a secret.
func fixture(t testing.TB) (ws *Workspace, root, outside string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "ws")
	outside = filepath.Join(base, "outside")
	for _, d := range []string{root, outside, filepath.Join(root, "dir", "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(outside, "secret"), "secret")
	write(filepath.Join(root, "dir", "file.txt"), "hello\n")
	links := map[string]string{
		"in-abs":       filepath.Join(root, "dir"), // absolute, inside
		"in-rel":       "dir/file.txt",             // relative, inside
		"dir/up":       "..",                       // back to the root
		"out-abs":      outside,                    // absolute, outside
		"out-rel":      "../outside",               // relative, outside
		"out-file":     filepath.Join(outside, "secret"),
		"dir/sub/deep": "../../../outside/secret",     // climbs out from a subdir
		"dangling-out": filepath.Join(outside, "new"), // a write would create outside
		"dangling-in":  "dir/new-file",
		"chain1":       "chain2",
		"chain2":       "out-abs",
		"loop1":        "loop2",
		"loop2":        "loop1",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := NewWorkspace(root)
	if err != nil {
		t.Fatal(err)
	}
	return ws, root, outside
}

func TestResolve(t *testing.T) {
	ws, root, _ := fixture(t)
	real, _ := filepath.EvalSymlinks(root)
	ok := []struct{ in, want string }{
		{"dir/file.txt", "dir/file.txt"},
		{"./dir/../dir/file.txt", "dir/file.txt"},
		{".", ""},
		{root + "/dir/file.txt", "dir/file.txt"},
		{"in-abs/file.txt", "dir/file.txt"},
		{"in-rel", "dir/file.txt"},
		{"dir/up/dir/file.txt", "dir/file.txt"},
		{"new/dir/file", "new/dir/file"},
		{"dangling-in", "dir/new-file"},
	}
	for _, c := range ok {
		got, err := ws.Resolve(c.in)
		if err != nil {
			t.Errorf("Resolve(%q) = error %v, want %s", c.in, err, c.want)
			continue
		}
		if want := filepath.Join(real, c.want); got != want {
			t.Errorf("Resolve(%q) = %s, want %s", c.in, got, want)
		}
	}
	escapes := []string{
		"..", "../outside/secret", "dir/../../outside/secret", "/etc/passwd", "/",
		"out-abs/secret", "out-rel/secret", "out-file", "dir/sub/deep",
		"dangling-out", "chain1/secret", "in-abs/../../outside/secret",
	}
	for _, in := range escapes {
		got, err := ws.Resolve(in)
		if !errors.Is(err, ErrOutside) {
			t.Errorf("Resolve(%q) = %q, %v; want an ErrOutside refusal", in, got, err)
		}
	}
	if _, err := ws.Resolve("out-abs/secret"); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("symlink refusal does not say why: %v", err)
	}
	for _, in := range []string{"", "  ", "a\x00b", "loop1", "dir/file.txt/x"} {
		if got, err := ws.Resolve(in); err == nil {
			t.Errorf("Resolve(%q) = %q, want an error", in, got)
		}
	}
}

// TestResolveThroughSymlinkedRoot: a workspace whose own path is a symlink
// accepts absolute paths under either spelling.
func TestResolveThroughSymlinkedRoot(t *testing.T) {
	_, root, _ := fixture(t)
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Symlink(root, alias); err != nil {
		t.Fatal(err)
	}
	ws, err := NewWorkspace(alias)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{alias + "/dir/file.txt", root + "/dir/file.txt", "dir/file.txt"} {
		got, err := ws.Resolve(p)
		if err != nil || filepath.Base(got) != "file.txt" {
			t.Errorf("Resolve(%q) = %q, %v", p, got, err)
		}
	}
	if _, err := ws.Resolve("out-abs/secret"); !errors.Is(err, ErrOutside) {
		t.Errorf("escape through a symlinked root not refused: %v", err)
	}
}

// FuzzResolve checks the one property that matters: whatever the input,
// a path Resolve returns lies inside the workspace once every symlink on it
// is followed, as the kernel would follow them on open.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{
		"dir/file.txt", "..", "../outside", "/etc/passwd", "out-abs/secret", "dir/sub/deep",
		"dangling-out", "chain1", "a/../../b", "dir/up/up/up", "in-abs/../..", "./././..",
		"dir//sub/../../..", "loop1/x", "dangling-in/x", "\x00", "dir/file.txt/..",
	} {
		f.Add(s)
	}
	ws, root, _ := fixture(f)
	real, _ := filepath.EvalSymlinks(root)
	f.Fuzz(func(t *testing.T, p string) {
		got, err := ws.Resolve(p)
		if err != nil {
			return
		}
		if !within(real, got) {
			t.Fatalf("Resolve(%q) = %q, outside %s", p, got, real)
		}
		// Follow links on the longest existing prefix, as open(2) would.
		existing := got
		for {
			if _, err := os.Lstat(existing); err == nil || existing == real {
				break
			}
			existing = filepath.Dir(existing)
		}
		final, err := filepath.EvalSymlinks(existing)
		if err != nil {
			// A dangling link at the end: where would it write?
			target, rerr := os.Readlink(existing)
			if rerr != nil {
				return // loops and the like: open fails, nothing escapes
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(existing), target)
			}
			final = filepath.Clean(target)
		}
		if !within(real, final) {
			t.Fatalf("Resolve(%q) = %q, which leads to %q outside %s", p, got, final, real)
		}
	})
}
