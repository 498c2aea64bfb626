package dataformat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/fsync"
)

// UpgradeDir holds the snapshots, relative to the data directory.
const UpgradeDir = "state/upgrade"

// lockFile is held (flock) by every Mother of 0.2 or later while she runs
// on the directory: shared while she runs, exclusive while she migrates.
// A rollback takes it exclusively, so it never runs under a Mother.
const lockFile = "state/lock"

// crashPoint is called before each durable write of a migration or a
// rollback, named for what comes next; an error stops the work there, as
// a crash would (tests only; nil in production).
var crashPoint func(what string) error

func crash(what string) error {
	if crashPoint == nil {
		return nil
	}
	return crashPoint(what)
}

// Dir is a data directory Prepare made ready: in this release's format,
// and held by this process until Close.
type Dir struct {
	lock *os.File
	// From is the format and release the directory was in before.
	From Info
	// Fresh: the directory had no data of an earlier Mother; it got the
	// format file and no snapshot.
	Fresh bool
	// Migrated are the steps run, in order (none: it was current).
	Migrated []Step
	// Recovered are the steps whose interrupted run (a crash mid-step)
	// was undone from its snapshot before running it again.
	Recovered []Step
}

// Close releases the directory.
func (d *Dir) Close() error {
	if d == nil || d.lock == nil {
		return nil
	}
	return d.lock.Close()
}

// Prepare makes dir ready for this release: it refuses a newer format
// (*NewerError, nothing touched), migrates an older one step by step, each
// after a snapshot of what it changes, and records release in the format
// file. A directory that holds nothing of an earlier Mother (none of
// workspace/, state/, chicks/) just gets the format file. The returned Dir
// holds a shared lock on the directory until it is closed.
func Prepare(dir, release string) (*Dir, error) {
	in, err := Check(dir, release)
	if err != nil {
		return nil, err
	}
	fresh := !hasData(dir)
	if err := fsync.MkdirAll(filepath.Join(dir, "state"), 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", filepath.Join(dir, "state"), err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the data directory's lock: %w", err)
	}
	d := &Dir{lock: lock, From: in, Fresh: fresh}
	ok := false
	defer func() {
		if !ok {
			lock.Close()
		}
	}()
	_, pending := interrupted(dir, in.Format)
	migrate := in.Format < latest() || pending
	// Alone while the directory changes. Only the release to record is
	// no reason to refuse: with another Mother on the directory it is
	// left as it is.
	alone := false
	if migrate || in.Release != release {
		err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		alone = err == nil || noLocks(err)
		if !alone && migrate {
			return nil, fmt.Errorf("another Mother is running on %s; stop her before starting this one (%s needs to migrate the data directory)", absDir(dir), release)
		}
	}
	if alone {
		// Read again under the lock: another Mother may have just
		// migrated it.
		if in, err = Check(dir, release); err != nil {
			return nil, err
		}
		d.From = in
		if err := d.migrate(dir, release); err != nil {
			return nil, err
		}
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_SH); err != nil && !noLocks(err) {
		return nil, fmt.Errorf("lock the data directory: %w", err)
	}
	ok = true
	return d, nil
}

// noLocks reports whether err says the file system takes no locks (some
// network file systems): Mother then runs without one, and a rollback
// relies on her admin socket alone.
func noLocks(err error) bool {
	return errors.Is(err, syscall.ENOLCK) || errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS)
}

