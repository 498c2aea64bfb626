// Package atomicfile replaces files atomically: temp file in the same
// directory, fsync, rename, directory fsync.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/mother-chat/mother/pkg/fsync"
)

// WriteFile replaces path with data: write a temp file in the same
// directory, fsync it, rename it over path, fsync the directory. Readers see
// the old content or the new, never a mix, and a crash leaves one of them.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	name := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(name)
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := fsync.File(tmp, fsync.KindReplace); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(name, path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	ok = true
	return fsync.Dir(dir)
}

// WriteFileNoSync replaces path with data through a temp file and rename,
// without fsync: readers and a killed process see the old content or the
// new, never a mix, but a power loss may leave either, or an empty file.
// It is for files whose loss costs nothing a reader cannot cope with.
func WriteFileNoSync(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	name := tmp.Name()
	_, werr := tmp.Write(data)
	if werr == nil && perm != 0o600 { // CreateTemp made it 0600
		werr = tmp.Chmod(perm)
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(name, path)
	}
	if werr != nil {
		os.Remove(name)
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}
