// Package skills handles skills that chicks send back: Collect reads a skill
// directory of a chick's workspace as it is (files, directories, and the
// links, devices and pipes that disqualify it), Changed finds the skills
// a chick created or changed since its start, Validate checks a proposed
// skill on Mother's side (SKILL.md front matter with a name and a
// description, names, sizes, only files and directories), and Install
// writes an accepted skill into a skills/ directory, each file crash-safe.
//
// It links no chat platform and no Docker client: the chick uses it too.
package skills

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/fsync"
)

// Limits on one proposed skill.
const (
	// MaxSkillBytes caps the sum of a skill's file sizes.
	MaxSkillBytes = 1 << 20
	// MaxSkillMDBytes caps SKILL.md.
	MaxSkillMDBytes = 64 << 10
	// MaxEntries caps the entries (files and directories) of a skill.
	MaxEntries = 100
	// MaxDepth caps how deep a skill's directories go.
	MaxDepth = 8
	// MaxDescription caps the description, in characters.
	MaxDescription = 1024
)

// Kind is what an entry is.
type Kind int

// Kinds. Only File and Dir are allowed in a skill.
const (
	KindFile Kind = iota + 1
	KindDir
	KindSymlink
	KindOther
)

func (k Kind) String() string {
	switch k {
	case KindFile:
		return "file"
	case KindDir:
		return "directory"
	case KindSymlink:
		return "symbolic link"
	case KindOther:
		return "device, pipe or socket"
	}
	return "unknown entry"
}

// Entry is one entry of a skill's directory.
type Entry struct {
	// Path is relative to the skill's directory, slash-separated.
	Path       string
	Kind       Kind
	Size       int64
	Data       []byte
	Executable bool
}

// Proposal is a skill a chick sends back: its directory name under
// skills/ and what the directory holds.
type Proposal struct {
	Name    string
	Entries []Entry
}

// Skill is a validated proposal.
type Skill struct {
	Name        string
	Description string
	// Files are the regular files, SKILL.md among them.
	Files []Entry
	// Dirs are the directories, parents before children.
	Dirs []string
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidName checks a skill's directory name.
func ValidName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("name %q: a skill's name is 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// Validate checks a proposal: a valid name, SKILL.md at its top with front
// matter naming the skill (the same name as its directory) and
// describing it, only regular files and directories, within the limits.
// The error says what is wrong, for people.
func Validate(p Proposal) (Skill, error) {
	if err := ValidName(p.Name); err != nil {
		return Skill{}, err
	}
	if len(p.Entries) > MaxEntries {
		return Skill{}, fmt.Errorf("too many entries: %d, at most %d", len(p.Entries), MaxEntries)
	}
	s := Skill{Name: p.Name}
	var total int64
	seen := map[string]bool{}
	var skillMD *Entry
	for i := range p.Entries {
		e := &p.Entries[i]
		if e.Path == "." && e.Kind != KindDir {
			return Skill{}, fmt.Errorf("skills/%s is a %s, not a directory", p.Name, e.Kind)
		}
		clean, err := cleanPath(e.Path)
		if err != nil {
			return Skill{}, err
		}
		if seen[clean] {
			return Skill{}, fmt.Errorf("%s: listed twice", clean)
		}
		seen[clean] = true
		if strings.Count(clean, "/") >= MaxDepth {
			return Skill{}, fmt.Errorf("%s: nested deeper than %d directories", clean, MaxDepth)
		}
		switch e.Kind {
		case KindFile:
		case KindDir:
			s.Dirs = append(s.Dirs, clean)
			continue
		case KindSymlink, KindOther:
			return Skill{}, fmt.Errorf("%s is a %s: a skill holds only files and directories", clean, e.Kind)
		default:
			return Skill{}, fmt.Errorf("%s: unknown kind of entry", clean)
		}
		if e.Size < 0 {
			return Skill{}, fmt.Errorf("%s: negative size", clean)
		}
		total += e.Size
		if total > MaxSkillBytes {
			return Skill{}, fmt.Errorf("too large: its files hold more than %d bytes (at most %d)", total, MaxSkillBytes)
		}
		if int64(len(e.Data)) != e.Size {
			return Skill{}, fmt.Errorf("%s: %d bytes sent for a file of %d", clean, len(e.Data), e.Size)
		}
		f := *e
		f.Path = clean
		s.Files = append(s.Files, f)
		if clean == "SKILL.md" {
			skillMD = &s.Files[len(s.Files)-1]
		}
	}
	// Every file's directories must be listed: a proposal is a whole tree.
	for _, f := range s.Files {
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			if !seen[d] || slices.Index(s.Dirs, d) < 0 {
				return Skill{}, fmt.Errorf("%s: its directory %s is not a directory of the skill", f.Path, d)
			}
		}
	}
	if skillMD == nil {
		return Skill{}, errors.New("no SKILL.md at the top of the skill's directory")
	}
	if skillMD.Size > MaxSkillMDBytes {
		return Skill{}, fmt.Errorf("SKILL.md too large: %d bytes, at most %d", skillMD.Size, MaxSkillMDBytes)
	}
	name, desc, err := FrontMatter(skillMD.Data)
	if err != nil {
		return Skill{}, fmt.Errorf("SKILL.md: %w", err)
	}
	if name != p.Name {
		return Skill{}, fmt.Errorf("SKILL.md: name %q is not the skill's directory name %q", name, p.Name)
	}
	s.Description = desc
	slices.SortFunc(s.Dirs, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
	return s, nil
}

// cleanPath checks an entry's path: relative, inside the skill.
func cleanPath(p string) (string, error) {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") || strings.ContainsRune(p, 0) {
		return "", fmt.Errorf("entry path %q must be relative to the skill's directory", p)
	}
	c := path.Clean(p)
	if c != p || c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("entry path %q leaves the skill's directory or is not clean", p)
	}
	return c, nil
}

