package powercut

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/mother-chat/mother/internal/testenv"
)

// Available says why FUSE cannot be mounted here, or nil: it needs
// /dev/fuse, and root or fusermount3 (or fusermount).
func Available() error {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("no /dev/fuse: %w", err)
	}
	if os.Getuid() == 0 {
		return nil
	}
	for _, bin := range []string{"fusermount3", "fusermount"} {
		if _, err := exec.LookPath(bin); err == nil {
			return nil
		}
	}
	return errors.New("not root, and no fusermount3 to mount FUSE (apt-get install fuse3)")
}

// MountT mounts a power-cut filesystem for t over a new empty directory,
// backed by backing (a new empty directory when ""), and unmounts it when
// t ends, cut or not. Without FUSE it ends t through
// testenv.Unavailable: a skip, or a failure under CI=true.
func MountT(t testing.TB, backing string, opts Options) *FS {
	t.Helper()
	if err := Available(); err != nil {
		testenv.Unavailable(t, "powercut needs FUSE: %v", err)
	}
	if backing == "" {
		backing = t.TempDir()
	}
	mp := t.TempDir()
	var logMu sync.Mutex
	ended := false
	if opts.Logf == nil {
		// Not after t ends: a lazily unmounted filesystem may still
		// answer a process that held a file open.
		opts.Logf = func(format string, args ...any) {
			logMu.Lock()
			defer logMu.Unlock()
			if !ended {
				t.Logf(format, args...)
			}
		}
	}
	pc, err := Mount(mp, backing, opts)
	if err != nil {
		testenv.Unavailable(t, "powercut cannot mount FUSE here: %v", err)
	}
	t.Cleanup(func() {
		if err := pc.Unmount(); err != nil {
			t.Errorf("unmount %s: %v", mp, err)
		}
		logMu.Lock()
		ended = true
		logMu.Unlock()
	})
	return pc
}

// RemountT is Remount for a test: the new mount is unmounted when t ends.
func (pc *FS) RemountT(t testing.TB) *FS {
	t.Helper()
	next, err := pc.Remount()
	if err != nil {
		t.Fatalf("remount: %v", err)
	}
	t.Cleanup(func() {
		if err := next.Unmount(); err != nil {
			t.Errorf("unmount %s: %v", next.mountpoint, err)
		}
	})
	return next
}
