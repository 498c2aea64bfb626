package skills

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Caps bound one skills/ directory: how many skills it holds and the
// bytes of their files (chicks.skills). Zero is no cap.
type Caps struct {
	MaxCount int
	MaxBytes int64
}

// Bytes is the sum of s's file sizes.
func (s Skill) Bytes() int64 {
	var n int64
	for _, f := range s.Files {
		n += int64(len(f.Data))
	}
	return n
}

// Usage is what skillsDir holds: each skill's name (a directory or
// anything else not hidden) and the bytes of its regular files. A
// missing directory holds none.
func Usage(skillsDir string) (map[string]int64, error) {
	out := map[string]int64{}
	entries, err := os.ReadDir(skillsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		var n int64
		err := filepath.WalkDir(filepath.Join(skillsDir, e.Name()), func(_ string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() {
				if info, err := d.Info(); err == nil {
					n += info.Size()
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		out[e.Name()] = n
	}
	return out, nil
}

// CheckCaps says whether s may be installed in skillsDir within c: a new
// skill needs room for one more and for its bytes; an update of a skill
// already there needs room only for the bytes it adds. The skills there
// stay whatever it says. where names the directory for people ("this
// channel's skills"); the error is a sentence for them.
func CheckCaps(skillsDir, where string, s Skill, c Caps) error {
	have, err := Usage(skillsDir)
	if err != nil {
		return fmt.Errorf("measure %s: %w", where, err)
	}
	var total int64
	for _, n := range have {
		total += n
	}
	old, exists := have[s.Name]
	if !exists && c.MaxCount > 0 && len(have) >= c.MaxCount {
		return fmt.Errorf("%s hold %d skills, at most %d (chicks.skills.maxCount); the skills there stay, and one of them may be updated", where, len(have), c.MaxCount)
	}
	if after := total - old + s.Bytes(); c.MaxBytes > 0 && after > c.MaxBytes && after > total {
		return fmt.Errorf("%s would hold %d bytes with it, at most %d (chicks.skills.maxBytes); the skills there stay", where, after, c.MaxBytes)
	}
	return nil
}
