package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mother-chat/mother/internal/testenv"
)

func TestDebianVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		release string
		since   int
		hash    string
		dirty   bool
		want    string
	}{
		{"on the release's commit", "0.2.0\n", 0, "abc1234", false, "0.2.0"},
		{"after it", "0.2.0", 4, "abc1234", false, "0.2.0+git4.gabc1234"},
		{"a pre-release", "0.3.0-rc1", 0, "abc1234", false, "0.3.0~rc1"},
		{"after a pre-release", "0.3.0-rc1", 2, "abc1234", false, "0.3.0~rc1+git2.gabc1234"},
		{"dirty on the release's commit", "0.2.0", 0, "abc1234", true, "0.2.0+git0.gabc1234.dirty"},
		{"dirty after it", "0.2.0", 4, "abc1234", true, "0.2.0+git4.gabc1234.dirty"},
		{"two digits", "0.10.12", 0, "", false, "0.10.12"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DebianVersion(tc.release, tc.since, tc.hash, tc.dirty)
			if err != nil || got != tc.want {
				t.Errorf("DebianVersion(%q, %d, %q, %v) = %q, %v, want %q", tc.release, tc.since, tc.hash, tc.dirty, got, err, tc.want)
			}
		})
	}
}

func TestDebianVersionRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		release string
		since   int
		hash    string
		want    string
	}{
		{"", 1, "abc1234", "VERSION file is empty"},
		{"v0.2.0", 0, "abc1234", `VERSION holds "v0.2.0"`},
		{"0.2", 0, "abc1234", `VERSION holds "0.2"`},
		{"0.2.0_1", 0, "abc1234", `VERSION holds "0.2.0_1"`},
		{"0.2.0-rc_1", 0, "abc1234", `VERSION holds "0.2.0-rc_1"`},
		{"0.2.0", -1, "abc1234", "-1 commits"},
		{"0.2.0", 3, "not-a-hash", "not an abbreviated hash"},
	} {
		if got, err := DebianVersion(tc.release, tc.since, tc.hash, false); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DebianVersion(%q, %d, %q) = %q, %v, want an error with %q", tc.release, tc.since, tc.hash, got, err, tc.want)
		}
	}
}

// TestDebianVersionOrder checks with dpkg itself that the versions made
// along a history only grow, so each build upgrades the one before,
// starting from what the packages were before the VERSION file.
func TestDebianVersionOrder(t *testing.T) {
	t.Parallel()
	dpkg, err := exec.LookPath("dpkg")
	if err != nil {
		testenv.Unavailable(t, "dpkg not installed")
	}
	history := []struct {
		release string
		since   int
		dirty   bool
	}{
		{"0.2.0-rc1", 0, false},
		{"0.2.0-rc1", 1, false},
		{"0.2.0", 0, false},
		{"0.2.0", 0, true},
		{"0.2.0", 1, false},
		{"0.2.0", 12, false},
		{"0.2.0", 12, true},
		{"0.2.1", 0, false},
		{"0.3.0-rc1", 3, false},
		{"0.3.0", 0, false},
		{"0.10.0", 0, false},
	}
	// The last package built before VERSION: 0.1.0, from git describe
	// without a tag.
	prev := "0~git4125.g05b3fdc"
	for _, h := range history {
		v, err := DebianVersion(h.release, h.since, "abc1234", h.dirty)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(dpkg, "--compare-versions", v, "gt", prev).CombinedOutput(); err != nil {
			t.Errorf("dpkg --compare-versions %s gt %s: %v %s", v, prev, err, out)
		}
		prev = v
	}
}

// TestFromGit reads versions from a real repository as it gains commits
// and tags.
func TestFromGit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.Unavailable(t, "git not installed")
	}
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
			"GIT_AUTHOR_DATE=2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	commit := func(content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		git("add", "f")
		git("commit", "-q", "-m", content)
	}
	git("init", "-q")
	commit("one")
	if _, err := FromGit(t.Context(), dir); err == nil || !strings.Contains(err.Error(), "VERSION") {
		t.Errorf("without a VERSION file: FromGit error = %v, want one naming VERSION", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "VERSION"), []byte("0.2.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "VERSION")
	git("commit", "-q", "-m", "release 0.2.0")
	hash := git("rev-parse", "--short", "HEAD")
	if g, err := FromGit(t.Context(), dir); err != nil || g.Version != "0.2.0" || g.Describe != hash || g.Time.Unix() != 1767323045 {
		t.Errorf("on the release's commit: FromGit = %+v, %v, want 0.2.0 dated 2026-01-02T03:04:05Z, described as %s", g, err, hash)
	}
	commit("two")
	commit("three")
	hash = git("rev-parse", "--short", "HEAD")
	if g, err := FromGit(t.Context(), dir); err != nil || g.Version != "0.2.0+git2.g"+hash {
		t.Errorf("after 0.2.0: FromGit = %+v, %v, want 0.2.0+git2.g%s", g, err, hash)
	}
	// A tag changes the build label, not the version.
	git("tag", "v0.2.0-extra")
	if g, err := FromGit(t.Context(), dir); err != nil || g.Version != "0.2.0+git2.g"+hash || g.Describe != "v0.2.0-extra" {
		t.Errorf("tagged: FromGit = %+v, %v, want 0.2.0+git2.g%s labelled v0.2.0-extra", g, err, hash)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if g, err := FromGit(t.Context(), dir); err != nil || g.Version != "0.2.0+git2.g"+hash+".dirty" {
		t.Errorf("dirty: FromGit = %+v, %v, want 0.2.0+git2.g%s.dirty", g, err, hash)
	}
	git("checkout", "-q", "f")
	if err := os.WriteFile(filepath.Join(dir, "VERSION"), []byte("0.3.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("commit", "-q", "-am", "release 0.3.0")
	if g, err := FromGit(t.Context(), dir); err != nil || g.Version != "0.3.0" {
		t.Errorf("on the next release's commit: FromGit = %+v, %v, want 0.3.0", g, err)
	}
	if _, err := FromGit(t.Context(), t.TempDir()); err == nil || !strings.Contains(err.Error(), "git describe") {
		t.Errorf("outside a repository: FromGit error = %v, want one naming git describe", err)
	}
}