// migrate runs the steps from d.From to the latest format.
func (d *Dir) migrate(dir, release string) error {
	in := d.From
	if d.Fresh {
		return writeFormat(dir, Info{Format: latest(), Release: release})
	}
	// A snapshot of the step from the current format is a run that did
	// not finish: its files go back as they were, then it runs again.
	if s, ok := interrupted(dir, in.Format); ok {
		if err := restore(dir, s); err != nil {
			return fmt.Errorf("undo the interrupted migration from format %d: %w", in.Format, err)
		}
		if st, ok := stepFrom(in.Format); ok {
			d.Recovered = append(d.Recovered, st)
		}
	}
	for f := in.Format; f < latest(); f++ {
		st, ok := stepFrom(f)
		if !ok {
			return fmt.Errorf("no migration from data format %d", f)
		}
		fromRelease := in.Release
		if fromRelease == "" {
			fromRelease = firstRelease(f)
		}
		if err := takeSnapshot(dir, st, fromRelease, release); err != nil {
			return fmt.Errorf("snapshot before migrating from format %d to %d: %w", st.From, st.To, err)
		}
		if err := crash("up"); err != nil {
			return err
		}
		if err := st.Up(dir); err != nil {
			return fmt.Errorf("migrate the data directory from format %d to %d: %w", st.From, st.To, err)
		}
		if err := crash("format"); err != nil {
			return err
		}
		in = Info{Format: st.To, Release: release}
		if err := writeFormat(dir, in); err != nil {
			return err
		}
		d.Migrated = append(d.Migrated, st)
	}
	if in.Release != release {
		return writeFormat(dir, Info{Format: in.Format, Release: release})
	}
	return nil
}

// hasData reports whether dir holds anything an earlier Mother wrote.
func hasData(dir string) bool {
	for _, name := range []string{"workspace", "state", "chicks"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}

// writeFormat records in as dir's format (format 0: no file).
func writeFormat(dir string, in Info) error {
	path := filepath.Join(dir, File)
	if in.Format == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", path, err)
		}
		return fsync.Dir(filepath.Dir(path))
	}
	b, _ := json.Marshal(in)
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write the data directory's format file: %w", err)
	}
	return nil
}

// manifest describes a snapshot: DATA/state/upgrade/<from>-<to>/manifest.json,
// with the files it kept under files/.
type manifest struct {
	// Snapshot is the manifest's own version (1).
	Snapshot    int        `json:"snapshot"`
	From        int        `json:"from"`
	To          int        `json:"to"`
	FromRelease string     `json:"fromRelease"`
	ToRelease   string     `json:"toRelease"`
	Taken       time.Time  `json:"taken"`
	Changes     string     `json:"changes,omitempty"`
	Files       []snapFile `json:"files"`
}

// snapFile is one file as it was before the step.
type snapFile struct {
	Path string `json:"path"`
	// Absent: there was no such file (a rollback removes it).
	Absent  bool        `json:"absent,omitempty"`
	Mode    fs.FileMode `json:"mode,omitempty"`
	ModTime time.Time   `json:"modTime,omitzero"`
}

// snapshot is a snapshot found on disk.
type snapshot struct {
	dir string // its directory
	m   manifest
}

func snapName(from, to int) string { return fmt.Sprintf("%d-%d", from, to) }

