package powercut

import (
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"syscall"
)

// node is one file, directory, symlink or special file of the mount, with
// both its live state (what processes see now) and its durable state (what
// a power cut would leave). Its id is its inode number on the mount and
// never reused, even when the backing filesystem reuses an inode number.
//
// Every field is guarded by FS.mu.
type node struct {
	id   uint64
	mode uint32 // st_mode at creation (type and permission bits)
	rdev uint64 // special files
	// uid and gid are the owner when last seen (at creation or mount).
	uid, gid uint32
	// target is a symlink's target (symlinks never change).
	target string

	// links are the live names of the node (at most one for a
	// directory, none for the root or a node removed from every
	// directory).
	links []link
	// children are a directory's live entries.
	children map[string]*node

	// durLinks are the durable entries naming the node: the entries of
	// a durable directory listing (durChildren) that point here. A
	// directory has at most one: recording it at a new place removes
	// the old one, so a directory has one parent after a cut.
	durLinks []link
	// durChildren are a directory's durable entries: its live entries
	// as they were at its last fsync (or at mount, or empty since its
	// creation).
	durChildren map[string]*node

	// durSize is a regular file's size at its last fsync (at mount: its
	// size; since its creation: 0).
	durSize int64
	// saved holds the durable bytes of [0, durSize) that writes or
	// truncation have changed since the last fsync, read before they
	// changed: sorted by offset, disjoint. Restoring them and truncating
	// to durSize gives the durable content back.
	saved []span
	// unsynced records the writes and truncations since the last fsync,
	// in order, with their data; only when Options.Unsynced keeps some.
	unsynced []fileOp

	// orphan keeps the content of a regular file that is in no live
	// directory any more but still durably named somewhere, so a cut
	// can bring it back.
	orphan *os.File
	// gone is the relative path the node had when it lost its last
	// live name (for reports).
	gone string
}

type link struct {
	dir  *node
	name string
}

type span struct {
	off  int64
	data []byte
}

func (s span) end() int64 { return s.off + int64(len(s.data)) }

// fileOp is an unsynced write (data at off) or truncation (to size).
type fileOp struct {
	off   int64
	data  []byte
	trunc bool
	size  int64
}

func (n *node) kind() uint32 { return n.mode & syscall.S_IFMT }
func (n *node) isDir() bool  { return n.kind() == syscall.S_IFDIR }
func (n *node) isReg() bool  { return n.kind() == syscall.S_IFREG }

func newNode(id uint64, mode uint32) *node {
	n := &node{id: id, mode: mode}
	if n.isDir() {
		n.children = map[string]*node{}
		n.durChildren = map[string]*node{}
	}
	return n
}

func removeLink(ls []link, l link) []link {
	for i, x := range ls {
		if x == l {
			return append(ls[:i:i], ls[i+1:]...)
		}
	}
	return ls
}

