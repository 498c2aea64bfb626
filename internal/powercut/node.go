package powercut

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// fnode is the go-fuse side of a node. A new one is made for each lookup;
// go-fuse keeps the first it saw for an inode number.
type fnode struct {
	fs.Inode
	pc *FS
	n  *node
}

var (
	_ fs.NodeStatfser    = (*fnode)(nil)
	_ fs.NodeLookuper    = (*fnode)(nil)
	_ fs.NodeGetattrer   = (*fnode)(nil)
	_ fs.NodeSetattrer   = (*fnode)(nil)
	_ fs.NodeOpener      = (*fnode)(nil)
	_ fs.NodeCreater     = (*fnode)(nil)
	_ fs.NodeMkdirer     = (*fnode)(nil)
	_ fs.NodeMknoder     = (*fnode)(nil)
	_ fs.NodeSymlinker   = (*fnode)(nil)
	_ fs.NodeLinker      = (*fnode)(nil)
	_ fs.NodeUnlinker    = (*fnode)(nil)
	_ fs.NodeRmdirer     = (*fnode)(nil)
	_ fs.NodeRenamer     = (*fnode)(nil)
	_ fs.NodeReadlinker  = (*fnode)(nil)
	_ fs.NodeReaddirer   = (*fnode)(nil)
	_ fs.NodeFsyncer     = (*fnode)(nil)
	_ fs.NodeAllocater   = (*fnode)(nil)
	_ fs.FileReader      = (*handle)(nil)
	_ fs.FileWriter      = (*handle)(nil)
	_ fs.FileReleaser    = (*handle)(nil)
	_ fs.FileGetattrer   = (*handle)(nil)
	_ fs.NodeOnForgetter = (*fnode)(nil)
)

// handle is an open regular file: a descriptor on the backing file, open
// for reading and writing whenever the caller may write (the durable
// bytes a write replaces are read through it first).
type handle struct {
	pc *FS
	n  *node
	f  *os.File
}

func stable(c *node) fs.StableAttr {
	return fs.StableAttr{Mode: c.kind(), Ino: c.id}
}

func (f *fnode) child(ctx context.Context, c *node) *fs.Inode {
	return f.NewInode(ctx, &fnode{pc: f.pc, n: c}, stable(c))
}

func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	return fs.ToErrno(err)
}

// OnForget does nothing: the model outlives go-fuse's inodes.
func (f *fnode) OnForget() {}

func (f *fnode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	pc := f.pc
	if e := pc.enter(ctx, false); e != 0 {
		return e
	}
	defer pc.mu.Unlock()
	var s syscall.Statfs_t
	if err := syscall.Statfs(pc.backing, &s); err != nil {
		return errno(err)
	}
	out.FromStatfsT(&s)
	return 0
}

func (f *fnode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	pc := f.pc
	if e := pc.enter(ctx, false); e != 0 {
		return nil, e
	}
	defer pc.mu.Unlock()
	c := f.n.children[name]
	if c == nil {
		return nil, syscall.ENOENT
	}
	abs, ok := pc.abs(c)
	if !ok {
		return nil, syscall.ENOENT
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(abs, &st); err != nil {
		return nil, errno(err)
	}
	out.Attr.FromStat(&st)
	return f.child(ctx, c), 0
}

// stat fills st for n: through the open handle, the live path, or the
// descriptor kept for a removed file.
func (pc *FS) stat(n *node, fh fs.FileHandle, st *syscall.Stat_t) syscall.Errno {
	if h, ok := fh.(*handle); ok && h != nil {
		return errno(syscall.Fstat(int(h.f.Fd()), st))
	}
	if abs, ok := pc.abs(n); ok {
		return errno(syscall.Lstat(abs, st))
	}
	if n.orphan != nil {
		return errno(syscall.Fstat(int(n.orphan.Fd()), st))
	}
	return syscall.ENOENT
}

func (f *fnode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	pc := f.pc
	if e := pc.enter(ctx, false); e != 0 {
		return e
	}
	defer pc.mu.Unlock()
	var st syscall.Stat_t
	if e := pc.stat(f.n, fh, &st); e != 0 {
		return e
	}
	out.FromStat(&st)
	return 0
}

func (h *handle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	pc := h.pc
	if e := pc.enter(ctx, false); e != 0 {
		return e
	}
	defer pc.mu.Unlock()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(h.f.Fd()), &st); err != nil {
		return errno(err)
	}
	out.FromStat(&st)
	return 0
}

