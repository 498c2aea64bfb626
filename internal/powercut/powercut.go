package powercut

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Options choose the crash model and its randomness.
type Options struct {
	// SyncPersistsPath makes an fsync of a file or directory also make
	// durable the entries that name it and its ancestors (new names
	// added, removed ones dropped), as ext4, XFS and btrfs do in
	// practice through their journal. Off (the default) is the POSIX
	// model: only an fsync of a directory makes its entries durable.
	SyncPersistsPath bool
	// Unsynced says what a cut keeps of each file's writes and
	// truncations since its last fsync: none (the default), a random
	// prefix of them (KeepPrefix), or a random subset (KeepSubset).
	// Directory entries are never kept: an unsynced entry is always lost.
	Unsynced Unsynced
	// Seed seeds the cut's random choices; the same seed and the same
	// operations give the same cut.
	Seed uint64
	// BlockWhenFrozen makes operations on a frozen filesystem wait until
	// their process is killed (they then fail with EINTR) or the
	// filesystem is cut or unmounted (EIO), as a machine without power
	// does nothing more. Off (the default), they fail at once with EIO.
	BlockWhenFrozen bool
	// Logf, when set, receives a line for each fsync, freeze and cut
	// decision (t.Logf).
	Logf func(format string, args ...any)
}

// Unsynced is what a cut keeps of a file's unsynced writes and
// truncations, as the page cache may have written some of them back before
// the power failed. Each file is decided on its own.
type Unsynced int

const (
	// DropUnsynced keeps none of them: the file is as at its last fsync.
	DropUnsynced Unsynced = iota
	// KeepPrefix keeps a random prefix of them, in order, and of the
	// first one not kept, if a write, a random leading part (a torn
	// write, cut at any byte). It catches a reader that trusts a last
	// record which was never fsynced, or an append assumed atomic.
	KeepPrefix
	// KeepSubset keeps a random subset of them, applied in order: a later
	// write may land without an earlier one, and an append that did not
	// land before one that did leaves zeros (what delayed allocation on
	// ext4 may leave). It catches a reader that assumes unsynced data
	// reaches the disk in order (LazyFS's torn-seq fault).
	KeepSubset
)

func (u Unsynced) String() string {
	switch u {
	case DropUnsynced:
		return "drop"
	case KeepPrefix:
		return "prefix"
	case KeepSubset:
		return "subset"
	}
	return fmt.Sprintf("Unsynced(%d)", int(u))
}

// Sync is one fsync(2) or fdatasync(2) the filesystem received.
type Sync struct {
	N        int    // 1 for the first since mount
	Op       int    // its number among the operations (Ops, Crash.Op)
	Path     string // relative to the mount
	Dir      bool   // a directory's fsync
	Datasync bool   // fdatasync (treated as fsync)
	Err      error  // an injected fault, or nil
}

func (s Sync) String() string {
	what := "file"
	if s.Dir {
		what = "dir"
	}
	out := fmt.Sprintf("fsync #%d %s %s", s.N, what, s.Path)
	if s.Err != nil {
		out += ": " + s.Err.Error()
	}
	return out
}

// Crash says where the power fails on its own.
type Crash struct {
	// Sync, when > 0, fails the power at the Sync-th fsync (of a file or
	// a directory) whose path matches Path (every fsync when Path is
	// nil), counting from 1.
	Sync int
	Path *regexp.Regexp
	// After makes that fsync complete (its file or directory durable)
	// before the power fails; otherwise it makes nothing durable.
	// Either way it does not return success: the filesystem freezes.
	After bool
	// Op, when > 0, fails the power just before the Op-th operation
	// that changes something (write, truncate, create, mkdir, mknod,
	// symlink, link, unlink, rmdir, rename, fsync, ...; Ops counts
	// them), for a cut at any point between two fsyncs: a dry run's
	// Syncs give each fsync's Op, and a random number between two of
	// them is a random point between those fsyncs.
	Op int
}

// Fault makes matching operations fail.
type Fault struct {
	Write bool           // writes and truncations
	Sync  bool           // fsyncs of files and directories
	Path  *regexp.Regexp // only these paths (relative to the mount); nil: all
	Err   syscall.Errno  // default EIO
	Times int            // fail this many times, then no more; 0: always
}

// FS is a mounted power-cut filesystem.
type FS struct {
	opts       Options
	backing    string
	mountpoint string
	server     *fuse.Server

	mu      sync.Mutex
	root    *node
	nextID  uint64
	orphans map[*node]struct{}
	rng     *rand.Rand

	frozen   bool
	frozenCh chan struct{} // closed when frozen
	released chan struct{} // closed at a cut or unmount: blocked operations end
	done     bool          // cut or unmounted

	ops       int
	syncs     []Sync
	crash     Crash
	crashSeen int
	faults    []*Fault
	space     int64 // bytes writes may still add; < 0: no limit
	frozenWhy string
	waiting   atomic.Int32
}

