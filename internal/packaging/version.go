package packaging

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// describeSuffix is what `git describe --long` appends to a tag: the number
// of commits since it and the abbreviated hash.
var describeSuffix = regexp.MustCompile(`^(.+)-([0-9]+)-g([0-9a-f]+)$`)

// debianUpstream is what a Debian version without an epoch or a revision
// may hold (deb-version(7)).
var debianUpstream = regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`)

var hexHash = regexp.MustCompile(`^[0-9a-f]{4,}$`)

// DebianVersion turns the output of `git describe --tags --long --dirty
// --always` and the number of commits in HEAD into a Debian version that
// grows with the history:
//
//	v1.2.3-0-gabc1234        1.2.3
//	v1.2.3-4-gabc1234        1.2.3+4.gabc1234    (after 1.2.3, before 1.2.4)
//	v1.2.3-rc1-0-gabc1234    1.2.3~rc1           (before 1.2.3)
//	...-dirty                +N.gHASH.dirty       (even on the tag itself)
//	abc1234 (no tag yet)     0~git388.gabc1234   (before any tagged version)
func DebianVersion(describe string, commits int) (string, error) {
	d := strings.TrimSpace(describe)
	dirty := strings.HasSuffix(d, "-dirty")
	d = strings.TrimSuffix(d, "-dirty")
	if d == "" {
		return "", fmt.Errorf("debian version: git describe printed nothing")
	}
	var v string
	if m := describeSuffix.FindStringSubmatch(d); m != nil {
		tag := strings.TrimPrefix(m[1], "v")
		// A pre-release (v1.2.3-rc1) sorts before its release.
		v = strings.ReplaceAll(tag, "-", "~")
		if !debianUpstream.MatchString(v) {
			return "", fmt.Errorf("debian version: tag %q does not make a Debian version (want v1.2.3 or v1.2.3-rc1)", m[1])
		}
		if m[2] != "0" || dirty {
			v += "+" + m[2] + ".g" + m[3]
		}
	} else {
		if !hexHash.MatchString(d) {
			return "", fmt.Errorf("debian version: cannot read git describe output %q", describe)
		}
		if commits <= 0 {
			return "", fmt.Errorf("debian version: commit count %d, want at least 1", commits)
		}
		v = "0~git" + strconv.Itoa(commits) + ".g" + d
	}
	if dirty {
		v += ".dirty"
	}
	return v, nil
}

// Git is what the packages take from the repository: the Debian version,
// the version stamped into the binaries (git describe) and the commit's
// time, which dates the changelog and the files so that a rebuild of the
// same commit gives the same packages.
type Git struct {
	Version  string
	Describe string
	Time     time.Time
}

// FromGit reads the version and the commit time from the repository at dir.
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
	long, err := run("describe", "--tags", "--long", "--dirty", "--always")
	if err != nil {
		return Git{}, err
	}
	short, err := run("describe", "--tags", "--dirty", "--always")
	if err != nil {
		return Git{}, err
	}
	count, err := run("rev-list", "--count", "HEAD")
	if err != nil {
		return Git{}, err
	}
	n, err := strconv.Atoi(count)
	if err != nil {
		return Git{}, fmt.Errorf("git rev-list --count: %q is not a number", count)
	}
	unix, err := run("log", "-1", "--format=%ct")
	if err != nil {
		return Git{}, err
	}
	sec, err := strconv.ParseInt(unix, 10, 64)
	if err != nil {
		return Git{}, fmt.Errorf("git log: commit time %q is not a number", unix)
	}
	v, err := DebianVersion(long, n)
	if err != nil {
		return Git{}, err
	}
	return Git{Version: v, Describe: short, Time: time.Unix(sec, 0).UTC()}, nil
}
