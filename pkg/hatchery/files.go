package hatchery

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/mother-chat/mother/pkg/fsync"
)

// Workspace is where a chick's files live inside its container.
const Workspace = "/workspace"

// ChannelFiles are the entries of a channel directory a chick receives
// (decision 3): memory, attachments, scratch, skills, and the daily logs
// (the channel's grep-able memory). Not log.jsonl or context.jsonl, and
// nothing outside the channel.
var ChannelFiles = []string{"MEMORY.md", "attachments", "scratch", "skills", "daily"}

// MaxPackBytes caps what one chick receives at start.
const MaxPackBytes = 1 << 30

// Files says what a chick receives at start.
type Files struct {
	// ChannelDir is the channel's directory on Mother's side.
	ChannelDir string
	// SharedSkills is the workspace's skills/ directory; its entries go to
	// /workspace/skills/ first, and the channel's own skills override them
	// on a name clash.
	SharedSkills string
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
	chDir := c.rec.ChannelDir
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
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return File{}, fmt.Errorf("store file: %w", err)
	}
	if err := insideNoLinks(chDir, filepath.Dir(dst)); err != nil {
		return File{}, fmt.Errorf("store file: %w", err)
	}
	limit := min(int64(MaxFileBytes), MaxChickFileBytes-used)
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".upload-*")
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
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return File{}, fmt.Errorf("store file %s: %w", clean, err)
	}
	h.mu.Lock()
	c.files += n
	info := h.info(c)
	h.mu.Unlock()
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