// Mount mounts a power-cut filesystem at mountpoint (an empty directory),
// backed by the directory backing, whose present content counts as
// durable. Neither may be inside the other. It needs /dev/fuse and root
// (or fusermount3).
func Mount(mountpoint, backing string, opts Options) (*FS, error) {
	mp, err := filepath.Abs(mountpoint)
	if err != nil {
		return nil, err
	}
	bk, err := filepath.Abs(backing)
	if err != nil {
		return nil, err
	}
	if within(mp, bk) || within(bk, mp) {
		return nil, fmt.Errorf("powercut: mount point %s and backing directory %s overlap", mp, bk)
	}
	pc := &FS{
		opts:       opts,
		backing:    bk,
		mountpoint: mp,
		nextID:     rootID + 1,
		orphans:    map[*node]struct{}{},
		rng:        rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		frozenCh:   make(chan struct{}),
		released:   make(chan struct{}),
		space:      -1,
	}
	if err := pc.scan(); err != nil {
		return nil, err
	}
	timeout := time.Second
	server, err := fs.Mount(mp, &fnode{pc: pc, n: pc.root}, &fs.Options{
		MountOptions: fuse.MountOptions{
			DirectMount:   true,
			FsName:        bk,
			Name:          "powercut",
			DisableXAttrs: true,
			AllowOther:    true,
			Options:       []string{"default_permissions"},
		},
		EntryTimeout:   &timeout,
		AttrTimeout:    &timeout,
		RootStableAttr: &fs.StableAttr{Ino: rootID},
	})
	if err != nil {
		pc.closeOrphans()
		return nil, fmt.Errorf("powercut: mount %s: %w", mp, err)
	}
	pc.server = server
	return pc, nil
}

func within(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+string(filepath.Separator))
}

// Mountpoint is where the filesystem is mounted.
func (pc *FS) Mountpoint() string { return pc.mountpoint }

// Backing is the backing directory: after Cut it holds the durable state.
func (pc *FS) Backing() string { return pc.backing }

// Options are the options the filesystem was mounted with.
func (pc *FS) Options() Options { return pc.opts }

// Remount mounts the same backing directory at the same place again, with
// the same options, once this filesystem is cut or unmounted.
func (pc *FS) Remount() (*FS, error) {
	pc.mu.Lock()
	done := pc.done
	pc.mu.Unlock()
	if !done {
		return nil, errors.New("powercut: remount before cut or unmount")
	}
	return Mount(pc.mountpoint, pc.backing, pc.opts)
}

func (pc *FS) logf(format string, args ...any) {
	if pc.opts.Logf != nil {
		pc.opts.Logf("powercut: "+format, args...)
	}
}

// Syncs lists the fsyncs received so far, in order.
func (pc *FS) Syncs() []Sync {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return append([]Sync(nil), pc.syncs...)
}

// Ops is the number of operations that changed something (or tried to)
// so far: the scale of Crash.Op.
func (pc *FS) Ops() int {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.ops
}

// CrashAt arms a crash point, replacing any earlier one. The counts start
// from the operations made after it.
func (pc *FS) CrashAt(c Crash) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.crash = c
	pc.crashSeen = 0
	if c.Op > 0 {
		pc.crash.Op = pc.ops + c.Op
	}
}

// Inject adds a fault.
func (pc *FS) Inject(f Fault) {
	if f.Err == 0 {
		f.Err = syscall.EIO
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.faults = append(pc.faults, &f)
}

// ClearFaults removes every fault and the space limit.
func (pc *FS) ClearFaults() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.faults = nil
	pc.space = -1
}

// LimitSpace lets writes add at most n more bytes in all (every byte a
// write passes counts, overwrites too): a write that does not fit writes
// what does and returns short, and the next fails with ENOSPC, as on a
// full disk. A negative n removes the limit.
func (pc *FS) LimitSpace(n int64) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.space = n
}

// Freeze fails the power now: nothing more becomes durable, and every
// operation fails (or blocks, Options.BlockWhenFrozen). The test then
// kills the processes using the mount and calls Cut.
func (pc *FS) Freeze() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.freezeLocked("Freeze called")
}

// Frozen is closed once the filesystem is frozen (by Freeze, a crash
// point, Cut or Unmount).
func (pc *FS) Frozen() <-chan struct{} { return pc.frozenCh }

// FrozenBy says what froze the filesystem ("" while it is not).
func (pc *FS) FrozenBy() string {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.frozenWhy
}

