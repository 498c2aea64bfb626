package tools

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrOutside is matched (errors.Is) by every refusal of a path that leads
// outside the workspace, lexically or through a symlink.
var ErrOutside = errors.New("path is outside the workspace")

// maxLinks bounds symlink hops during resolution (as the kernel does).
const maxLinks = 40

// Workspace confines file paths to one directory tree.
type Workspace struct {
	// root is the absolute root as given (what the model is told);
	// real is the same directory with its own symlinks resolved.
	root string
	real string
}

// NewWorkspace returns a workspace rooted at dir, which must exist.
func NewWorkspace(dir string) (*Workspace, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("workspace %s: not a directory", dir)
	}
	return &Workspace{root: abs, real: real}, nil
}

// Root is the workspace directory as given.
func (w *Workspace) Root() string { return w.root }

// Rel returns abs (a resolved path) relative to the workspace, for messages
// shown to the model.
func (w *Workspace) Rel(abs string) string {
	if rel, err := filepath.Rel(w.real, abs); err == nil && within(".", rel) {
		return rel
	}
	return abs
}

// Resolve turns a path argument into an absolute path inside the workspace.
// Relative paths are taken from the workspace root; absolute paths must lie
// under it. Every existing component is checked: a symlink whose target
// leaves the workspace is refused, also when it is a parent directory or a
// dangling link that a write would create through. Components that do not
// exist yet are returned as they are (they cannot be links).
func (w *Workspace) Resolve(p string) (string, error) {
	if strings.TrimSpace(p) == "" {
		return "", errors.New("empty path")
	}
	if strings.ContainsRune(p, 0) {
		return "", errors.New("path contains a NUL byte")
	}
	var rel string
	if filepath.IsAbs(p) {
		c := filepath.Clean(p)
		switch {
		case within(w.root, c):
			rel, _ = filepath.Rel(w.root, c)
		case within(w.real, c):
			rel, _ = filepath.Rel(w.real, c)
		default:
			return "", fmt.Errorf("%q: %w %s", p, ErrOutside, w.root)
		}
	} else {
		rel = filepath.Clean(p)
		if rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return "", fmt.Errorf("%q: %w %s (it climbs out with ..)", p, ErrOutside, w.root)
		}
	}
	parts := split(rel)
	cur := w.real
	links := 0
	for i := 0; i < len(parts); i++ {
		next := filepath.Join(cur, parts[i])
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) {
			return filepath.Join(append([]string{next}, parts[i+1:]...)...), nil
		}
		if err != nil {
			return "", fmt.Errorf("%q: %w", p, unwrapPath(err))
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if i < len(parts)-1 && !fi.IsDir() {
				return "", fmt.Errorf("%q: %s is not a directory", p, w.Rel(next))
			}
			cur = next
			continue
		}
		links++
		if links > maxLinks {
			return "", fmt.Errorf("%q: too many levels of symbolic links", p)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", fmt.Errorf("%q: %w", p, unwrapPath(err))
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(cur, target)
		}
		target = filepath.Clean(target)
		var trel string
		switch {
		case within(w.real, target):
			trel, _ = filepath.Rel(w.real, target)
		case within(w.root, target):
			trel, _ = filepath.Rel(w.root, target)
		default:
			return "", fmt.Errorf("%q: %w %s: %s is a symlink to %s", p, ErrOutside, w.root, w.Rel(next), target)
		}
		// Start over from the root with the link's target in place of the
		// components resolved so far.
		parts = append(split(trel), parts[i+1:]...)
		cur = w.real
		i = -1
	}
	return cur, nil
}

// within reports whether p is root or lies under it (both clean).
func within(root, p string) bool {
	if root == "." {
		return p == "." || !(p == ".." || strings.HasPrefix(p, ".."+string(filepath.Separator))) && !filepath.IsAbs(p)
	}
	if p == root {
		return true
	}
	r := root
	if !strings.HasSuffix(r, string(filepath.Separator)) {
		r += string(filepath.Separator)
	}
	return strings.HasPrefix(p, r)
}

func split(rel string) []string {
	if rel == "." || rel == "" {
		return nil
	}
	return strings.Split(rel, string(filepath.Separator))
}

// unwrapPath drops the *fs.PathError wrapper, whose absolute path would
// repeat what the caller's message already says.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
