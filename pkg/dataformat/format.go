package dataformat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/mother-chat/mother/pkg/version"
)

// Release is this release of Mother: the one written into the format file.
const Release = version.Release

// Previous is the release before this one: what mother rollback goes back
// to by default: the first release of the previous series.
const Previous = version.Previous + ".0"

// Current is the data format this release reads and writes: the last
// step's (a test of the table keeps them together).
const Current = 1

// latest is the format the last step of the table gives (tests may add a
// step of their own).
func latest() int {
	if len(steps) == 0 {
		return 0
	}
	return steps[len(steps)-1].To
}

// File is the format file, relative to the data directory.
const File = "state/format.json"

// series maps each release series to the data format it reads, oldest
// first. A series reads its own format and every older one (by migrating
// it); it refuses a newer one.
var series = []struct {
	series string // "0.1": every 0.1.x release
	format int
}{
	{"0.1", 0},
	{"0.2", 1},
}

// Info is what the format file says.
type Info struct {
	// Format is the data format (0: no format file).
	Format int `json:"format"`
	// Release is the release that last wrote or migrated the directory
	// ("" for format 0).
	Release string `json:"release"`
}

// ErrNewer is the kind of the error Check returns for a data directory of
// a newer format than this release reads (errors.Is).
var ErrNewer = errors.New("data directory of a newer format")

// NewerError is a data directory of a newer format.
type NewerError struct {
	Dir  string
	Info Info
	// This is the release that refused it.
	This string
}

func (e *NewerError) Error() string {
	by := "a newer Mother"
	back := "install that release again"
	if e.Info.Release != "" {
		by = "Mother " + e.Info.Release
		back = fmt.Sprintf("install Mother %s again, or run `mother rollback --to %s %s` with it", e.Info.Release, e.This, e.Dir)
	}
	return fmt.Sprintf("the data directory %s is format %d, written by %s; this is Mother %s, which reads format %d and older: %s",
		e.Dir, e.Info.Format, by, e.This, latest(), back)
}

// Is makes errors.Is(err, ErrNewer) true.
func (e *NewerError) Is(target error) bool { return target == ErrNewer }

// Read reads dir's format file; a directory without one (or no directory)
// is format 0. It writes nothing.
func Read(dir string) (Info, error) {
	path := filepath.Join(dir, File)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Info{}, nil
	}
	if err != nil {
		return Info{}, fmt.Errorf("read the data directory's format file %s: %w", path, err)
	}
	var in Info
	if err := json.Unmarshal(b, &in); err != nil || in.Format < 1 {
		return Info{}, fmt.Errorf("the data directory's format file %s does not read as {\"format\": N, \"release\": \"X.Y.Z\"} with N at least 1; restore it from a backup, or remove it only if the directory was last run by Mother 0.1", path)
	}
	return in, nil
}

// Check reads dir's format and refuses one newer than Current (a
// *NewerError naming release, this one). It writes nothing: Mother calls
// it before she creates anything under dir.
func Check(dir, release string) (Info, error) {
	in, err := Read(dir)
	if err != nil {
		return Info{}, err
	}
	if in.Format > latest() {
		return in, &NewerError{Dir: absDir(dir), Info: in, This: release}
	}
	return in, nil
}

// LastRelease is the release that last ran on dir, as its format file
// says ("" when it has none or it does not read).
func LastRelease(dir string) string {
	in, err := Read(dir)
	if err != nil {
		return ""
	}
	return in.Release
}

// FormatOf is the data format release reads ("0.1.4": 0). A release of a
// series this one (this) does not know is an error.
func FormatOf(release, this string) (int, error) {
	v, ok := parseRelease(release)
	if !ok {
		return 0, fmt.Errorf("%q is not a release number such as 0.1.0", release)
	}
	for _, s := range series {
		if v.Series() == s.series {
			return s.format, nil
		}
	}
	return 0, fmt.Errorf("this Mother (%s) does not know which data format Mother %s reads; run the rollback with Mother %s or newer", this, release, release)
}

// firstRelease is the first release of the series that reads format f
// ("0.1.0" for 0), for a format that has no release recorded.
func firstRelease(f int) string {
	for _, s := range series {
		if s.format == f {
			return s.series + ".0"
		}
	}
	return ""
}

// Compare orders two release numbers (major.minor.patch, a suffix after
// "-" or "+" ignored): -1, 0 or 1. One that does not parse sorts first.
func Compare(a, b string) int {
	va, oka := parseRelease(a)
	vb, okb := parseRelease(b)
	switch {
	case !oka && !okb:
		return 0
	case !oka:
		return -1
	case !okb:
		return 1
	}
	return va.Compare(vb)
}

// parseRelease reads a full release number, "1.2.3" (a leading "v" and a
// suffix after "-" or "+" allowed), as version.Parse does; a series alone
// ("0.2") or nothing is not one here.
func parseRelease(s string) (version.V, bool) {
	t := strings.TrimPrefix(s, "v")
	if i := strings.IndexAny(t, "-+"); i >= 0 {
		t = t[:i]
	}
	if strings.Count(t, ".") != 2 || strings.Contains(t, "~") {
		return version.V{}, false
	}
	v, err := version.Parse(s)
	return v, err == nil
}

// absDir is dir made absolute for messages (as given if that fails).
func absDir(dir string) string {
	if a, err := filepath.Abs(dir); err == nil {
		return a
	}
	return dir
}