// rel is the node's live path relative to the root ("" for the root),
// through its first live name; ok is false for a node in no live directory.
func (n *node) rel() (string, bool) {
	var parts []string
	for p := n; ; {
		if p.id == rootID {
			break
		}
		if len(p.links) == 0 {
			return "", false
		}
		l := p.links[0]
		parts = append(parts, l.name)
		p = l.dir
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return path.Join(parts...), true
}

// name is the node's relative path for reports: its live path, or the
// one it had when it was removed, marked as such.
func (n *node) name() string {
	if r, ok := n.rel(); ok {
		if r == "" {
			return "."
		}
		return r
	}
	if n.gone != "" {
		return n.gone + " (deleted)"
	}
	return "(deleted)"
}

const rootID = 1

// save records the durable bytes of [off, end) not saved yet, reading them
// through r from the live file before it changes.
func (n *node) save(r io.ReaderAt, off, end int64) error {
	if end > n.durSize {
		end = n.durSize
	}
	if off < 0 {
		off = 0
	}
	if off >= end {
		return nil
	}
	i := sort.Search(len(n.saved), func(i int) bool { return n.saved[i].end() > off })
	for pos := off; pos < end; {
		if i < len(n.saved) && n.saved[i].off <= pos {
			pos = n.saved[i].end()
			i++
			continue
		}
		gapEnd := end
		if i < len(n.saved) && n.saved[i].off < gapEnd {
			gapEnd = n.saved[i].off
		}
		buf := make([]byte, gapEnd-pos)
		if k, err := r.ReadAt(buf, pos); k < len(buf) {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("save durable bytes %d-%d: %w", pos, gapEnd, err)
		}
		n.saved = append(n.saved, span{})
		copy(n.saved[i+1:], n.saved[i:])
		n.saved[i] = span{off: pos, data: buf}
		i++
		pos = gapEnd
	}
	return nil
}

// synced makes the file's live content its durable content.
func (n *node) synced(size int64) {
	n.durSize = size
	n.saved = nil
	n.unsynced = nil
}

// durable-namespace bookkeeping. Each durable entry (dir, name) -> c is
// in dir.durChildren and in c.durLinks.

// setDurable makes (dir, name) -> c durable, replacing what it named.
func (fs *FS) setDurable(dir *node, name string, c *node) {
	old := dir.durChildren[name]
	if old == c {
		return
	}
	if old != nil {
		fs.dropDurable(dir, name)
	}
	if c.isDir() {
		// A directory has one durable place: the newest recorded.
		for _, l := range c.durLinks {
			delete(l.dir.durChildren, l.name)
		}
		c.durLinks = nil
	}
	dir.durChildren[name] = c
	c.durLinks = append(c.durLinks, link{dir, name})
}

// dropDurable removes the durable entry (dir, name).
func (fs *FS) dropDurable(dir *node, name string) {
	c := dir.durChildren[name]
	if c == nil {
		return
	}
	delete(dir.durChildren, name)
	c.durLinks = removeLink(c.durLinks, link{dir, name})
	fs.collect(c)
}

// collect forgets what a cut can no longer bring back: a node in no live
// directory and no durable one.
func (fs *FS) collect(c *node) {
	if len(c.links) > 0 || len(c.durLinks) > 0 || c.id == rootID {
		return
	}
	if c.orphan != nil {
		c.orphan.Close()
		c.orphan = nil
		delete(fs.orphans, c)
	}
	if c.isDir() {
		names := make([]string, 0, len(c.durChildren))
		for name := range c.durChildren {
			names = append(names, name)
		}
		for _, name := range names {
			fs.dropDurable(c, name)
		}
	}
}

// syncDir makes the directory's live entries its durable entries.
func (fs *FS) syncDir(d *node) {
	old := d.durChildren
	for name, c := range old {
		if d.children[name] != c {
			fs.dropDurable(d, name)
		}
	}
	for name, c := range d.children {
		if d.durChildren[name] != c {
			fs.setDurable(d, name, c)
		}
	}
}

// syncNames makes the entries naming n durable, as they are live (its new
// names recorded, its old ones dropped), and then its ancestors' names:
// Options.SyncPersistsPath.
func (fs *FS) syncNames(n *node) {
	for n != nil && n.id != rootID {
		for _, l := range append([]link(nil), n.durLinks...) {
			if l.dir.children[l.name] != n {
				fs.dropDurable(l.dir, l.name)
			}
		}
		for _, l := range n.links {
			fs.setDurable(l.dir, l.name, n)
		}
		if len(n.links) == 0 {
			return
		}
		n = n.links[0].dir
	}
}

// beforeLastUnlink runs before the live entry of c at abs goes: when it is
// c's last live name and c is a regular file a cut may bring back, it keeps
// c's content open.
func (fs *FS) beforeLastUnlink(c *node, abs string) error {
	if len(c.links) != 1 || !c.isReg() || c.orphan != nil {
		return nil
	}
	if len(c.durLinks) == 0 {
		return nil
	}
	f, err := os.OpenFile(abs, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("keep %s for a cut: %w", abs, err)
	}
	c.orphan = f
	fs.orphans[c] = struct{}{}
	return nil
}

func (fs *FS) addLive(dir *node, name string, c *node) {
	dir.children[name] = c
	c.links = append(c.links, link{dir, name})
}

func (fs *FS) removeLive(dir *node, name string) *node {
	c := dir.children[name]
	if c == nil {
		return nil
	}
	if len(c.links) == 1 {
		c.gone = c.name()
	}
	delete(dir.children, name)
	c.links = removeLink(c.links, link{dir, name})
	fs.collect(c)
	return c
}