func (f *fnode) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	pc := f.pc
	if e := pc.enter(ctx, true); e != 0 {
		return e
	}
	defer pc.mu.Unlock()
	n := f.n
	h, _ := fh.(*handle)
	abs, live := pc.abs(n)
	if size, ok := in.GetSize(); ok {
		if e := pc.fault(n, true); e != 0 {
			return e
		}
		if h != nil {
			if e := pc.truncate(n, h.f, int64(size)); e != 0 {
				return e
			}
		} else if live {
			file, err := os.OpenFile(abs, os.O_RDWR|syscall.O_NOFOLLOW, 0)
			if err != nil {
				return errno(err)
			}
			e := pc.truncate(n, file, int64(size))
			file.Close()
			if e != 0 {
				return e
			}
		} else {
			return syscall.ENOENT
		}
	}
	if mode, ok := in.GetMode(); ok {
		var err error
		if h != nil {
			err = h.f.Chmod(os.FileMode(mode))
		} else if live {
			err = syscall.Chmod(abs, mode)
		}
		if err != nil {
			return errno(err)
		}
	}
	uid, uok := in.GetUID()
	gid, gok := in.GetGID()
	if uok || gok {
		u, g := -1, -1
		if uok {
			u = int(uid)
		}
		if gok {
			g = int(gid)
		}
		var err error
		if h != nil {
			err = h.f.Chown(u, g)
		} else if live {
			err = os.Lchown(abs, u, g)
		}
		if err != nil {
			return errno(err)
		}
	}
	if in.Valid&(fuse.FATTR_ATIME|fuse.FATTR_MTIME) != 0 && live {
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		if in.Valid&fuse.FATTR_ATIME != 0 {
			ts[0] = unix.Timespec{Sec: int64(in.Atime), Nsec: int64(in.Atimensec)}
			if in.Valid&fuse.FATTR_ATIME_NOW != 0 {
				ts[0] = unix.Timespec{Nsec: unix.UTIME_NOW}
			}
		}
		if in.Valid&fuse.FATTR_MTIME != 0 {
			ts[1] = unix.Timespec{Sec: int64(in.Mtime), Nsec: int64(in.Mtimensec)}
			if in.Valid&fuse.FATTR_MTIME_NOW != 0 {
				ts[1] = unix.Timespec{Nsec: unix.UTIME_NOW}
			}
		}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, abs, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return errno(err)
		}
	}
	var st syscall.Stat_t
	if e := pc.stat(n, fh, &st); e != 0 {
		return e
	}
	n.mode, n.uid, n.gid = st.Mode, st.Uid, st.Gid
	out.FromStat(&st)
	return 0
}

// truncate sets n's size through file, saving the durable bytes it drops.
func (pc *FS) truncate(n *node, file *os.File, size int64) syscall.Errno {
	if err := n.save(file, size, n.durSize); err != nil {
		pc.logf("%s: %v", n.name(), err)
		return syscall.EIO
	}
	if err := file.Truncate(size); err != nil {
		return errno(err)
	}
	if pc.opts.Unsynced != DropUnsynced {
		n.unsynced = append(n.unsynced, fileOp{trunc: true, size: size})
	}
	return 0
}

// backingFlags are the open flags for the backing file: its access mode
// (write-only becomes read-write), never appending (the kernel sends each
// write's offset), truncating, synchronous or direct (the mount does
// those itself), nor following a symlink.
func backingFlags(flags uint32) int {
	acc := int(flags) & syscall.O_ACCMODE
	if acc == syscall.O_WRONLY {
		acc = syscall.O_RDWR
	}
	return acc | syscall.O_NOFOLLOW
}

func (f *fnode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	pc := f.pc
	trunc := flags&syscall.O_TRUNC != 0 && int(flags)&syscall.O_ACCMODE != syscall.O_RDONLY
	if e := pc.enter(ctx, trunc); e != 0 {
		return nil, 0, e
	}
	defer pc.mu.Unlock()
	n := f.n
	abs, ok := pc.abs(n)
	if !ok {
		return nil, 0, syscall.ENOENT
	}
	if trunc {
		if e := pc.fault(n, true); e != 0 {
			return nil, 0, e
		}
	}
	file, err := os.OpenFile(abs, backingFlags(flags), 0)
	if err != nil {
		return nil, 0, errno(err)
	}
	if trunc {
		if e := pc.truncate(n, file, 0); e != 0 {
			file.Close()
			return nil, 0, e
		}
	}
	return &handle{pc: pc, n: n, f: file}, 0, 0
}