func (pc *FS) freezeLocked(why string) {
	if pc.frozen {
		return
	}
	pc.frozen = true
	pc.frozenWhy = why
	close(pc.frozenCh)
	pc.logf("power cut: %s (after %d operations, %d fsyncs)", why, pc.ops, len(pc.syncs))
}

// Cut is the power cut: it freezes the filesystem if it is not frozen
// yet, unmounts it (lazily if a process still holds a file open), and
// turns the backing directory into the durable state: every file with
// its content at its last fsync (Options.Unsynced: plus some of what
// followed), every directory with its entries at its last fsync.
// The filesystem cannot be used again; Remount mounts the result.
func (pc *FS) Cut() error {
	pc.mu.Lock()
	if pc.done {
		pc.mu.Unlock()
		return errors.New("powercut: already cut or unmounted")
	}
	pc.freezeLocked("Cut called")
	pc.done = true
	close(pc.released)
	pc.mu.Unlock()

	uerr := pc.unmount()

	pc.mu.Lock()
	defer pc.mu.Unlock()
	err := pc.restore()
	pc.closeOrphans()
	return errors.Join(err, uerr)
}

// Unmount unmounts the filesystem without a cut: the backing directory
// keeps everything written, as after a clean shutdown. It does nothing
// once the filesystem is cut or unmounted.
func (pc *FS) Unmount() error {
	pc.mu.Lock()
	if pc.done {
		pc.mu.Unlock()
		return nil
	}
	pc.freezeLocked("Unmount called")
	pc.done = true
	close(pc.released)
	pc.mu.Unlock()
	err := pc.unmount()
	pc.mu.Lock()
	pc.closeOrphans()
	pc.mu.Unlock()
	return err
}

// unmount unmounts, lazily (MNT_DETACH) when a process still holds a file
// open: the serve loop then ends when the last one is closed.
func (pc *FS) unmount() error {
	err := syscall.Unmount(pc.mountpoint, 0)
	switch {
	case err == nil:
		pc.server.Wait()
		return nil
	case errors.Is(err, syscall.EBUSY):
		if derr := syscall.Unmount(pc.mountpoint, syscall.MNT_DETACH); derr != nil {
			return fmt.Errorf("powercut: unmount %s: %w (lazily: %v)", pc.mountpoint, err, derr)
		}
		pc.logf("unmounted %s lazily: a file is still open on it", pc.mountpoint)
		return nil
	}
	// Not root: mounted through fusermount, unmounted through it.
	return pc.server.Unmount()
}

func (pc *FS) closeOrphans() {
	for n := range pc.orphans {
		n.orphan.Close()
		n.orphan = nil
	}
	pc.orphans = map[*node]struct{}{}
}

// enter starts an operation: it fails it if the filesystem is frozen,
// counts it if it changes something (freezing at Crash.Op), and returns
// with pc.mu held when it may go on.
func (pc *FS) enter(ctx context.Context, mutating bool) syscall.Errno {
	pc.mu.Lock()
	if !pc.frozen && mutating {
		pc.ops++
		if pc.crash.Op > 0 && pc.ops == pc.crash.Op {
			pc.freezeLocked(fmt.Sprintf("crash point: before operation %d", pc.ops))
		}
	}
	if pc.frozen {
		pc.mu.Unlock()
		return pc.frozenErr(ctx)
	}
	return 0
}

// frozenErr is what an operation on the frozen filesystem gets; called
// without pc.mu.
func (pc *FS) frozenErr(ctx context.Context) syscall.Errno {
	if !pc.opts.BlockWhenFrozen {
		return syscall.EIO
	}
	pc.waiting.Add(1)
	defer pc.waiting.Add(-1)
	select {
	case <-ctx.Done():
		return syscall.EINTR
	case <-pc.released:
		return syscall.EIO
	}
}

// Waiting is the number of operations the frozen filesystem holds now
// (Options.BlockWhenFrozen).
func (pc *FS) Waiting() int { return int(pc.waiting.Load()) }

// fault returns the injected error for an operation on n, if any.
func (pc *FS) fault(n *node, write bool) syscall.Errno {
	if len(pc.faults) == 0 {
		return 0
	}
	p := n.name()
	for i, f := range pc.faults {
		if (write && !f.Write) || (!write && !f.Sync) {
			continue
		}
		if f.Path != nil && !f.Path.MatchString(p) {
			continue
		}
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				pc.faults = append(pc.faults[:i:i], pc.faults[i+1:]...)
			}
		}
		return f.Err
	}
	return 0
}

func (pc *FS) abs(n *node) (string, bool) {
	r, ok := n.rel()
	if !ok {
		return "", false
	}
	return filepath.Join(pc.backing, r), true
}