// FrontMatter reads SKILL.md's front matter: the file starts with a
// "---" line, then "name:" and "description:" lines, then "---". Both are
// required; the description is one line of at most MaxDescription
// characters.
func FrontMatter(data []byte) (name, desc string, err error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), MaxSkillMDBytes+1)
	if !sc.Scan() || strings.TrimSpace(strings.TrimPrefix(sc.Text(), "\ufeff")) != "---" {
		return "", "", errors.New(`no front matter: the file must start with a "---" line, then "name: ..." and "description: ...", then "---"`)
	}
	closed := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "---" {
			closed = true
			break
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.Trim(strings.TrimSpace(v), `"'`)
		switch strings.TrimSpace(k) {
		case "name":
			name = v
		case "description":
			desc = v
		}
	}
	if err := sc.Err(); err != nil {
		return "", "", err
	}
	switch {
	case !closed:
		return "", "", errors.New(`front matter not closed by a "---" line`)
	case name == "":
		return "", "", errors.New("front matter has no name")
	case desc == "":
		return "", "", errors.New("front matter has no description")
	case len([]rune(desc)) > MaxDescription:
		return "", "", fmt.Errorf("description longer than %d characters", MaxDescription)
	}
	return name, desc, nil
}

// Collect reads the skill directory dir as it is, without following
// links. File contents are read only while the skill stays within
// MaxSkillBytes and MaxEntries (past them the proposal is refused on its
// sizes anyway). dir itself being a link or not a directory gives one
// entry of that kind, so the refusal can say so.
func Collect(dir string) (Proposal, error) {
	p := Proposal{Name: filepath.Base(dir)}
	fi, err := os.Lstat(dir)
	if err != nil {
		return p, err
	}
	if !fi.IsDir() {
		p.Entries = append(p.Entries, Entry{Path: ".", Kind: kindOf(fi.Mode())})
		return p, nil
	}
	var total int64
	err = filepath.WalkDir(dir, func(pth string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if pth == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, pth)
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := Entry{Path: filepath.ToSlash(rel), Kind: kindOf(info.Mode())}
		if e.Kind == KindFile {
			e.Size = info.Size()
			e.Executable = info.Mode()&0o111 != 0
			total += e.Size
			if total <= MaxSkillBytes && len(p.Entries) < MaxEntries {
				if e.Data, err = os.ReadFile(pth); err != nil {
					return err
				}
				e.Size = int64(len(e.Data))
			}
		}
		p.Entries = append(p.Entries, e)
		if len(p.Entries) > MaxEntries {
			return fs.SkipAll
		}
		return nil
	})
	return p, err
}

func kindOf(m fs.FileMode) Kind {
	switch {
	case m.IsRegular():
		return KindFile
	case m.IsDir():
		return KindDir
	case m&fs.ModeSymlink != 0:
		return KindSymlink
	}
	return KindOther
}

// Snapshot digests every skill directory under root (root/<name>/...): a
// name's digest changes when any of its entries, their kinds, modes or
// contents do. A missing root is no skills.
func Snapshot(root string) map[string]string {
	out := map[string]string{}
	entries, err := os.ReadDir(root)
	if err != nil {
		return out
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		out[e.Name()] = digest(filepath.Join(root, e.Name()))
	}
	return out
}

