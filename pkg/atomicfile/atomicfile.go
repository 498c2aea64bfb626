// Package atomicfile replaces files atomically: temp file in the same
// directory, fsync, rename, directory fsync.
package atomicfile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mother-chat/mother/pkg/fsync"
)

// WriteFile replaces path with data: write a temp file in the same
// directory, fsync it, rename it over path, fsync the directory. Readers see
// the old content or the new, never a mix, and a crash leaves one of them.
//
// A failed fsync of the temp file is final (fsyncgate: Linux may have
// dropped the pages it could not write, and a second fsync would succeed
// without them): the temp file is removed, never renamed, and path keeps
// its old content; a retry writes a new temp file from data. A failed
// fsync of the directory returns an error although path already holds the
// new content: it may not survive a crash, so it must not be acknowledged,
// and a retry replaces it again. Failures are reported to the fsync
// package's failure hook.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return failed("write", path, err)
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
		return failed("write", path, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		return failed("write", path, err)
	}
	if err := fsync.File(tmp, fsync.KindReplace); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return failed("write", path, err)
	}
	if err := os.Rename(name, path); err != nil {
		return failed("replace", path, err)
	}
	ok = true
	return fsync.Dir(dir)
}

// failed reports err (writing path) to the failure hook and wraps it.
func failed(op, path string, err error) error {
	fsync.Report(path, err)
	return fmt.Errorf("%s %s: %w", op, path, err)
}

// WriteFileNoSync replaces path with data through a temp file and rename,
// without fsync: readers and a killed process see the old content or the
// new, never a mix, but a power loss may leave either, or an empty file.
// It is for files whose loss costs nothing a reader cannot cope with.
func WriteFileNoSync(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return failed("write", path, err)
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
		return failed("write", path, werr)
	}
	return nil
}

// Overwrite puts data in the file at path in place, creating it if need
// be: one write at offset 0, padded with spaces to the file's old length,
// so it is only for formats in which trailing whitespace means nothing
// (JSON). There is no temp file and no rename: on ext4 a rename over a
// file flushes the new file's data at once (auto_da_alloc) and journals
// two directory changes, costing a busy disk milliseconds, where this
// costs one write into the page cache.
//
// A killed process leaves the old content or the new, never a mix, as
// long as the padded data fits one page: Linux copies a write into the
// page cache a page at a time and only stops for a fatal signal between
// pages. Larger data goes through WriteFileNoSync. A crash between the
// file's creation and its first write leaves it empty. A power loss may
// leave either content, or a mix of the two at block granularity: only
// for files whose loss costs nothing a reader cannot cope with.
func Overwrite(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, perm)
	if err != nil {
		return failed("write", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	page := os.Getpagesize()
	if old := st.Size(); old > int64(len(data)) && old <= int64(page) {
		data = append(data[:len(data):len(data)], bytes.Repeat([]byte{' '}, int(old)-len(data))...)
	} else if old > int64(page) || len(data) > page {
		// Longer than a page: a fresh file (which also brings a file
		// padded long by an earlier write back down).
		f.Close()
		return WriteFileNoSync(path, data, perm)
	}
	_, werr := f.WriteAt(data, 0)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return failed("write", path, werr)
	}
	return nil
}
