package hatchery

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/wire"
)

// Workspace is where a chick's files live inside its container.
const Workspace = "/workspace"

// ChannelFiles are the entries of a channel directory a chick receives
// (decision 3): memory, attachments, scratch, skills, and the daily logs
// (the channel's grep-able memory). Not log.jsonl or context.jsonl, and
// nothing outside the channel.
var ChannelFiles = []string{"MEMORY.md", "attachments", "scratch", "skills", "daily"}

// MaxPackBytes caps what one chick receives at start.
const MaxPackBytes = wire.MaxFetchBytes

// Files says what a chick receives at start: the chick fetches them from
// the nest (FetchFiles) after it joined, so a runtime needs no way to copy
// files into a container.
type Files struct {
	// ChannelDir is the channel's directory on Mother's side.
	ChannelDir string
	// SharedSkills is the workspace's skills/ directory; its skills go to
	// /workspace/skills/ too, and a channel's own skill of the same name
	// replaces the shared one (the whole directory).
	SharedSkills string
}

// ErrTooLarge: a chick's files exceed MaxPackBytes (List leaves out what
// would; a file that grew after it was listed is refused when sent).
var ErrTooLarge = fmt.Errorf("the channel's files exceed %d bytes", MaxPackBytes)

// FileEntry is one entry of what a chick receives (Files.List).
type FileEntry struct {
	// Path is where it goes, relative to the workspace, slash-separated.
	Path string
	Dir  bool
	// Size is a file's size when it was listed.
	Size       int64
	Executable bool
	ModTime    time.Time

	// root is the directory it is read from, rel its path there.
	root, rel string
}

// workspaceDirs are made in every chick's workspace, present on Mother's
// side or not.
var workspaceDirs = []string{"scratch", wire.OutputsDir, "skills", "attachments"}

// List walks what a chick receives: the shared skills but those the
// channel has one of the same name of, then ChannelFiles of the channel
// directory, then the workspace's usual directories. A directory comes
// before what it holds. Only regular files and directories are listed:
// links (never followed), devices, pipes and sockets are left out, so a
// link in a channel directory cannot pull in config.json. So is a name
// the chick would refuse (wire.CheckWorkspacePath). The files' sizes
// together stay within MaxPackBytes: a file that would pass it is left
// out (the channel's quota keeps chick outputs well below it; see
// quota.go), never the whole list.
func (f Files) List() ([]FileEntry, error) {
	out, _, err := f.list()
	return out, err
}

// list is List, and the workspace paths of the files it left out.
func (f Files) list() ([]FileEntry, []string, error) {
	var (
		out     []FileEntry
		leftOut []string
		total   int64
		seen    = map[string]bool{}
	)
	err := f.walk(func(name string, info fs.FileInfo, root, rel string) {
		e := FileEntry{Path: name, ModTime: info.ModTime(), root: root, rel: rel}
		if info.IsDir() {
			if seen[name] {
				return
			}
			e.Dir = true
		} else {
			if total+info.Size() > MaxPackBytes {
				leftOut = append(leftOut, name)
				return
			}
			total += info.Size()
			e.Size, e.Executable = info.Size(), info.Mode()&0o100 != 0
		}
		seen[name] = true
		out = append(out, e)
	})
	if err != nil {
		return nil, nil, err
	}
	for _, d := range workspaceDirs {
		if !seen[d] {
			seen[d] = true
			out = append(out, FileEntry{Path: d, Dir: true})
		}
	}
	return out, leftOut, nil
}

// walk calls fn for each regular file and directory a chick receives, in
// List's order, with its workspace path and where it is read from (the
// root directory and the path under it).
func (f Files) walk(fn func(name string, info fs.FileInfo, root, rel string)) error {
	add := func(root, rel, dst string, skip func(name string) bool) error {
		src := filepath.Join(root, rel)
		return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && p == src {
					return nil
				}
				return err
			}
			sub, err := filepath.Rel(src, p)
			if err != nil {
				return err
			}
			if skip != nil && sub != "." && skip(strings.Split(filepath.ToSlash(sub), "/")[0]) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			name := path.Join(dst, filepath.ToSlash(sub))
			if !d.IsDir() && !d.Type().IsRegular() {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			if wire.CheckWorkspacePath(name) != nil {
				// A name the chick would refuse (a backslash in it): left
				// out, not the whole fetch.
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			fn(name, info, root, filepath.Join(rel, sub))
			return nil
		})
	}
	if f.SharedSkills != "" {
		var own func(string) bool
		if f.ChannelDir != "" {
			chSkills := filepath.Join(f.ChannelDir, "skills")
			own = func(name string) bool {
				_, err := os.Lstat(filepath.Join(chSkills, name))
				return err == nil
			}
		}
		if err := add(f.SharedSkills, ".", "skills", own); err != nil {
			return fmt.Errorf("list the workspace's skills: %w", err)
		}
	}
	if f.ChannelDir != "" {
		for _, e := range ChannelFiles {
			if err := add(f.ChannelDir, e, e, nil); err != nil {
				return fmt.Errorf("list the channel's files: %w", err)
			}
		}
	}
	return nil
}

