package nest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/mother-chat/mother/pkg/fsync"
)

// ListenUnix listens on a unix socket with mode 0600. A stale socket file
// is replaced; a live one (another Mother) is an error.
func ListenUnix(path string) (net.Listener, error) {
	if err := fsync.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	if _, err := os.Lstat(path); err == nil {
		if c, derr := net.DialTimeout("unix", path, time.Second); derr == nil {
			c.Close()
			return nil, fmt.Errorf("admin socket %s: another Mother is listening there", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("admin socket: remove stale %s: %w", path, err)
		}
	}
	// Bind in a private directory, set the mode, then move the socket into
	// place: no moment where others could connect, and no process-wide
	// umask games.
	tmp, err := os.MkdirTemp(filepath.Dir(path), ".s")
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	defer os.RemoveAll(tmp)
	lis, err := net.Listen("unix", filepath.Join(tmp, "s"))
	if err != nil {
		if len(tmp) > 100 {
			return nil, fmt.Errorf("admin socket %s: the path is too long for a unix socket (about 100 bytes at most): set admin.socket to a shorter path (%w)", path, err)
		}
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	ul := lis.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	if err := os.Chmod(filepath.Join(tmp, "s"), 0o600); err != nil {
		lis.Close()
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	if err := os.Rename(filepath.Join(tmp, "s"), path); err != nil {
		lis.Close()
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	return &unixListener{UnixListener: ul, path: path}, nil
}

// unixListener removes its socket file on Close.
type unixListener struct {
	*net.UnixListener
	path string
	once sync.Once
}

func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() { os.Remove(l.path) })
	return err
}