// own gives a new entry to the caller, as the kernel would.
func own(ctx context.Context, abs string) {
	if os.Getuid() != 0 {
		return
	}
	if c, ok := fuse.FromContext(ctx); ok {
		_ = os.Lchown(abs, int(c.Uid), int(c.Gid))
	}
}

func (pc *FS) newChild(dir *node, name string, st *syscall.Stat_t) *node {
	c := newNode(pc.nextID, st.Mode)
	pc.nextID++
	c.rdev, c.uid, c.gid = st.Rdev, st.Uid, st.Gid
	pc.addLive(dir, name, c)
	return c
}

func (f *fnode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	pc := f.pc
	if e := pc.enter(ctx, true); e != 0 {
		return nil, nil, 0, e
	}
	defer pc.mu.Unlock()
	d := f.n
	if d.children[name] != nil {
		return nil, nil, 0, syscall.EEXIST
	}
	dabs, ok := pc.abs(d)
	if !ok {
		return nil, nil, 0, syscall.ENOENT
	}
	abs := filepath.Join(dabs, name)
	file, err := os.OpenFile(abs, backingFlags(flags)|os.O_CREATE|os.O_EXCL, os.FileMode(mode&0o777))
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	own(ctx, abs)
	var st syscall.Stat_t
	err = file.Chmod(os.FileMode(mode & 0o7777))
	if err == nil {
		err = syscall.Fstat(int(file.Fd()), &st)
	}
	if err != nil {
		file.Close()
		os.Remove(abs)
		return nil, nil, 0, errno(err)
	}
	c := pc.newChild(d, name, &st)
	out.Attr.FromStat(&st)
	return f.child(ctx, c), &handle{pc: pc, n: c, f: file}, 0, 0
}

// made finishes a mkdir, mknod or symlink at abs: chmod (unless a
// symlink), ownership, the model, the entry out.
func (f *fnode) made(ctx context.Context, name, abs string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	pc := f.pc
	own(ctx, abs)
	var st syscall.Stat_t
	if err := syscall.Lstat(abs, &st); err != nil {
		return nil, errno(err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		if err := syscall.Chmod(abs, mode&0o7777); err != nil {
			return nil, errno(err)
		}
		if err := syscall.Lstat(abs, &st); err != nil {
			return nil, errno(err)
		}
	}
	c := pc.newChild(f.n, name, &st)
	out.Attr.FromStat(&st)
	return f.child(ctx, c), 0
}

// entryPath is the backing path for a new entry name in f, if the name is
// free.
func (f *fnode) entryPath(name string) (string, syscall.Errno) {
	if f.n.children[name] != nil {
		return "", syscall.EEXIST
	}
	dabs, ok := f.pc.abs(f.n)
	if !ok {
		return "", syscall.ENOENT
	}
	return filepath.Join(dabs, name), 0
}

func (f *fnode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	pc := f.pc
	if e := pc.enter(ctx, true); e != 0 {
		return nil, e
	}
	defer pc.mu.Unlock()
	abs, e := f.entryPath(name)
	if e != 0 {
		return nil, e
	}
	if err := syscall.Mkdir(abs, 0o700); err != nil {
		return nil, errno(err)
	}
	return f.made(ctx, name, abs, mode, out)
}

func (f *fnode) Mknod(ctx context.Context, name string, mode, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	pc := f.pc
	if e := pc.enter(ctx, true); e != 0 {
		return nil, e
	}
	defer pc.mu.Unlock()
	abs, e := f.entryPath(name)
	if e != 0 {
		return nil, e
	}
	if err := unix.Mknod(abs, mode, int(dev)); err != nil {
		return nil, errno(err)
	}
	return f.made(ctx, name, abs, mode, out)
}

func (f *fnode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	pc := f.pc
	if e := pc.enter(ctx, true); e != 0 {
		return nil, e
	}
	defer pc.mu.Unlock()
	abs, e := f.entryPath(name)
	if e != 0 {
		return nil, e
	}
	if err := syscall.Symlink(target, abs); err != nil {
		return nil, errno(err)
	}
	ch, e := f.made(ctx, name, abs, 0, out)
	if e == 0 {
		f.n.children[name].target = target
	}
	return ch, e
}

func (f *fnode) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	pc := f.pc
	if e := pc.enter(ctx, true); e != 0 {
		return nil, e
	}
	defer pc.mu.Unlock()
	tf, ok := target.(*fnode)
	if !ok || tf.pc != pc {
		return nil, syscall.EXDEV
	}
	abs, e := f.entryPath(name)
	if e != 0 {
		return nil, e
	}
	src, ok := pc.abs(tf.n)
	if !ok {
		return nil, syscall.ENOENT
	}
	if err := syscall.Link(src, abs); err != nil {
		return nil, errno(err)
	}
	pc.addLive(f.n, name, tf.n)
	var st syscall.Stat_t
	if err := syscall.Lstat(abs, &st); err != nil {
		return nil, errno(err)
	}
	out.Attr.FromStat(&st)
	return f.child(ctx, tf.n), 0
}

