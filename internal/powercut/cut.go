package powercut

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"golang.org/x/sys/unix"
)

// scan builds the model from the backing directory: everything in it is
// live and durable.
func (pc *FS) scan() error {
	var st syscall.Stat_t
	if err := syscall.Lstat(pc.backing, &st); err != nil {
		return fmt.Errorf("powercut: backing directory: %w", err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return fmt.Errorf("powercut: backing %s is not a directory", pc.backing)
	}
	pc.root = newNode(rootID, st.Mode)
	byIno := map[uint64]*node{}
	var walk func(dir *node, abs string) error
	walk = func(dir *node, abs string) error {
		ents, err := os.ReadDir(abs)
		if err != nil {
			return fmt.Errorf("powercut: scan: %w", err)
		}
		for _, e := range ents {
			p := filepath.Join(abs, e.Name())
			var cst syscall.Stat_t
			if err := syscall.Lstat(p, &cst); err != nil {
				return fmt.Errorf("powercut: scan: %w", err)
			}
			if cst.Dev != st.Dev {
				return fmt.Errorf("powercut: %s is another filesystem's mount point", p)
			}
			c := byIno[cst.Ino]
			if c == nil {
				c = newNode(pc.nextID, cst.Mode)
				pc.nextID++
				c.rdev, c.uid, c.gid = cst.Rdev, cst.Uid, cst.Gid
				switch c.kind() {
				case syscall.S_IFREG:
					c.durSize = cst.Size
					if cst.Nlink > 1 {
						byIno[cst.Ino] = c
					}
				case syscall.S_IFLNK:
					t, err := os.Readlink(p)
					if err != nil {
						return fmt.Errorf("powercut: scan: %w", err)
					}
					c.target = t
				}
			}
			pc.addLive(dir, e.Name(), c)
			dir.durChildren[e.Name()] = c
			c.durLinks = append(c.durLinks, link{dir, e.Name()})
			if c.isDir() {
				if err := walk(c, p); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return walk(pc.root, pc.backing)
}

// restore turns the backing directory into the durable state. The live
// tree is first moved aside into a directory of its own (renames within
// the backing filesystem: files keep their inodes), then the durable tree
// is built from the root: directories made afresh, a file hard-linked from
// where it lives (or copied from the descriptor kept when it lost its last
// name) and its content put back as it was at its last fsync, then what
// is aside is removed.
func (pc *FS) restore() error {
	aside, err := os.MkdirTemp(pc.backing, ".powercut-cut-")
	if err != nil {
		return fmt.Errorf("powercut: cut: %w", err)
	}
	base := filepath.Base(aside)
	// Each live node's path, computed before the move.
	livePath := map[*node]string{}
	var note func(d *node)
	note = func(d *node) {
		for _, c := range d.children {
			if _, ok := livePath[c]; ok {
				continue
			}
			if r, ok := c.rel(); ok {
				livePath[c] = filepath.Join(aside, r)
			}
			if c.isDir() {
				note(c)
			}
		}
	}
	note(pc.root)
	ents, err := os.ReadDir(pc.backing)
	if err != nil {
		return fmt.Errorf("powercut: cut: %w", err)
	}
	for _, e := range ents {
		if e.Name() == base {
			continue
		}
		if err := os.Rename(filepath.Join(pc.backing, e.Name()), filepath.Join(aside, e.Name())); err != nil {
			return fmt.Errorf("powercut: cut: %w", err)
		}
	}

	placed := map[*node]string{}
	var build func(d *node, abs string) error
	build = func(d *node, abs string) error {
		names := make([]string, 0, len(d.durChildren))
		for name := range d.durChildren {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			c := d.durChildren[name]
			dst := filepath.Join(abs, name)
			if err := pc.place(c, dst, livePath[c], placed); err != nil {
				return err
			}
			if c.isDir() {
				if err := build(c, dst); err != nil {
					return err
				}
			}
		}
		return nil
	}
	berr := build(pc.root, pc.backing)
	rerr := os.RemoveAll(aside)
	if berr != nil {
		return berr
	}
	if rerr != nil {
		return fmt.Errorf("powercut: cut: remove the live tree: %w", rerr)
	}
	return nil
}

// place makes node c at dst; live is where c lives now (aside), if it
// does. What it makes afresh gets c's mode and owner: as they are live, or
// as they were last seen.
func (pc *FS) place(c *node, dst, live string, placed map[*node]string) error {
	perm, uid, gid := c.mode&0o7777, c.uid, c.gid
	var st syscall.Stat_t
	switch {
	case live != "" && syscall.Lstat(live, &st) == nil:
		perm, uid, gid = st.Mode&0o7777, st.Uid, st.Gid
	case c.orphan != nil && syscall.Fstat(int(c.orphan.Fd()), &st) == nil:
		perm, uid, gid = st.Mode&0o7777, st.Uid, st.Gid
	}
	wrap := func(err error) error {
		if err == nil {
			return nil
		}
		return fmt.Errorf("powercut: cut: %s: %w", dst, err)
	}
	// made gives what was made afresh its mode (unless a symlink) and
	// owner.
	made := func(err error) error {
		if err == nil && c.kind() != syscall.S_IFLNK {
			err = syscall.Chmod(dst, perm)
		}
		if err == nil && os.Getuid() == 0 {
			err = os.Lchown(dst, int(uid), int(gid))
		}
		return wrap(err)
	}
	switch c.kind() {
	case syscall.S_IFDIR:
		if _, seen := placed[c]; seen {
			return nil // cannot happen: a directory has one durable name
		}
		placed[c] = dst
		return made(os.Mkdir(dst, 0o700))
	case syscall.S_IFLNK:
		return made(os.Symlink(c.target, dst))
	case syscall.S_IFREG:
		if first, ok := placed[c]; ok {
			return wrap(os.Link(first, dst))
		}
		placed[c] = dst
		switch {
		case live != "":
			if err := os.Link(live, dst); err != nil {
				return wrap(err)
			}
		case c.orphan != nil:
			if err := made(copyOut(c.orphan, dst)); err != nil {
				return err
			}
		default:
			return wrap(errors.New("its content was not kept (a bug in powercut)"))
		}
		return wrap(pc.rollBack(c, dst))
	default:
		return made(unix.Mknod(dst, c.mode, int(c.rdev)))
	}
}

func copyOut(src *os.File, dst string) error {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, cerr := io.Copy(out, io.NewSectionReader(src, 0, 1<<62))
	return errors.Join(cerr, out.Close())
}

// rollBack puts the file at p back to its durable content, then applies
// what Options.Unsynced keeps of its unsynced operations.
func (pc *FS) rollBack(c *node, p string) error {
	if len(c.saved) == 0 && len(c.unsynced) == 0 {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err == nil && st.Size == c.durSize {
			return nil
		}
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, s := range c.saved {
		if _, err := f.WriteAt(s.data, s.off); err != nil {
			return err
		}
	}
	if err := f.Truncate(c.durSize); err != nil {
		return err
	}
	ops := c.unsynced
	switch {
	case len(ops) == 0:
		return nil
	case pc.opts.Unsynced == KeepPrefix:
		keep := pc.rng.IntN(len(ops) + 1)
		for _, op := range ops[:keep] {
			if err := apply(f, op); err != nil {
				return err
			}
		}
		torn := 0
		if keep < len(ops) && !ops[keep].trunc && len(ops[keep].data) > 1 {
			op := ops[keep]
			torn = pc.rng.IntN(len(op.data))
			op.data = op.data[:torn]
			if err := apply(f, op); err != nil {
				return err
			}
		}
		pc.logf("cut: %s keeps the first %d of %d unsynced operations and %d bytes of the next", p, keep, len(ops), torn)
	case pc.opts.Unsynced == KeepSubset:
		var kept []int
		for i, op := range ops {
			if pc.rng.IntN(2) == 0 {
				continue
			}
			kept = append(kept, i+1)
			if err := apply(f, op); err != nil {
				return err
			}
		}
		pc.logf("cut: %s keeps unsynced operations %v of %d", p, kept, len(ops))
	}
	return nil
}

func apply(f *os.File, op fileOp) error {
	if op.trunc {
		return f.Truncate(op.size)
	}
	_, err := f.WriteAt(op.data, op.off)
	return err
}