func digest(dir string) string {
	h := sha256.New()
	fi, err := os.Lstat(dir)
	if err != nil {
		return ""
	}
	if !fi.IsDir() {
		fmt.Fprintf(h, "top %v\n", fi.Mode())
		return hex.EncodeToString(h.Sum(nil))
	}
	_ = filepath.WalkDir(dir, func(pth string, d fs.DirEntry, err error) error {
		if err != nil {
			fmt.Fprintf(h, "error %s\n", pth)
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, pth)
		fmt.Fprintf(h, "%s %v %d\n", rel, info.Mode(), info.Size())
		if info.Mode().IsRegular() {
			if b, err := os.ReadFile(pth); err == nil {
				sum := sha256.Sum256(b)
				h.Write(sum[:])
			}
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))
}

// Changed lists the skill names whose digest in now differs from before
// (new or changed), sorted. Removed skills are not listed: a chick
// cannot delete a skill.
func Changed(before, now map[string]string) []string {
	var out []string
	for name, d := range now {
		if before[name] != d {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Change is what Install did.
type Change string

// Changes.
const (
	Added     Change = "added"
	Updated   Change = "updated"
	Unchanged Change = "unchanged"
)

// Install writes s into skillsDir/<name>/: each file through a temp file,
// fsync and rename (SKILL.md last, so a skill appears whole), then
// removes the files and directories the new version no longer has. A
// link or anything but a directory in the way is an error, never
// followed.
func Install(skillsDir string, s Skill) (Change, error) {
	if err := ValidName(s.Name); err != nil {
		return "", err
	}
	if err := fsync.MkdirAll(skillsDir, 0o700); err != nil {
		return "", fmt.Errorf("install skill: %w", err)
	}
	if fi, err := os.Lstat(skillsDir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("install skill: %s is not a directory", skillsDir)
	}
	dir := filepath.Join(skillsDir, s.Name)
	change := Added
	switch fi, err := os.Lstat(dir); {
	case err == nil && !fi.IsDir():
		return "", fmt.Errorf("install skill: %s exists and is not a directory", dir)
	case err == nil:
		change = Updated
		if same(dir, s) {
			return Unchanged, nil
		}
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("install skill: %w", err)
	}
	if err := mkdirNoLink(dir); err != nil {
		return "", fmt.Errorf("install skill: %w", err)
	}
	for _, d := range s.Dirs {
		if err := mkdirNoLink(filepath.Join(dir, filepath.FromSlash(d))); err != nil {
			return "", fmt.Errorf("install skill: %w", err)
		}
	}
	files := slices.Clone(s.Files)
	slices.SortStableFunc(files, func(a, b Entry) int {
		switch {
		case a.Path == "SKILL.md":
			return 1
		case b.Path == "SKILL.md":
			return -1
		}
		return 0
	})
	for _, f := range files {
		perm := os.FileMode(0o600)
		if f.Executable {
			perm = 0o700
		}
		dst := filepath.Join(dir, filepath.FromSlash(f.Path))
		if fi, err := os.Lstat(dst); err == nil && !fi.Mode().IsRegular() {
			if err := os.RemoveAll(dst); err != nil {
				return "", fmt.Errorf("install skill: %w", err)
			}
		}
		if err := atomicfile.WriteFile(dst, f.Data, perm); err != nil {
			return "", fmt.Errorf("install skill %s: %w", f.Path, err)
		}
		if err := os.Chmod(dst, perm); err != nil {
			return "", fmt.Errorf("install skill %s: %w", f.Path, err)
		}
	}
	// Remove what the new version does not have, deepest first.
	keep := map[string]bool{}
	for _, f := range s.Files {
		keep[f.Path] = true
	}
	for _, d := range s.Dirs {
		keep[d] = true
	}
	var stale []string
	_ = filepath.WalkDir(dir, func(pth string, d fs.DirEntry, err error) error {
		if err != nil || pth == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, pth)
		if !keep[filepath.ToSlash(rel)] {
			stale = append(stale, pth)
			if d.IsDir() {
				return fs.SkipDir
			}
		}
		return nil
	})
	for _, p := range stale {
		if err := os.RemoveAll(p); err != nil {
			return "", fmt.Errorf("install skill: remove %s: %w", p, err)
		}
	}
	return change, nil
}

// mkdirNoLink makes dir (its parent exists) or accepts a real directory
// there; a link is refused.
func mkdirNoLink(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}

// same reports whether dir already holds exactly s.
func same(dir string, s Skill) bool {
	cur, err := Collect(dir)
	if err != nil || len(cur.Entries) != len(s.Files)+len(s.Dirs) {
		return false
	}
	want := map[string]Entry{}
	for _, f := range s.Files {
		want[f.Path] = f
	}
	dirs := map[string]bool{}
	for _, d := range s.Dirs {
		dirs[d] = true
	}
	for _, e := range cur.Entries {
		switch e.Kind {
		case KindDir:
			if !dirs[e.Path] {
				return false
			}
		case KindFile:
			w, ok := want[e.Path]
			if !ok || !bytes.Equal(w.Data, e.Data) || w.Executable != e.Executable {
				return false
			}
		default:
			return false
		}
	}
	return true
}