func (f *fnode) Unlink(ctx context.Context, name string) syscall.Errno {
	pc := f.pc
	if e := pc.enter(ctx, true); e != 0 {
		return e
	}
	defer pc.mu.Unlock()
	c := f.n.children[name]
	if c == nil {
		return syscall.ENOENT
	}
	if c.isDir() {
		return syscall.EISDIR
	}
	dabs, ok := pc.abs(f.n)
	if !ok {
		return syscall.ENOENT
	}
	abs := filepath.Join(dabs, name)
	if err := pc.beforeLastUnlink(c, abs); err != nil {
		pc.logf("%v", err)
		return syscall.EIO
	}
	if err := syscall.Unlink(abs); err != nil {
		return errno(err)
	}
	pc.removeLive(f.n, name)
	return 0
}

func (f *fnode) Rmdir(ctx context.Context, name string) syscall.Errno {
	pc := f.pc
	if e := pc.enter(ctx, true); e != 0 {
		return e
	}
	defer pc.mu.Unlock()
	c := f.n.children[name]
	if c == nil {
		return syscall.ENOENT
	}
	if !c.isDir() {
		return syscall.ENOTDIR
	}
	abs, ok := pc.abs(c)
	if !ok {
		return syscall.ENOENT
	}
	if err := syscall.Rmdir(abs); err != nil {
		return errno(err)
	}
	pc.removeLive(f.n, name)
	return 0
}

func (f *fnode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	pc := f.pc
	if e := pc.enter(ctx, true); e != 0 {
		return e
	}
	defer pc.mu.Unlock()
	np, ok := newParent.(*fnode)
	if !ok || np.pc != pc {
		return syscall.EXDEV
	}
	d, nd := f.n, np.n
	s := d.children[name]
	if s == nil {
		return syscall.ENOENT
	}
	t := nd.children[newName]
	dabs, ok1 := pc.abs(d)
	ndabs, ok2 := pc.abs(nd)
	if !ok1 || !ok2 {
		return syscall.ENOENT
	}
	src, dst := filepath.Join(dabs, name), filepath.Join(ndabs, newName)
	exchange := flags&unix.RENAME_EXCHANGE != 0
	if t != nil && t != s && !exchange && flags&unix.RENAME_NOREPLACE == 0 {
		if err := pc.beforeLastUnlink(t, dst); err != nil {
			pc.logf("%v", err)
			return syscall.EIO
		}
	}
	if err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, uint(flags)); err != nil {
		return errno(err)
	}
	switch {
	case t == s:
		// Two names of one file: rename does nothing.
	case exchange:
		d.children[name], nd.children[newName] = t, s
		s.links = append(removeLink(s.links, link{d, name}), link{nd, newName})
		t.links = append(removeLink(t.links, link{nd, newName}), link{d, name})
	default:
		if t != nil {
			pc.removeLive(nd, newName)
		}
		delete(d.children, name)
		s.links = append(removeLink(s.links, link{d, name}), link{nd, newName})
		nd.children[newName] = s
	}
	return 0
}

func (f *fnode) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	pc := f.pc
	if e := pc.enter(ctx, false); e != 0 {
		return nil, e
	}
	defer pc.mu.Unlock()
	return []byte(f.n.target), 0
}

