package powercut_test

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mother-chat/mother/internal/powercut"
)

// ---- helpers ----

// seed fills a backing directory: a name ending in "/" is a directory,
// anything else a file with that content. What is there at mount is
// durable.
func seed(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		p := filepath.Join(dir, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(files[name]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// tree reads a directory back in seed's notation (a symlink is "-> target").
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.IsDir():
			out[rel+"/"] = ""
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "-> " + target
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// cut cuts the power and returns what is left.
func cut(t *testing.T, pc *powercut.FS) map[string]string {
	t.Helper()
	if err := pc.Cut(); err != nil {
		t.Fatalf("cut: %v", err)
	}
	return tree(t, pc.Backing())
}

func want(t *testing.T, got, want map[string]string) {
	t.Helper()
	if !maps.Equal(got, want) {
		t.Errorf("after the cut:\n got  %q\n want %q", got, want)
	}
}

func in(pc *powercut.FS, rel string) string { return filepath.Join(pc.Mountpoint(), rel) }

// write writes data to the file at p (created if need be, truncated if
// trunc) and fsyncs it if fsync.
func write(t *testing.T, p, data string, flag int, fsync bool) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|flag, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if fsync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func syncDir(t *testing.T, p string) {
	t.Helper()
	d, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatalf("fsync %s: %v", p, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// ---- file data ----

func TestUnsyncedWriteIsLost(t *testing.T) {
	pc := powercut.MountT(t, seed(t, map[string]string{"a": "durable", "d/": ""}), powercut.Options{})
	write(t, in(pc, "a"), "overwritten and longer", os.O_TRUNC, false)
	write(t, in(pc, "d/b"), "new", 0, false)
	syncDir(t, in(pc, "d")) // b's entry is durable, its data is not
	want(t, cut(t, pc), map[string]string{"a": "durable", "d/": "", "d/b": ""})
}

func TestSyncedWriteIsKept(t *testing.T) {
	pc := powercut.MountT(t, seed(t, map[string]string{"a": "durable"}), powercut.Options{})
	write(t, in(pc, "a"), "replaced", os.O_TRUNC, true)
	write(t, in(pc, "b"), "new", 0, true)
	syncDir(t, pc.Mountpoint())
	want(t, cut(t, pc), map[string]string{"a": "replaced", "b": "new"})
}

func TestAppendThenPartialSync(t *testing.T) {
	pc := powercut.MountT(t, seed(t, map[string]string{"log": "A\n"}), powercut.Options{})
	f, err := os.OpenFile(in(pc, "log"), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.WriteString("B\n")
	must(t, err)
	must(t, f.Sync())
	_, err = f.WriteString("C\n")
	must(t, err)
	must(t, f.Close())
	b, err := os.ReadFile(in(pc, "log"))
	must(t, err)
	if string(b) != "A\nB\nC\n" {
		t.Fatalf("live content %q", b)
	}
	want(t, cut(t, pc), map[string]string{"log": "A\nB\n"})
}

func TestOverwriteTruncateAndExtendAreUndone(t *testing.T) {
	pc := powercut.MountT(t, seed(t, map[string]string{"f": "0123456789", "g": "0123456789"}), powercut.Options{})
	f, err := os.OpenFile(in(pc, "f"), os.O_RDWR, 0)
	must(t, err)
	_, err = f.WriteAt([]byte("xx"), 4)
	must(t, err)
	must(t, f.Truncate(3))
	_, err = f.WriteAt([]byte("yyyyyyyyyyyyyyy"), 2)
	must(t, err)
	must(t, f.Close())
	// g: truncated and synced, then written past the old end unsynced.
	g, err := os.OpenFile(in(pc, "g"), os.O_RDWR, 0)
	must(t, err)
	must(t, g.Truncate(4))
	must(t, g.Sync())
	_, err = g.WriteAt([]byte("zzzzzzzzzz"), 2)
	must(t, err)
	must(t, g.Close())
	want(t, cut(t, pc), map[string]string{"f": "0123456789", "g": "0123"})
}

func TestFdatasyncAndOSyncKeepData(t *testing.T) {
	pc := powercut.MountT(t, seed(t, map[string]string{"a": "", "b": ""}), powercut.Options{})
	f, err := os.OpenFile(in(pc, "a"), os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteString("datasync")
	must(t, err)
	must(t, unix.Fdatasync(int(f.Fd())))
	must(t, f.Close())
	g, err := os.OpenFile(in(pc, "b"), os.O_WRONLY|os.O_SYNC, 0)
	must(t, err)
	_, err = g.WriteString("osync")
	must(t, err)
	must(t, g.Close())
	syncs := pc.Syncs()
	if len(syncs) != 2 || !syncs[0].Datasync || syncs[1].Path != "b" {
		t.Errorf("syncs %v: want fdatasync of a, then the O_SYNC write's fsync of b", syncs)
	}
	want(t, cut(t, pc), map[string]string{"a": "datasync", "b": "osync"})
}

// ---- directory entries ----

func TestCreatedFileVanishesWithoutDirSync(t *testing.T) {
	pc := powercut.MountT(t, seed(t, nil), powercut.Options{})
	write(t, in(pc, "a"), "fsynced, but its name is not", 0, true)
	want(t, cut(t, pc), map[string]string{})
}

func TestSyncPersistsPath(t *testing.T) {
	// The ext4-like option: an fsync of a file makes its name, and its
	// new directories' names, durable.
	pc := powercut.MountT(t, seed(t, map[string]string{"old": "x"}), powercut.Options{SyncPersistsPath: true})
	must(t, os.MkdirAll(in(pc, "d/e"), 0o755))
	write(t, in(pc, "d/e/f"), "kept", 0, true)
	write(t, in(pc, "g"), "not fsynced: the name goes", 0, false)
	must(t, os.Rename(in(pc, "old"), in(pc, "renamed")))
	write(t, in(pc, "renamed"), "y", os.O_APPEND, true) // its rename is durable with it
	want(t, cut(t, pc), map[string]string{"d/": "", "d/e/": "", "d/e/f": "kept", "renamed": "xy"})
}

func TestAtomicReplace(t *testing.T) {
	replace := func(pc *powercut.FS, dirSync bool) {
		write(t, in(pc, ".f.tmp"), "new", 0, true)
		must(t, os.Rename(in(pc, ".f.tmp"), in(pc, "f")))
		if dirSync {
			syncDir(t, pc.Mountpoint())
		}
	}
	t.Run("with dir fsync", func(t *testing.T) {
		pc := powercut.MountT(t, seed(t, map[string]string{"f": "old"}), powercut.Options{})
		replace(pc, true)
		want(t, cut(t, pc), map[string]string{"f": "new"})
	})
	t.Run("without dir fsync", func(t *testing.T) {
		pc := powercut.MountT(t, seed(t, map[string]string{"f": "old"}), powercut.Options{})
		replace(pc, false)
		want(t, cut(t, pc), map[string]string{"f": "old"})
	})
	t.Run("temp name durable, rename not", func(t *testing.T) {
		// The rename is undone: the old file under f, the new under
		// its old name, with its fsynced data.
		pc := powercut.MountT(t, seed(t, map[string]string{"f": "old"}), powercut.Options{})
		write(t, in(pc, ".f.tmp"), "new", 0, true)
		syncDir(t, pc.Mountpoint())
		must(t, os.Rename(in(pc, ".f.tmp"), in(pc, "f")))
		want(t, cut(t, pc), map[string]string{"f": "old", ".f.tmp": "new"})
	})
	t.Run("without fsync of the temp file", func(t *testing.T) {
		// The name is durable, the data is not: an empty file (ext4
		// without auto_da_alloc's flush on rename).
		pc := powercut.MountT(t, seed(t, map[string]string{"f": "old"}), powercut.Options{})
		write(t, in(pc, ".f.tmp"), "new", 0, false)
		must(t, os.Rename(in(pc, ".f.tmp"), in(pc, "f")))
		syncDir(t, pc.Mountpoint())
		want(t, cut(t, pc), map[string]string{"f": ""})
	})
	t.Run("old file written after its last fsync", func(t *testing.T) {
		// The replaced file comes back with its durable content, not
		// what it held when it was replaced.
		pc := powercut.MountT(t, seed(t, map[string]string{"f": "old"}), powercut.Options{})
		write(t, in(pc, "f"), "unsynced", os.O_TRUNC, false)
		replace(pc, false)
		want(t, cut(t, pc), map[string]string{"f": "old"})
	})
}

func TestUnlink(t *testing.T) {
	t.Run("without dir fsync it comes back", func(t *testing.T) {
		pc := powercut.MountT(t, seed(t, map[string]string{"a": "A", "b": "B"}), powercut.Options{})
		must(t, os.Remove(in(pc, "a")))
		must(t, os.Remove(in(pc, "b")))
		write(t, in(pc, "b"), "another b", 0, true)
		want(t, cut(t, pc), map[string]string{"a": "A", "b": "B"})
	})
	t.Run("with dir fsync it is gone", func(t *testing.T) {
		pc := powercut.MountT(t, seed(t, map[string]string{"a": "A"}), powercut.Options{})
		must(t, os.Remove(in(pc, "a")))
		syncDir(t, pc.Mountpoint())
		want(t, cut(t, pc), map[string]string{})
	})
	t.Run("written and fsynced after unlink", func(t *testing.T) {
		// The durable name still points at the inode, whose data an
		// fsync through an open descriptor made durable.
		pc := powercut.MountT(t, seed(t, map[string]string{"a": "A"}), powercut.Options{})
		f, err := os.OpenFile(in(pc, "a"), os.O_RDWR|os.O_APPEND, 0)
		must(t, err)
		defer f.Close()
		must(t, os.Remove(in(pc, "a")))
		_, err = f.WriteString("+synced")
		must(t, err)
		must(t, f.Sync())
		_, err = f.WriteString("+lost")
		must(t, err)
		if st, err := f.Stat(); err != nil || st.Size() != int64(len("A+synced+lost")) {
			t.Fatalf("stat of the unlinked file: %v, %v", st, err)
		}
		must(t, f.Close())
		want(t, cut(t, pc), map[string]string{"a": "A+synced"})
	})
}

func TestRename(t *testing.T) {
	t.Run("undone without dir fsync", func(t *testing.T) {
		pc := powercut.MountT(t, seed(t, map[string]string{"a": "A"}), powercut.Options{})
		must(t, os.Rename(in(pc, "a"), in(pc, "b")))
		want(t, cut(t, pc), map[string]string{"a": "A"})
	})
	t.Run("across directories, only the target fsynced", func(t *testing.T) {
		// POSIX promises nothing about the source: the strict model
		// keeps both names (ext4's journal would not).
		pc := powercut.MountT(t, seed(t, map[string]string{"s/a": "A", "t/": ""}), powercut.Options{})
		must(t, os.Rename(in(pc, "s/a"), in(pc, "t/a")))
		syncDir(t, in(pc, "t"))
		want(t, cut(t, pc), map[string]string{"s/": "", "s/a": "A", "t/": "", "t/a": "A"})
	})
	t.Run("across directories, only the source fsynced", func(t *testing.T) {
		pc := powercut.MountT(t, seed(t, map[string]string{"s/a": "A", "t/": ""}), powercut.Options{})
		must(t, os.Rename(in(pc, "s/a"), in(pc, "t/a")))
		syncDir(t, in(pc, "s"))
		want(t, cut(t, pc), map[string]string{"s/": "", "t/": ""})
	})
	t.Run("a directory across directories, only the target fsynced", func(t *testing.T) {
		// A directory has one durable place: the newest recorded.
		pc := powercut.MountT(t, seed(t, map[string]string{"s/d/f": "F", "t/": ""}), powercut.Options{})
		must(t, os.Rename(in(pc, "s/d"), in(pc, "t/d")))
		syncDir(t, in(pc, "t"))
		want(t, cut(t, pc), map[string]string{"s/": "", "t/": "", "t/d/": "", "t/d/f": "F"})
	})
	t.Run("directories into each other", func(t *testing.T) {
		// p/d becomes d/p; only d is fsynced: p's durable place is in
		// d, d's is still in p, and neither is reachable from the root.
		pc := powercut.MountT(t, seed(t, map[string]string{"p/d/f": "F", "g": "G"}), powercut.Options{})
		must(t, os.Rename(in(pc, "p/d"), in(pc, "d")))
		must(t, os.Rename(in(pc, "p"), in(pc, "d/p")))
		syncDir(t, in(pc, "d"))
		want(t, cut(t, pc), map[string]string{"g": "G"})
	})
	t.Run("exchange", func(t *testing.T) {
		pc := powercut.MountT(t, seed(t, map[string]string{"a": "A", "b": "B", "d/": ""}), powercut.Options{})
		must(t, unix.Renameat2(unix.AT_FDCWD, in(pc, "a"), unix.AT_FDCWD, in(pc, "b"), unix.RENAME_EXCHANGE))
		must(t, os.Rename(in(pc, "d"), in(pc, "e")))
		b, err := os.ReadFile(in(pc, "a"))
		must(t, err)
		if string(b) != "B" {
			t.Fatalf("a holds %q after the exchange", b)
		}
		syncDir(t, pc.Mountpoint())
		want(t, cut(t, pc), map[string]string{"a": "B", "b": "A", "e/": ""})
	})
	t.Run("noreplace", func(t *testing.T) {
		pc := powercut.MountT(t, seed(t, map[string]string{"a": "A", "b": "B"}), powercut.Options{})
		err := unix.Renameat2(unix.AT_FDCWD, in(pc, "a"), unix.AT_FDCWD, in(pc, "b"), unix.RENAME_NOREPLACE)
		if !errors.Is(err, syscall.EEXIST) {
			t.Fatalf("RENAME_NOREPLACE over a file: %v", err)
		}
		want(t, cut(t, pc), map[string]string{"a": "A", "b": "B"})
	})
}

func TestHardLinksAndSymlinks(t *testing.T) {
	pc := powercut.MountT(t, seed(t, map[string]string{"a": "A"}), powercut.Options{})
	must(t, os.Link(in(pc, "a"), in(pc, "b")))
	must(t, os.Symlink("a", in(pc, "s")))
	syncDir(t, pc.Mountpoint())
	must(t, os.Remove(in(pc, "a")))
	must(t, os.Symlink("b", in(pc, "s2")))
	write(t, in(pc, "b"), "+B", os.O_APPEND, true)
	got := cut(t, pc)
	want(t, got, map[string]string{"a": "A+B", "b": "A+B", "s": "-> a"})
	var sa, sb syscall.Stat_t
	must(t, syscall.Stat(filepath.Join(pc.Backing(), "a"), &sa))
	must(t, syscall.Stat(filepath.Join(pc.Backing(), "b"), &sb))
	if sa.Ino != sb.Ino {
		t.Errorf("a and b are no longer one file")
	}
}

func TestMkdirTrees(t *testing.T) {
	t.Run("only the deepest directories fsynced", func(t *testing.T) {
		pc := powercut.MountT(t, seed(t, nil), powercut.Options{})
		must(t, os.MkdirAll(in(pc, "a/b/c"), 0o755))
		write(t, in(pc, "a/b/c/f"), "F", 0, true)
		syncDir(t, in(pc, "a/b/c"))
		syncDir(t, in(pc, "a/b"))
		want(t, cut(t, pc), map[string]string{}) // a's name was never durable
	})
	t.Run("every level fsynced but the last", func(t *testing.T) {
		pc := powercut.MountT(t, seed(t, nil), powercut.Options{})
		must(t, os.MkdirAll(in(pc, "a/b/c"), 0o750))
		write(t, in(pc, "a/b/c/f"), "F", 0, true)
		for _, d := range []string{"a/b", "a", "."} {
			syncDir(t, in(pc, d))
		}
		got := cut(t, pc)
		want(t, got, map[string]string{"a/": "", "a/b/": "", "a/b/c/": ""})
		st, err := os.Stat(filepath.Join(pc.Backing(), "a/b/c"))
		must(t, err)
		if st.Mode().Perm() != 0o750 {
			t.Errorf("a/b/c has mode %v after the cut, want 0750", st.Mode().Perm())
		}
	})
	t.Run("rmdir undone", func(t *testing.T) {
		pc := powercut.MountT(t, seed(t, map[string]string{"a/b/f": "F"}), powercut.Options{})
		must(t, os.RemoveAll(in(pc, "a")))
		syncDir(t, pc.Mountpoint()) // a's removal is durable...
		want(t, cut(t, pc), map[string]string{})
	})
	t.Run("rmdir of the contents only durable", func(t *testing.T) {
		pc := powercut.MountT(t, seed(t, map[string]string{"a/b/f": "F", "a/g": "G"}), powercut.Options{})
		must(t, os.RemoveAll(in(pc, "a")))
		want(t, cut(t, pc), map[string]string{"a/": "", "a/b/": "", "a/b/f": "F", "a/g": "G"})
	})
}

func TestMountSeesWhatIsThere(t *testing.T) {
	backing := seed(t, map[string]string{"a": "A", "d/e/f": "F"})
	must(t, os.Symlink("d/e/f", filepath.Join(backing, "s")))
	must(t, os.Link(filepath.Join(backing, "a"), filepath.Join(backing, "d/hard")))
	pc := powercut.MountT(t, backing, powercut.Options{})
	got := tree(t, pc.Mountpoint())
	want(t, got, map[string]string{"a": "A", "d/": "", "d/e/": "", "d/e/f": "F", "d/hard": "A", "s": "-> d/e/f"})
	b, err := os.ReadFile(in(pc, "s"))
	must(t, err)
	if string(b) != "F" {
		t.Errorf("through the symlink: %q", b)
	}
	want(t, cut(t, pc), got)
}

func TestRemountAfterCut(t *testing.T) {
	pc := powercut.MountT(t, seed(t, nil), powercut.Options{})
	write(t, in(pc, "a"), "A", 0, true)
	syncDir(t, pc.Mountpoint())
	write(t, in(pc, "b"), "B", 0, true)
	must(t, pc.Cut())
	pc2 := pc.RemountT(t)
	want(t, tree(t, pc2.Mountpoint()), map[string]string{"a": "A"})
	write(t, in(pc2, "a"), "+", os.O_APPEND, false)
	want(t, cut(t, pc2), map[string]string{"a": "A"})
}

func TestUnmountKeepsEverything(t *testing.T) {
	pc := powercut.MountT(t, seed(t, nil), powercut.Options{})
	write(t, in(pc, "a"), "A", 0, false)
	must(t, pc.Unmount())
	want(t, tree(t, pc.Backing()), map[string]string{"a": "A"})
}

// ---- the fsync counter and crash points ----

func TestSyncsAreCounted(t *testing.T) {
	pc := powercut.MountT(t, seed(t, map[string]string{"d/": ""}), powercut.Options{})
	write(t, in(pc, "d/a"), "A", 0, true)
	syncDir(t, in(pc, "d"))
	syncDir(t, pc.Mountpoint())
	f, err := os.Open(in(pc, "d/a"))
	must(t, err)
	must(t, os.Remove(in(pc, "d/a")))
	must(t, f.Sync())
	must(t, f.Close())
	got := pc.Syncs()
	wantSyncs := []powercut.Sync{
		{N: 1, Op: 3, Path: "d/a"}, // after the create and the write
		{N: 2, Op: 4, Path: "d", Dir: true},
		{N: 3, Op: 5, Path: ".", Dir: true},
		{N: 4, Op: 7, Path: "d/a (deleted)"}, // after the unlink
	}
	if !slices.Equal(got, wantSyncs) {
		t.Errorf("syncs:\n got  %v\n want %v", got, wantSyncs)
	}
}

// atomicReplace is the sequence the crash-point tests cut at every point:
// two atomic replaces of f, then an append to a log.
func atomicReplace(pc *powercut.FS) error {
	for _, v := range []string{"v1", "v2"} {
		f, err := os.Create(in(pc, ".f.tmp"))
		if err != nil {
			return err
		}
		_, err = f.WriteString(v)
		if err == nil {
			err = f.Sync()
		}
		f.Close()
		if err != nil {
			return err
		}
		if err := os.Rename(in(pc, ".f.tmp"), in(pc, "f")); err != nil {
			return err
		}
		d, err := os.Open(pc.Mountpoint())
		if err != nil {
			return err
		}
		err = d.Sync()
		d.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func TestCrashAtSync(t *testing.T) {
	// fsyncs: 1 tmp(v1) 2 dir 3 tmp(v2) 4 dir.
	cases := []struct {
		sync  int
		after bool
		want  string
	}{
		{1, false, "v0"}, {1, true, "v0"},
		{2, false, "v0"}, {2, true, "v1"},
		{3, false, "v1"}, {3, true, "v1"},
		{4, false, "v1"}, {4, true, "v2"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d after=%v", c.sync, c.after), func(t *testing.T) {
			pc := powercut.MountT(t, seed(t, map[string]string{"f": "v0"}), powercut.Options{})
			pc.CrashAt(powercut.Crash{Sync: c.sync, After: c.after})
			err := atomicReplace(pc)
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("the sequence ended with %v, want EIO from the frozen filesystem", err)
			}
			select {
			case <-pc.Frozen():
			default:
				t.Fatal("not frozen")
			}
			if _, err := os.ReadFile(in(pc, "f")); !errors.Is(err, syscall.EIO) {
				t.Errorf("a read on the frozen filesystem: %v, want EIO", err)
			}
			if n := len(pc.Syncs()); n != c.sync {
				t.Errorf("%d fsyncs seen, want %d", n, c.sync)
			}
			want(t, cut(t, pc), map[string]string{"f": c.want})
		})
	}
	t.Run("by path", func(t *testing.T) {
		pc := powercut.MountT(t, seed(t, map[string]string{"f": "v0"}), powercut.Options{})
		pc.CrashAt(powercut.Crash{Sync: 2, Path: regexp.MustCompile(`^\.$`), After: true})
		if err := atomicReplace(pc); !errors.Is(err, syscall.EIO) {
			t.Fatal(err)
		}
		if !strings.Contains(pc.FrozenBy(), "after fsync #4 dir .") {
			t.Errorf("frozen by %q", pc.FrozenBy())
		}
		want(t, cut(t, pc), map[string]string{"f": "v2"})
	})
}

func TestCrashAtEveryOperation(t *testing.T) {
	dry := powercut.MountT(t, seed(t, map[string]string{"f": "v0"}), powercut.Options{})
	must(t, atomicReplace(dry))
	total := dry.Ops()
	must(t, dry.Unmount())
	if total < 8 {
		t.Fatalf("only %d operations counted", total)
	}
	seen := map[string]bool{}
	for op := 1; op <= total+1; op++ { // total+1: no cut before the end
		pc := powercut.MountT(t, seed(t, map[string]string{"f": "v0"}), powercut.Options{Logf: func(string, ...any) {}})
		pc.CrashAt(powercut.Crash{Op: op})
		if err := atomicReplace(pc); op <= total && !errors.Is(err, syscall.EIO) || op > total && err != nil {
			t.Fatalf("op %d: the sequence ended with %v", op, err)
		}
		got := cut(t, pc)
		if len(got) != 1 || !regexp.MustCompile(`^v[012]$`).MatchString(got["f"]) {
			t.Errorf("cut before operation %d of %d: %q, want f holding one whole version and nothing else", op, total, got)
		}
		seen[got["f"]] = true
	}
	if len(seen) != 3 {
		t.Errorf("versions seen over every cut: %v, want v0, v1 and v2", seen)
	}
}

func TestFreezeBlocksUntilCut(t *testing.T) {
	pc := powercut.MountT(t, seed(t, nil), powercut.Options{BlockWhenFrozen: true})
	pc.Freeze()
	done := make(chan error, 1)
	go func() { done <- os.WriteFile(in(pc, "a"), []byte("A"), 0o644) }()
	for pc.Waiting() == 0 {
		select {
		case err := <-done:
			t.Fatalf("an operation on the frozen filesystem returned: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
	must(t, pc.Cut())
	if err := <-done; err == nil {
		t.Error("the blocked write succeeded")
	}
	want(t, tree(t, pc.Backing()), map[string]string{})
}

// ---- faults ----

func TestWriteAndSyncFaults(t *testing.T) {
	pc := powercut.MountT(t, seed(t, map[string]string{"log": "", "other": ""}), powercut.Options{})
	pc.Inject(powercut.Fault{Write: true, Path: regexp.MustCompile(`^log$`), Times: 1})
	pc.Inject(powercut.Fault{Sync: true, Path: regexp.MustCompile(`^other$`), Err: syscall.ENOSPC})
	f, err := os.OpenFile(in(pc, "log"), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	if _, err := f.WriteString("first"); !errors.Is(err, syscall.EIO) {
		t.Errorf("first write: %v, want EIO", err)
	}
	if _, err := f.WriteString("second"); err != nil {
		t.Errorf("second write (the fault was for once): %v", err)
	}
	must(t, f.Sync())
	g, err := os.OpenFile(in(pc, "other"), os.O_WRONLY, 0)
	must(t, err)
	_, err = g.WriteString("data")
	must(t, err)
	if err := g.Sync(); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("fsync of other: %v, want ENOSPC", err)
	}
	syncs := pc.Syncs()
	if len(syncs) != 2 || !errors.Is(syncs[1].Err, syscall.ENOSPC) {
		t.Errorf("syncs %v", syncs)
	}
	must(t, f.Close())
	must(t, g.Close())
	pc.ClearFaults()
	// A failed fsync made nothing durable.
	want(t, cut(t, pc), map[string]string{"log": "second", "other": ""})
}

func TestSpaceLimit(t *testing.T) {
	pc := powercut.MountT(t, seed(t, nil), powercut.Options{})
	pc.LimitSpace(10)
	f, err := os.Create(in(pc, "a"))
	must(t, err)
	defer f.Close()
	_, err = f.WriteString("123456")
	must(t, err)
	n, err := f.WriteString("789abc")
	if n != 4 || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("write past the limit: %d bytes, %v; want 4 bytes then ENOSPC", n, err)
	}
	if _, err := f.WriteString("x"); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("write on a full disk: %v, want ENOSPC", err)
	}
	pc.LimitSpace(-1)
	_, err = f.WriteString("!")
	must(t, err)
	b, err := os.ReadFile(in(pc, "a"))
	must(t, err)
	if string(b) != "123456789a!" {
		t.Errorf("content %q", b)
	}
}

// ---- torn writes ----

func TestTornKeepsAPrefix(t *testing.T) {
	const durable = "line0\n"
	lines := []string{"line1\n", "line2 is longer\n", "line3\n", "line4 is the longest of all\n"}
	full := durable + strings.Join(lines, "")
	outcomes := map[string]bool{}
	for s := range uint64(24) {
		pc := powercut.MountT(t, seed(t, map[string]string{"log": durable}), powercut.Options{Unsynced: powercut.KeepPrefix, Seed: s, Logf: func(string, ...any) {}})
		f, err := os.OpenFile(in(pc, "log"), os.O_WRONLY|os.O_APPEND, 0)
		must(t, err)
		for _, l := range lines {
			_, err := f.WriteString(l)
			must(t, err)
		}
		must(t, f.Close())
		got := cut(t, pc)["log"]
		if !strings.HasPrefix(got, durable) || !strings.HasPrefix(full, got) {
			t.Fatalf("seed %d: %q is not the durable content plus a prefix of what followed", s, got)
		}
		outcomes[got] = true
	}
	if len(outcomes) < 4 {
		t.Errorf("24 seeds gave only %d outcomes: %q", len(outcomes), slices.Sorted(maps.Keys(outcomes)))
	}
	var torn bool
	for o := range outcomes {
		torn = torn || !strings.HasSuffix(o, "\n")
	}
	if !torn {
		t.Error("no seed tore a write")
	}
}

func TestKeepSubsetLeavesHoles(t *testing.T) {
	const durable = "line0\n"
	lines := []string{"line1\n", "line2\n", "line3\n", "line4\n"}
	holes := 0
	for s := range uint64(16) {
		pc := powercut.MountT(t, seed(t, map[string]string{"log": durable}), powercut.Options{Unsynced: powercut.KeepSubset, Seed: s, Logf: func(string, ...any) {}})
		f, err := os.OpenFile(in(pc, "log"), os.O_WRONLY|os.O_APPEND, 0)
		must(t, err)
		for _, l := range lines {
			_, err := f.WriteString(l)
			must(t, err)
		}
		must(t, f.Close())
		got := cut(t, pc)["log"]
		// Each line is there or zeros, up to the last one kept.
		if !strings.HasPrefix(got, durable) || (len(got)-len(durable))%6 != 0 {
			t.Fatalf("seed %d: %q", s, got)
		}
		sawHole := false
		for k := 0; k < (len(got)-len(durable))/6; k++ {
			part := got[len(durable)+6*k : len(durable)+6*k+6]
			switch part {
			case lines[k]:
			case "\x00\x00\x00\x00\x00\x00":
				sawHole = true
			default:
				t.Fatalf("seed %d: line %d is %q in %q", s, k+1, part, got)
			}
		}
		if sawHole {
			holes++
		}
	}
	if holes == 0 {
		t.Error("16 seeds never kept a later append without an earlier one")
	}
}

func TestCutWhileAFileIsOpen(t *testing.T) {
	// The mount is busy: Cut detaches it, and the open file fails from
	// then on.
	pc := powercut.MountT(t, seed(t, map[string]string{"a": "A"}), powercut.Options{})
	f, err := os.OpenFile(in(pc, "a"), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.WriteString("+unsynced")
	must(t, err)
	want(t, cut(t, pc), map[string]string{"a": "A"})
	if _, err := f.WriteString("+after"); !errors.Is(err, syscall.EIO) {
		t.Errorf("a write after the cut: %v, want EIO", err)
	}
	f.Close()
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	must(t, err)
	if strings.Contains(string(mounts), pc.Mountpoint()) {
		t.Errorf("%s is still mounted after the cut", pc.Mountpoint())
	}
	want(t, tree(t, pc.Backing()), map[string]string{"a": "A"})
}

func TestUnixSocketOnTheMount(t *testing.T) {
	// Mother's admin socket lives in her data directory.
	pc := powercut.MountT(t, seed(t, nil), powercut.Options{})
	l, err := net.Listen("unix", in(pc, "mother.sock"))
	must(t, err)
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Write([]byte("hello"))
			c.Close()
		}
	}()
	c, err := net.Dial("unix", in(pc, "mother.sock"))
	must(t, err)
	b, err := io.ReadAll(c)
	c.Close()
	must(t, err)
	if string(b) != "hello" {
		t.Errorf("read %q through the socket", b)
	}
}

func TestCrashAtARandomPointBetweenSyncs(t *testing.T) {
	// A dry run gives each fsync's operation number; a random operation
	// between the first two fsyncs cuts between them.
	dry := powercut.MountT(t, seed(t, map[string]string{"f": "v0"}), powercut.Options{})
	must(t, atomicReplace(dry))
	syncs := dry.Syncs()
	must(t, dry.Unmount())
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 35))
	for range 5 {
		op := syncs[0].Op + 1 + rng.IntN(syncs[1].Op-syncs[0].Op)
		pc := powercut.MountT(t, seed(t, map[string]string{"f": "v0"}), powercut.Options{})
		pc.CrashAt(powercut.Crash{Op: op})
		if err := atomicReplace(pc); !errors.Is(err, syscall.EIO) {
			t.Fatalf("op %d: %v", op, err)
		}
		if n := len(pc.Syncs()); n != 1 {
			t.Errorf("cut before operation %d saw %d fsyncs, want 1", op, n)
		}
		want(t, cut(t, pc), map[string]string{"f": "v0"})
	}
}

func TestModeAndOwnerSurviveTheCut(t *testing.T) {
	// What a cut makes afresh (a removed directory, a removed file's
	// copy) gets the mode and owner it had.
	pc := powercut.MountT(t, seed(t, map[string]string{"d/": "", "f": "F"}), powercut.Options{})
	must(t, os.Chmod(in(pc, "d"), 0o750))
	must(t, os.Chown(in(pc, "d"), 65534, 65534))
	must(t, os.Chmod(in(pc, "f"), 0o640))
	must(t, os.Chown(in(pc, "f"), 65534, 65534))
	must(t, os.Remove(in(pc, "d")))
	must(t, os.Remove(in(pc, "f")))
	want(t, cut(t, pc), map[string]string{"d/": "", "f": "F"})
	for name, mode := range map[string]os.FileMode{"d": 0o750, "f": 0o640} {
		st, err := os.Stat(filepath.Join(pc.Backing(), name))
		must(t, err)
		sys := st.Sys().(*syscall.Stat_t)
		if st.Mode().Perm() != mode || (os.Getuid() == 0 && (sys.Uid != 65534 || sys.Gid != 65534)) {
			t.Errorf("%s: mode %v, owner %d:%d after the cut; want %v, 65534:65534", name, st.Mode().Perm(), sys.Uid, sys.Gid, mode)
		}
	}
}