// Open opens a listed regular file for reading. It refuses a path that
// has become a link or anything but a regular file since List, and never
// leaves the directory the file was listed in.
func (e FileEntry) Open() (*os.File, error) {
	if e.Dir || e.root == "" {
		return nil, fmt.Errorf("open %s: not a listed file", e.Path)
	}
	root, err := os.OpenRoot(e.root)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// os.Root keeps to the directory but follows links inside it: look
	// at the name itself first, then make sure the file opened is that.
	li, err := root.Lstat(e.rel)
	if err != nil {
		return nil, err
	}
	if !li.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is no longer a regular file", e.Path)
	}
	f, err := root.Open(e.rel)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && !os.SameFile(li, st) {
		err = fmt.Errorf("%s was replaced while being opened", e.Path)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ChickFiles says what chick id receives at start, for FetchFiles. Its
// channel is brought within its quota first (quota.go).
func (h *Hatchery) ChickFiles(id string) (Files, error) {
	h.mu.Lock()
	c, ok := h.chicks[id]
	if !ok {
		h.mu.Unlock()
		return Files{}, ErrUnknownChick
	}
	if c.rec.State.Final() {
		h.mu.Unlock()
		return Files{}, ErrChickEnded
	}
	h.heardLocked(c)
	f := Files{ChannelDir: c.rec.ChannelDir, SharedSkills: c.rec.Skills}
	info := h.info(c)
	h.mu.Unlock()
	h.packRoom(info, f)
	return f, nil
}

// Labels every chick container carries, so Mother can find and reap
// strays after a crash (decision 4).
const (
	LabelChickID  = "mother.chick.id"
	LabelChannel  = "mother.channel"
	LabelInstance = "mother.instance"
	LabelTier     = "mother.tier"
)

// Environment variables a chick is started with. These, and nothing Mother
// was given, are its whole environment.
const (
	EnvAddr    = "MOTHER_ADDR"
	EnvToken   = "MOTHER_TOKEN"
	EnvChickID = "MOTHER_CHICK_ID"
	// EnvCA is the nest's CA certificate (PEM, public): the chick trusts
	// only it when dialling Mother over TLS.
	EnvCA = "MOTHER_CA_PEM"
)

// MaxFileBytes caps one file a chick sends back; MaxChickFileBytes all of
// them.
const (
	MaxFileBytes      = 100 << 20
	MaxChickFileBytes = 1 << 30
)

// StoreFile stores a file chick id sends back under
// <channel dir>/scratch/chicks/<id>/<rel>, and tells the observer (which
// posts attached files to the channel).
func (h *Hatchery) StoreFile(id, rel string, attach bool, title string, r io.Reader) (File, error) {
	h.mu.Lock()
	c, ok := h.chicks[id]
	if !ok {
		h.mu.Unlock()
		return File{}, ErrUnknownChick
	}
	chDir, skills := c.rec.ChannelDir, c.rec.Skills
	used := c.files
	h.heardLocked(c)
	h.mu.Unlock()
	if chDir == "" {
		return File{}, errors.New("store file: the chick has no channel directory")
	}
	clean, err := cleanRel(rel)
	if err != nil {
		return File{}, fmt.Errorf("store file: %w", err)
	}
	relOut := filepath.Join("scratch", "chicks", id, clean)
	dst := filepath.Join(chDir, relOut)
	if err := fsync.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return File{}, fmt.Errorf("store file: %w", err)
	}
	if err := insideNoLinks(chDir, filepath.Dir(dst)); err != nil {
		return File{}, fmt.Errorf("store file: %w", err)
	}
	limit := min(int64(MaxFileBytes), MaxChickFileBytes-used)
	tmp, err := os.CreateTemp(filepath.Dir(dst), uploadPrefix+"*")
	if err != nil {
		return File{}, fmt.Errorf("store file: %w", err)
	}
	n, err := io.Copy(tmp, io.LimitReader(r, limit+1))
	if err == nil && n > limit {
		err = fmt.Errorf("file larger than %d bytes", limit)
	}
	if err == nil {
		err = fsync.File(tmp, fsync.KindAttachment)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	// Within the channel's quota: the oldest chick outputs make room, and
	// the file lands before another file is measured.
	var ev Eviction
	if err == nil {
		h.quotaMu.Lock()
		ev, err = h.makeRoom(Files{ChannelDir: chDir, SharedSkills: skills}, h.quota(), dst, n, false)
		if err == nil {
			err = os.Rename(tmp.Name(), dst)
		}
		h.quotaMu.Unlock()
	}
	if err != nil {
		os.Remove(tmp.Name())
		return File{}, fmt.Errorf("store file %s: %w", clean, err)
	}
	h.mu.Lock()
	c.files += n
	info := h.info(c)
	h.mu.Unlock()
	if len(ev.Removed) > 0 {
		h.logger.Info("channel files evicted", "chick", id, "files", len(ev.Removed), "bytes", ev.Bytes, "quota", ev.Quota, "for", relOut)
		h.obs.ChannelFilesEvicted(info, ev)
	}
	f := File{Path: dst, RelPath: relOut, Attach: attach, Title: title, Size: n}
	h.obs.ChickFile(info, f)
	return f, nil
}

// cleanRel checks a path relative to the chick's workspace.
func cleanRel(rel string) (string, error) {
	rel = strings.TrimPrefix(rel, Workspace+"/")
	if rel == "" || filepath.IsAbs(rel) {
		return "", fmt.Errorf("path %q must be relative to the workspace", rel)
	}
	c := filepath.Clean(rel)
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %q leaves the workspace", rel)
	}
	return c, nil
}

// insideNoLinks checks that dir is under root with no symlink on the way.
func insideNoLinks(root, dir string) error {
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("%s is outside the channel directory", dir)
	}
	p := root
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		if part == "." {
			continue
		}
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symlink", p)
		}
	}
	return nil
}