func (f *fnode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	pc := f.pc
	if e := pc.enter(ctx, false); e != 0 {
		return nil, e
	}
	defer pc.mu.Unlock()
	list := make([]fuse.DirEntry, 0, len(f.n.children))
	for name, c := range f.n.children {
		list = append(list, fuse.DirEntry{Name: name, Mode: c.kind(), Ino: c.id})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return fs.NewListDirStream(list), 0
}

// Fsync is fsync(2) and fdatasync(2) of a file or a directory: the place
// where state becomes durable, counted, and where crash points and sync
// faults strike.
func (f *fnode) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	pc := f.pc
	if e := pc.enter(ctx, true); e != 0 {
		return e
	}
	n := f.n
	s := Sync{N: len(pc.syncs) + 1, Op: pc.ops, Path: n.name(), Dir: n.isDir(), Datasync: flags&1 != 0}
	hit := false
	if pc.crash.Sync > 0 && (pc.crash.Path == nil || pc.crash.Path.MatchString(s.Path)) {
		pc.crashSeen++
		hit = pc.crashSeen == pc.crash.Sync
	}
	fe := pc.fault(n, false)
	if fe != 0 {
		s.Err = fe
	}
	pc.syncs = append(pc.syncs, s)
	pc.logf("%s", s)
	if hit && (!pc.crash.After || fe != 0) {
		pc.freezeLocked("crash point: before " + s.String())
		pc.mu.Unlock()
		return pc.frozenErr(ctx)
	}
	if fe != 0 {
		pc.mu.Unlock()
		return fe
	}
	if e := pc.makeDurable(n, fh); e != 0 {
		pc.mu.Unlock()
		return e
	}
	if hit {
		pc.freezeLocked("crash point: after " + s.String())
		pc.mu.Unlock()
		return pc.frozenErr(ctx)
	}
	pc.mu.Unlock()
	return 0
}

// makeDurable is a successful fsync of n.
func (pc *FS) makeDurable(n *node, fh fs.FileHandle) syscall.Errno {
	switch {
	case n.isDir():
		pc.syncDir(n)
	case n.isReg():
		var st syscall.Stat_t
		if e := pc.stat(n, fh, &st); e != 0 {
			return e
		}
		n.synced(st.Size)
	}
	if pc.opts.SyncPersistsPath {
		pc.syncNames(n)
	}
	return 0
}

func (f *fnode) Allocate(ctx context.Context, fh fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	pc := f.pc
	if e := pc.enter(ctx, true); e != 0 {
		return e
	}
	defer pc.mu.Unlock()
	h, ok := fh.(*handle)
	if !ok || h == nil {
		return syscall.EBADF
	}
	if mode&(unix.FALLOC_FL_COLLAPSE_RANGE|unix.FALLOC_FL_INSERT_RANGE) != 0 {
		return syscall.EOPNOTSUPP
	}
	if e := pc.fault(h.n, true); e != 0 {
		return e
	}
	n := h.n
	zeroes := mode&(unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_ZERO_RANGE) != 0
	if zeroes {
		if err := n.save(h.f, int64(off), int64(off+size)); err != nil {
			pc.logf("%s: %v", n.name(), err)
			return syscall.EIO
		}
	}
	var before syscall.Stat_t
	if err := syscall.Fstat(int(h.f.Fd()), &before); err != nil {
		return errno(err)
	}
	if err := unix.Fallocate(int(h.f.Fd()), mode, int64(off), int64(size)); err != nil {
		return errno(err)
	}
	if pc.opts.Unsynced != DropUnsynced {
		var after syscall.Stat_t
		if err := syscall.Fstat(int(h.f.Fd()), &after); err != nil {
			return errno(err)
		}
		if zeroes {
			n.unsynced = append(n.unsynced, fileOp{off: int64(off), data: make([]byte, size)})
		}
		if after.Size != before.Size {
			n.unsynced = append(n.unsynced, fileOp{trunc: true, size: after.Size})
		}
	}
	return 0
}

func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	pc := h.pc
	if e := pc.enter(ctx, false); e != 0 {
		return nil, e
	}
	pc.mu.Unlock()
	k, err := h.f.ReadAt(dest, off)
	if err != nil && k == 0 && !errors.Is(err, io.EOF) {
		return nil, errno(err)
	}
	return fuse.ReadResultData(dest[:k]), 0
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	pc := h.pc
	if e := pc.enter(ctx, true); e != 0 {
		return 0, e
	}
	defer pc.mu.Unlock()
	n := h.n
	if e := pc.fault(n, true); e != 0 {
		return 0, e
	}
	if pc.space == 0 {
		return 0, syscall.ENOSPC
	}
	if pc.space > 0 && int64(len(data)) > pc.space {
		data = data[:pc.space]
	}
	if err := n.save(h.f, off, off+int64(len(data))); err != nil {
		pc.logf("%s: %v", n.name(), err)
		return 0, syscall.EIO
	}
	k, err := h.f.WriteAt(data, off)
	if pc.space > 0 {
		pc.space -= int64(k)
	}
	if pc.opts.Unsynced != DropUnsynced && k > 0 {
		n.unsynced = append(n.unsynced, fileOp{off: off, data: append([]byte(nil), data[:k]...)})
	}
	if err != nil && k == 0 {
		return 0, errno(err)
	}
	return uint32(k), 0
}

func (h *handle) Release(ctx context.Context) syscall.Errno {
	return errno(h.f.Close())
}
