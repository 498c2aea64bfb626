package packaging

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// debianUpstream is what a Debian version without an epoch or a revision
// may hold (deb-version(7)).
var debianUpstream = regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`)

var hexHash = regexp.MustCompile(`^[0-9a-f]{4,}$`)

// release is what the VERSION file may hold: 1.2.3, or a pre-release
// 1.2.3-rc1.
var release = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[A-Za-z0-9.]+)?$`)

// DebianVersion makes a build's Debian version from the release in the
// VERSION file, the number of commits since the commit that last changed
// that file (the release's), the abbreviated hash of HEAD and whether the
// tree has changes. It grows with the history, and past the versions the
// packages had before the VERSION file (0~gitN.gHASH):
//
//	0.2.0, on its commit            0.2.0
//	0.2.0, 4 commits after it       0.2.0+git4.gabc1234   (after 0.2.0, before 0.2.1)
//	0.3.0-rc1, on its commit        0.3.0~rc1             (before 0.3.0)
//	changes not committed           +gitN.gHASH.dirty     (even on the release's commit)
func DebianVersion(rel string, since int, hash string, dirty bool) (string, error) {
	r := strings.TrimSpace(rel)
	if r == "" {
		return "", fmt.Errorf("debian version: the VERSION file is empty")
	}
	if !release.MatchString(r) {
		return "", fmt.Errorf("debian version: VERSION holds %q, want a release such as 0.2.0 or 0.3.0-rc1", r)
	}
	// A pre-release (0.3.0-rc1) sorts before its release.
	v := strings.ReplaceAll(r, "-", "~")
	if !debianUpstream.MatchString(v) {
		return "", fmt.Errorf("debian version: VERSION holds %q, which makes no Debian version", r)
	}
	if since < 0 {
		return "", fmt.Errorf("debian version: %d commits since the release, want 0 or more", since)
	}
	if since > 0 || dirty {
		if !hexHash.MatchString(hash) {
			return "", fmt.Errorf("debian version: commit %q is not an abbreviated hash", hash)
		}
		v += "+git" + strconv.Itoa(since) + ".g" + hash
	}
	if dirty {
		v += ".dirty"
	}
	return v, nil
}

// Git is what the packages take from the repository: the Debian version
// (from the VERSION file), the build label stamped into the binaries (git
// describe) and the commit's
// time, which dates the changelog and the files so that a rebuild of the
// same commit gives the same packages.
type Git struct {
	Version  string
	Describe string
	Time     time.Time
}

// FromGit reads the release (the VERSION file), the version and the
// commit time from the repository at dir.
func FromGit(ctx context.Context, dir string) (Git, error) {
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
			}
			return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	short, err := run("describe", "--tags", "--dirty", "--always")
	if err != nil {
		return Git{}, err
	}
	rel, err := os.ReadFile(filepath.Join(dir, "VERSION"))
	if err != nil {
		return Git{}, fmt.Errorf("debian version: the release: %w", err)
	}
	// The commit that last changed VERSION is the release's; none yet
	// (a VERSION not committed) counts every commit.
	set, err := run("log", "-1", "--format=%H", "--", "VERSION")
	if err != nil {
		return Git{}, err
	}
	span := "HEAD"
	if set != "" {
		span = set + "..HEAD"
	}
	count, err := run("rev-list", "--count", span)
	if err != nil {
		return Git{}, err
	}
	n, err := strconv.Atoi(count)
	if err != nil {
		return Git{}, fmt.Errorf("git rev-list --count: %q is not a number", count)
	}
	hash, err := run("rev-parse", "--short", "HEAD")
	if err != nil {
		return Git{}, err
	}
	unix, err := run("log", "-1", "--format=%ct")
	if err != nil {
		return Git{}, err
	}
	sec, err := strconv.ParseInt(unix, 10, 64)
	if err != nil {
		return Git{}, fmt.Errorf("git log: commit time %q is not a number", unix)
	}
	v, err := DebianVersion(string(rel), n, hash, strings.HasSuffix(short, "-dirty") || set == "")
	if err != nil {
		return Git{}, err
	}
	return Git{Version: v, Describe: short, Time: time.Unix(sec, 0).UTC()}, nil
}
