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
		name     string
		describe string
		commits  int
		want     string
	}{
		{"on a tag", "v1.2.3-0-gabc1234", 10, "1.2.3"},
		{"tag without v", "1.2.3-0-gabc1234", 10, "1.2.3"},
		{"after a tag", "v1.2.3-4-gabc1234", 10, "1.2.3+4.gabc1234"},
		{"pre-release tag", "v1.2.3-rc1-0-gabc1234", 10, "1.2.3~rc1"},
		{"after a pre-release", "v1.2.3-rc1-2-gabc1234", 10, "1.2.3~rc1+2.gabc1234"},
		{"dirty on a tag", "v1.2.3-0-gabc1234-dirty", 10, "1.2.3+0.gabc1234.dirty"},
		{"dirty after a tag", "v1.2.3-4-gabc1234-dirty", 10, "1.2.3+4.gabc1234.dirty"},
		{"no tag", "f7e5be3", 388, "0~git388.gf7e5be3"},
		{"no tag, dirty", "f7e5be3-dirty\n", 388, "0~git388.gf7e5be3.dirty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DebianVersion(tc.describe, tc.commits)
			if err != nil || got != tc.want {
				t.Errorf("DebianVersion(%q, %d) = %q, %v, want %q", tc.describe, tc.commits, got, err, tc.want)
			}
		})
	}
}

func TestDebianVersionRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		describe string
		commits  int
		want     string
	}{
		{"", 1, "printed nothing"},
		{"release_one-0-gabc1234", 1, `tag "release_one"`},
		{"vnext-3-gabc1234", 1, `tag "vnext"`},
		{"not a describe", 1, "cannot read"},
		{"abc1234", 0, "commit count"},
	} {
		if got, err := DebianVersion(tc.describe, tc.commits); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DebianVersion(%q, %d) = %q, %v, want an error with %q", tc.describe, tc.commits, got, err, tc.want)
		}
	}
}

// TestDebianVersionOrder checks with dpkg itself that the versions made
// along a history only grow, so each build upgrades the one before.
func TestDebianVersionOrder(t *testing.T) {
	t.Parallel()
	dpkg, err := exec.LookPath("dpkg")
	if err != nil {
		testenv.Unavailable(t, "dpkg not installed")
	}
	history := []struct {
		describe string
		commits  int
	}{
		{"abc1230", 5},
		{"abc1231-dirty", 5},
		{"abc1232", 6},
		{"v0.1.0-rc1-0-gabc1233", 7},
		{"v0.1.0-rc1-1-gabc1234", 8},
		{"v0.1.0-0-gabc1235", 9},
		{"v0.1.0-0-gabc1235-dirty", 9},
		{"v0.1.0-1-gabc1236", 10},
		{"v0.1.0-12-gabc1237", 21},
		{"v0.1.1-0-gabc1238", 22},
		{"v0.10.0-0-gabc1239", 23},
	}
	var prev string
	for _, h := range history {
		v, err := DebianVersion(h.describe, h.commits)
		if err != nil {
			t.Fatal(err)
		}
		if prev != "" {
			if out, err := exec.Command(dpkg, "--compare-versions", v, "gt", prev).CombinedOutput(); err != nil {
				t.Errorf("dpkg --compare-versions %s gt %s: %v %s", v, prev, err, out)
			}
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
	commit("two")
	g, err := FromGit(t.Context(), dir)
	hash := git("rev-parse", "--short", "HEAD")
	if err != nil || g.Version != "0~git2.g"+hash || g.Describe != hash || g.Time.Unix() != 1767323045 {
		t.Errorf("untagged: FromGit = %+v, %v, want 0~git2.g%s dated 2026-01-02T03:04:05Z", g, err, hash)
	}
	git("tag", "v0.2.0")
	if g, err := FromGit(t.Context(), dir); err != nil || g.Version != "0.2.0" || g.Describe != "v0.2.0" {
		t.Errorf("on v0.2.0: FromGit = %+v, %v, want 0.2.0", g, err)
	}
	commit("three")
	hash = git("rev-parse", "--short", "HEAD")
	if g, err := FromGit(t.Context(), dir); err != nil || g.Version != "0.2.0+1.g"+hash {
		t.Errorf("after v0.2.0: FromGit = %+v, %v, want 0.2.0+1.g%s", g, err, hash)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if g, err := FromGit(t.Context(), dir); err != nil || g.Version != "0.2.0+1.g"+hash+".dirty" {
		t.Errorf("dirty: FromGit = %+v, %v, want 0.2.0+1.g%s.dirty", g, err, hash)
	}
	if _, err := FromGit(t.Context(), t.TempDir()); err == nil || !strings.Contains(err.Error(), "git describe") {
		t.Errorf("outside a repository: FromGit error = %v, want one naming git describe", err)
	}
}
