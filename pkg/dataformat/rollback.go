package dataformat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ErrCannot is the kind of the error Rollback returns when it cannot roll
// back (a snapshot missing, Mother running): nothing was changed.
var ErrCannot = errors.New("cannot roll back")

type cannotError struct{ msg string }

func (e *cannotError) Error() string        { return e.msg }
func (e *cannotError) Is(target error) bool { return target == ErrCannot }

func cannot(format string, args ...any) error {
	return &cannotError{msg: fmt.Sprintf(format, args...)}
}

// Rollback puts dir back into the format that release to reads,
// restoring the snapshots newest first, and says what it did in a
// sentence. this is the running release. When it cannot (a snapshot
// missing or unreadable, a Mother running on dir) it changes nothing and
// the error (ErrCannot) says why.
func Rollback(dir, to, this string) (string, error) {
	target, err := FormatOf(to, this)
	if err != nil {
		return "", err
	}
	abs := absDir(dir)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", cannot("%s is not a data directory", abs)
	}
	in, err := Read(dir)
	if err != nil {
		return "", err
	}
	// The plan, checked whole before anything changes: the snapshot of
	// every step down to the target, and one of a run that did not
	// finish from the current format.
	var plan []snapshot
	if s, ok := interrupted(dir, in.Format); ok {
		plan = append(plan, s)
	}
	for f := in.Format; f > target; f-- {
		s, ok, err := readSnapshot(dir, f-1, f)
		if err != nil {
			return "", cannot("cannot roll back %s: %v; restore it from a backup taken before the upgrade", abs, err)
		}
		if !ok {
			// A step that changes no file needs no snapshot (a
			// directory made by this release, which never migrated).
			st, known := stepFrom(f - 1)
			if files, ferr := st.files(dir); !known || ferr != nil || len(files) > 0 {
				return "", cannot("cannot roll back %s to Mother %s: the snapshot of the migration from format %d to %d (%s) is missing, so the files it changed cannot be put back; nothing was changed; restore the directory from a backup taken before the upgrade", abs, to, f-1, f, filepath.Join(abs, UpgradeDir, snapName(f-1, f)))
			}
			s = snapshot{m: manifest{From: f - 1, To: f, FromRelease: firstRelease(f - 1)}}
		}
		plan = append(plan, s)
	}
	if len(plan) == 0 {
		return fmt.Sprintf("nothing to roll back: %s is format %d, which Mother %s reads", abs, in.Format, to), nil
	}
	release, err := takeAlone(dir)
	if err != nil {
		return "", err
	}
	defer release()
	var done []string
	for _, s := range plan {
		// The format first: a crash after it leaves the snapshot, which
		// the next start (or a rollback run again) restores.
		back := Info{Format: s.m.From, Release: s.m.FromRelease}
		if back.Format == 0 {
			back.Release = ""
		}
		if err := crash("format"); err != nil {
			return "", err
		}
		if err := writeFormat(dir, back); err != nil {
			return "", err
		}
		restored := fileList(s.m.Files)
		if s.dir != "" {
			if err := restore(dir, s); err != nil {
				return "", fmt.Errorf("roll back %s from format %d to %d: %w; run the rollback again", abs, s.m.To, s.m.From, err)
			}
		}
		switch restored {
		case "":
			done = append(done, fmt.Sprintf("format %d to %d (no file to restore)", s.m.To, s.m.From))
		default:
			done = append(done, fmt.Sprintf("format %d to %d (restored %s)", s.m.To, s.m.From, restored))
		}
	}
	// No snapshot left: the directory goes as the older release had it.
	_ = os.Remove(filepath.Join(dir, UpgradeDir))
	what := "state/format.json says format " + fmt.Sprint(target)
	if target == 0 {
		what = "state/format.json removed"
	}
	return fmt.Sprintf("rolled %s back for Mother %s: %s; %s. Data written since the upgrade to the restored files is not kept.", abs, to, strings.Join(done, ", then "), what), nil
}

// fileList names the files of a snapshot for a sentence, but for the
// format file, which every snapshot holds.
func fileList(fs []snapFile) string {
	var names []string
	for _, f := range fs {
		if f.Path != File {
			names = append(names, f.Path)
		}
	}
	return strings.Join(names, ", ")
}

// takeAlone makes sure no Mother runs on dir, and holds it until release
// is called: the lock every Mother of 0.2 or later holds, and the admin
// socket, which a Mother of any release answers on.
func takeAlone(dir string) (release func(), err error) {
	abs := absDir(dir)
	if sock := adminSocket(dir); sock != "" {
		c, err := net.DialTimeout("unix", sock, 2*time.Second)
		if err == nil {
			c.Close()
			return nil, cannot("Mother is running on %s (her admin socket %s answers); stop her first (systemctl stop mother), then roll back", abs, sock)
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return func() {}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open the data directory's lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil && !noLocks(err) {
		f.Close()
		return nil, cannot("Mother is running on %s (she holds %s); stop her first (systemctl stop mother), then roll back", abs, filepath.Join(abs, lockFile))
	}
	return func() { f.Close() }, nil
}

// adminSocket is the admin socket's path as config.json sets it
// (admin.socket, relative to dir), else dir/mother.sock. config.json is
// read loosely: it may be a newer release's.
func adminSocket(dir string) string {
	var c struct {
		Admin struct {
			Socket string `json:"socket"`
		} `json:"admin"`
	}
	sock := "mother.sock"
	if b, err := os.ReadFile(filepath.Join(dir, "config.json")); err == nil && json.Unmarshal(b, &c) == nil && c.Admin.Socket != "" {
		sock = c.Admin.Socket
	}
	if !filepath.IsAbs(sock) {
		sock = filepath.Join(dir, sock)
	}
	return sock
}