// readSnapshot reads the snapshot of the step from→to (false: none).
func readSnapshot(dir string, from, to int) (snapshot, bool, error) {
	sd := filepath.Join(dir, UpgradeDir, snapName(from, to))
	b, err := os.ReadFile(filepath.Join(sd, "manifest.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return snapshot{}, false, nil
	}
	if err != nil {
		return snapshot{}, false, err
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil || m.Snapshot != 1 || m.From != from || m.To != to {
		return snapshot{}, false, fmt.Errorf("the snapshot %s does not read as one of format %d to %d that this release knows", sd, from, to)
	}
	return snapshot{dir: sd, m: m}, true, nil
}

// interrupted is the snapshot of a step from format f whose run did not
// finish (the format file still says f).
func interrupted(dir string, f int) (snapshot, bool) {
	s, ok, err := readSnapshot(dir, f, f+1)
	return s, ok && err == nil
}

// takeSnapshot copies what st changes into state/upgrade/<from>-<to>/,
// built under a temporary name and renamed when whole.
func takeSnapshot(dir string, st Step, fromRelease, toRelease string) error {
	files, err := st.files(dir)
	if err != nil {
		return err
	}
	// The format file too, so a rollback puts it back exactly as it was
	// (or removes it).
	files = append(files[:len(files):len(files)], File)
	up := filepath.Join(dir, UpgradeDir)
	if err := fsync.MkdirAll(up, 0o700); err != nil {
		return err
	}
	final := filepath.Join(up, snapName(st.From, st.To))
	tmp := filepath.Join(up, "."+snapName(st.From, st.To)+".tmp")
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	m := manifest{Snapshot: 1, From: st.From, To: st.To, FromRelease: fromRelease, ToRelease: toRelease, Taken: clock.Real{}.Now().UTC(), Changes: st.Changes}
	for _, rel := range files {
		if err := crash("copy " + rel); err != nil {
			return err
		}
		f, err := copyOut(dir, tmp, rel)
		if err != nil {
			return err
		}
		m.Files = append(m.Files, f)
	}
	if err := fsync.MkdirAll(tmp, 0o700); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := atomicfile.WriteFile(filepath.Join(tmp, "manifest.json"), append(b, '\n'), 0o600); err != nil {
		return err
	}
	if err := crash("snapshot"); err != nil {
		return err
	}
	// A snapshot left by a run that was undone (the format says it was
	// not finished) is replaced.
	if err := os.RemoveAll(final); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	return fsync.Dir(up)
}

// copyOut copies DATA/rel into snap/files/rel, durably.
func copyOut(dir, snap, rel string) (snapFile, error) {
	if !filepath.IsLocal(rel) {
		return snapFile{}, fmt.Errorf("step names %q, not a path inside the data directory", rel)
	}
	src := filepath.Join(dir, rel)
	st, err := os.Lstat(src)
	if errors.Is(err, fs.ErrNotExist) {
		return snapFile{Path: rel, Absent: true}, nil
	}
	if err != nil {
		return snapFile{}, err
	}
	if !st.Mode().IsRegular() {
		return snapFile{}, fmt.Errorf("%s is not a regular file", src)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return snapFile{}, err
	}
	dst := filepath.Join(snap, "files", rel)
	if err := fsync.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return snapFile{}, err
	}
	if err := atomicfile.WriteFile(dst, b, st.Mode().Perm()); err != nil {
		return snapFile{}, err
	}
	return snapFile{Path: rel, Mode: st.Mode().Perm(), ModTime: st.ModTime()}, nil
}

// restore puts the files of snapshot s back as they were and removes it.
// The format file is the caller's: it is set to s's from-format before
// (by a rollback) or already says it (a run that did not finish), so a
// crash in here leaves a snapshot that the next start or rollback
// restores again.
func restore(dir string, s snapshot) error {
	for _, f := range s.m.Files {
		if !filepath.IsLocal(f.Path) {
			return fmt.Errorf("the snapshot %s names %q, not a path inside the data directory", s.dir, f.Path)
		}
		if err := crash("restore " + f.Path); err != nil {
			return err
		}
		dst := filepath.Join(dir, f.Path)
		if f.Absent {
			if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			if err := fsync.Dir(filepath.Dir(dst)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.dir, "files", f.Path))
		if err != nil {
			return fmt.Errorf("the snapshot %s lacks %s: %w", s.dir, f.Path, err)
		}
		if err := fsync.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return err
		}
		if err := atomicfile.WriteFile(dst, b, f.Mode.Perm()); err != nil {
			return err
		}
		if !f.ModTime.IsZero() {
			if err := os.Chtimes(dst, f.ModTime, f.ModTime); err != nil {
				return err
			}
		}
	}
	if err := crash("remove snapshot"); err != nil {
		return err
	}
	// Renamed aside first, so a crash never leaves half a snapshot
	// under its real name.
	gone := filepath.Join(filepath.Dir(s.dir), "."+filepath.Base(s.dir)+".gone")
	if err := os.RemoveAll(gone); err != nil {
		return err
	}
	if err := os.Rename(s.dir, gone); err != nil {
		return err
	}
	if err := fsync.Dir(filepath.Dir(s.dir)); err != nil {
		return err
	}
	return os.RemoveAll(gone)
}
