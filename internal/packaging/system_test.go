package packaging

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/mother-chat/mother/internal/testenv"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
)

// The two versions the system tests build, to install one and upgrade to
// the other (or downgrade). Both are release 0.2.0 to the scripts (the
// release mother rollback is given).
const (
	version1 = "0.2.0~pkgtest1"
	version2 = "0.2.0~pkgtest2"
)

// built holds the packages the system tests share, built once per test
// binary into a directory removed by TestMain.
type built struct {
	mother   map[string]string // "VERSION/ARCH" -> .deb
	chick    map[string]string // VERSION -> .deb
	imageTag string            // the tag of the image inside mother-chick
}

var (
	buildDir   string
	buildOnce  sync.Once
	buildErr   error
	buildState built
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mother-packaging-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buildDir = dir
	code := m.Run()
	if buildState.imageTag != "" {
		exec.Command("docker", "rmi", buildState.imageTag).Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func moduleRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	return root
}

// packages builds mother for amd64 at both versions and for arm64 at the
// first, and mother-chick at both versions, from real binaries and a real
// chick image (tagged for this run, so that loading it back disturbs no
// other image), with the tool `make packages` runs (internal/mkpackages),
// built without the race detector: packing tens of megabytes under -race
// would take minutes. Each run's SHA256SUMS is checked with sha256sum.
func packages(t *testing.T) built {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.Unavailable(t, "go not in PATH")
	}
	if _, err := exec.LookPath("sha256sum"); err != nil {
		testenv.Unavailable(t, "sha256sum not installed")
	}
	image := hatcherytest.BuildImage(t)
	root := moduleRoot(t)
	buildOnce.Do(func() {
		buildErr = func() error {
			b := built{mother: map[string]string{}, chick: map[string]string{}}
			var id [4]byte
			rand.Read(id[:])
			tag := "mother-chick:pkgtest-" + hex.EncodeToString(id[:])
			tarball := filepath.Join(buildDir, "image.tar")
			for _, args := range [][]string{{"tag", image, tag}, {"save", "-o", tarball, tag}, {"rmi", tag}} {
				if out, err := exec.Command("docker", args...).CombinedOutput(); err != nil {
					return fmt.Errorf("docker %v: %v\n%s", args, err, out)
				}
			}
			b.imageTag = tag
			goBuild := func(out, pkg, arch, version string) error {
				args := []string{"build", "-trimpath", "-o", out}
				if version != "" {
					args = append(args, "-ldflags", "-s -w -X main.version="+version)
				}
				cmd := exec.Command(goBin, append(args, pkg)...)
				cmd.Dir = root
				cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
				if o, err := cmd.CombinedOutput(); err != nil {
					return fmt.Errorf("go build %s for %s: %v\n%s", pkg, arch, err, o)
				}
				return nil
			}
			tool := filepath.Join(buildDir, "mkpackages")
			if err := goBuild(tool, "./internal/mkpackages", "amd64", ""); err != nil {
				return err
			}
			for _, va := range [][2]string{{version1, "amd64,arm64"}, {version2, "amd64"}} {
				v, arches := va[0], va[1]
				bin := filepath.Join(buildDir, "bin", v)
				for _, arch := range strings.Split(arches, ",") {
					for _, name := range []string{"mother", "momctl"} {
						if err := goBuild(filepath.Join(bin, name+"-linux-"+arch), "./cmd/"+name, arch, v); err != nil {
							return err
						}
					}
				}
				out := filepath.Join(buildDir, "deb", v)
				cmd := exec.Command(tool, "-root", root, "-bin", bin, "-arch", arches, "-chick-image", tarball, "-out", out, "-version", v)
				if o, err := cmd.CombinedOutput(); err != nil {
					return fmt.Errorf("mkpackages: %v\n%s", err, o)
				}
				check := exec.Command("sha256sum", "-c", "SHA256SUMS")
				check.Dir = out
				o, err := check.CombinedOutput()
				if err != nil {
					return fmt.Errorf("sha256sum -c SHA256SUMS: %v\n%s", err, o)
				}
				for _, arch := range strings.Split(arches, ",") {
					name := "mother_" + v + "_" + arch + ".deb"
					if !strings.Contains(string(o), name+": OK") {
						return fmt.Errorf("SHA256SUMS does not cover %s:\n%s", name, o)
					}
					b.mother[v+"/"+arch] = filepath.Join(out, name)
				}
				b.chick[v] = filepath.Join(out, "mother-chick_"+v+"_amd64.deb")
				if !strings.Contains(string(o), filepath.Base(b.chick[v])+": OK") {
					return fmt.Errorf("SHA256SUMS does not cover %s:\n%s", b.chick[v], o)
				}
			}
			buildState = b
			return nil
		}()
	})
	if buildErr != nil {
		t.Fatalf("build the packages: %v", buildErr)
	}
	return buildState
}

// TestLintian runs lintian on every package: no tag may remain (errors,
// warnings, information) except those overridden, with a reason, in the
// package's lintian overrides, and every override must still be needed.
func TestLintian(t *testing.T) {
	lintian, err := exec.LookPath("lintian")
	if err != nil {
		testenv.Unavailable(t, "lintian not installed (.ci/ensure-tools installs it as root)")
	}
	b := packages(t)
	debs := []string{b.mother[version1+"/amd64"], b.mother[version1+"/arm64"], b.chick[version1]}
	// The verdict is read from the output: with --show-overrides, lintian
	// 2.116 exits 2 on an overridden error whatever --fail-on says, so
	// --fail-on none makes the exit status mean "lintian ran".
	args := append([]string{"--display-info", "--show-overrides", "--fail-on", "none"}, debs...)
	out, err := exec.Command(lintian, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("lintian: %v\n%s", err, out)
	}
	used := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case line == "" || line == "running with root privileges is not recommended!" || strings.HasPrefix(line, "N: "):
			// N: lines repeat the overrides' comments.
		case strings.HasPrefix(line, "O: "):
			if f := strings.Fields(line); len(f) >= 3 {
				used[f[1]+" "+f[2]] = true
			}
		default:
			t.Errorf("lintian: %s", line)
		}
	}
	for _, line := range strings.Split(motherOverrides("amd64")+motherOverrides("arm64")+chickOverrides, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !used[line] {
			t.Errorf("override %q is not used by lintian any more: remove it", line)
		}
	}
}

// TestChecksums writes SHA256SUMS and lets sha256sum check it.
func TestChecksums(t *testing.T) {
	t.Parallel()
	sum, err := exec.LookPath("sha256sum")
	if err != nil {
		testenv.Unavailable(t, "sha256sum not installed")
	}
	dir := t.TempDir()
	for name, body := range map[string]string{"a_1_amd64.deb": "one", "b_1_arm64.deb": "two"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path, err := WriteChecksums(dir, []string{"b_1_arm64.deb", "a_1_amd64.deb"})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sum, "-c", filepath.Base(path))
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "a_1_amd64.deb: OK") || !strings.Contains(string(out), "b_1_arm64.deb: OK") {
		t.Errorf("sha256sum -c: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "a_1_amd64.deb"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("sha256sum -c accepted a changed file:\n%s", out)
	}
}

// TestUnitAdaptation refuses a unit that lost a line it adapts.
func TestUnitAdaptation(t *testing.T) {
	t.Parallel()
	src := Source{Root: moduleRoot(t)}
	unit, err := src.unit()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ExecStart=/usr/bin/mother /var/lib/mother\n", "StateDirectoryMode=0750\n", "EnvironmentFile=-/etc/mother/mother.env\n"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("packaged unit lacks %q", want)
		}
	}
	if strings.Contains(string(unit), "/usr/local/bin") {
		t.Error("packaged unit still names /usr/local/bin")
	}
	fake := t.TempDir()
	if err := os.MkdirAll(filepath.Join(fake, "deploy", "systemd"), 0o755); err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(unit), "StateDirectoryMode=0750", "StateDirectoryMode=0700", 1)
	changed = strings.Replace(changed, "/usr/bin/mother", "/opt/mother/bin/mother", 1)
	if err := os.WriteFile(filepath.Join(fake, "deploy", "systemd", "mother.service"), []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (Source{Root: fake}).unit(); err == nil || !strings.Contains(err.Error(), "ExecStart=/usr/local/bin/mother") {
		t.Errorf("unit() of a unit with another ExecStart = %v, want an error naming the line", err)
	}
}

// chroot is a throwaway Debian bookworm root.
type chroot struct {
	t    *testing.T
	root string
}

// newChroot unpacks a minimal bookworm (debootstrap --variant=minbase,
// with adduser) into a temporary directory. The debootstrap result is kept
// as a tarball in the user's cache directory (MOTHER_CACHE overrides it),
// so only the first run downloads anything.
func newChroot(t *testing.T) *chroot {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Unavailable(t, "the install test needs root (chroot, dpkg)")
	}
	debootstrap, err := exec.LookPath("debootstrap")
	if err != nil {
		testenv.Unavailable(t, "debootstrap not installed (.ci/ensure-tools installs it as root)")
	}
	cache := os.Getenv("MOTHER_CACHE")
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			t.Fatal(err)
		}
		cache = filepath.Join(dir, "mother")
	}
	tarball := filepath.Join(cache, "debootstrap-bookworm-amd64-minbase-adduser.tar")
	if _, err := os.Stat(tarball); err != nil {
		if err := os.MkdirAll(cache, 0o755); err != nil {
			t.Fatal(err)
		}
		tmp, err := os.MkdirTemp(cache, "debootstrap-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		t.Logf("debootstrap bookworm into %s (once; cached as %s)", tmp, tarball)
		cmd := exec.Command(debootstrap, "--variant=minbase", "--include=adduser", "--arch=amd64", "bookworm", tmp, "http://deb.debian.org/debian")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("debootstrap: %v\n%s", err, out)
		}
		// The root directory is the temporary directory (0700): the
		// tarball's "./" must say 0755, or only root could use the root.
		if err := os.Chmod(tmp, 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("tar", "-C", tmp, "-cf", tarball+".tmp", ".").CombinedOutput(); err != nil {
			t.Fatalf("tar: %v\n%s", err, out)
		}
		if err := os.Rename(tarball+".tmp", tarball); err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	if out, err := exec.Command("tar", "-C", root, "-xf", tarball).CombinedOutput(); err != nil {
		t.Fatalf("unpack the cached root: %v\n%s", err, out)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	return &chroot{t: t, root: root}
}

// run runs a command inside the root and returns its output; failing
// commands fail the test unless ok is false.
func (c *chroot) run(mustSucceed bool, args ...string) string {
	c.t.Helper()
	cmd := exec.Command("chroot", append([]string{c.root}, args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C", "DEBIAN_FRONTEND=noninteractive", "HOME=/root"}
	out, err := cmd.CombinedOutput()
	if err != nil && mustSucceed {
		c.t.Fatalf("chroot %v: %v\n%s", args, err, out)
	}
	if err == nil && !mustSucceed {
		c.t.Fatalf("chroot %v succeeded, want a failure:\n%s", args, out)
	}
	return string(out)
}

// copyIn copies the host file into the root's /tmp and returns its path
// inside the root.
func (c *chroot) copyIn(path string) string {
	c.t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		c.t.Fatal(err)
	}
	inside := "/tmp/" + filepath.Base(path)
	if err := os.WriteFile(filepath.Join(c.root, inside), b, 0o644); err != nil {
		c.t.Fatal(err)
	}
	return inside
}

func (c *chroot) path(p string) string { return filepath.Join(c.root, p) }

// id looks a user or group up in the root's database.
func (c *chroot) id(db, name string) (int, bool) {
	c.t.Helper()
	out, err := exec.Command("chroot", c.root, "getent", db, name).Output()
	if err != nil {
		return 0, false
	}
	var n int
	fields := strings.Split(strings.TrimSpace(string(out)), ":")
	fmt.Sscan(fields[2], &n)
	return n, true
}

// wantMode checks a path's mode and owner inside the root.
func (c *chroot) wantMode(p string, mode os.FileMode, uid, gid int) {
	c.t.Helper()
	fi, err := os.Stat(c.path(p))
	if err != nil {
		c.t.Errorf("%s: %v", p, err)
		return
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != mode || int(st.Uid) != uid || int(st.Gid) != gid {
		c.t.Errorf("%s: mode %04o owner %d:%d, want %04o %d:%d", p, fi.Mode().Perm(), st.Uid, st.Gid, mode, uid, gid)
	}
}

func (c *chroot) read(p string) string {
	c.t.Helper()
	b, err := os.ReadFile(c.path(p))
	if err != nil {
		c.t.Fatal(err)
	}
	return string(b)
}

func (c *chroot) gone(p string) {
	c.t.Helper()
	if _, err := os.Lstat(c.path(p)); err == nil {
		c.t.Errorf("%s still exists", p)
	}
}

// TestInstallUpgradeRemove installs mother and mother-chick on a
// throwaway bookworm root with dpkg (no systemd runs there), writes a
// configuration and data, upgrades both packages to a second version,
// removes them (data and configuration stay) and purges them (they go).
func TestInstallUpgradeRemove(t *testing.T) {
	c := newChroot(t)
	b := packages(t)

	// Install.
	out := c.run(true, "dpkg", "-i", c.copyIn(b.mother[version1+"/amd64"]))
	if !strings.Contains(out, "systemctl enable --now mother") {
		t.Errorf("first install did not say what to do next:\n%s", out)
	}
	uid, ok := c.id("passwd", "mother")
	if !ok {
		t.Fatal("no user mother after install")
	}
	gid, ok := c.id("group", "mother")
	if !ok {
		t.Fatal("no group mother after install")
	}
	if uid >= 1000 || uid == 0 {
		t.Errorf("mother's uid %d is not a system uid", uid)
	}
	passwd := c.run(true, "getent", "passwd", "mother")
	if !strings.HasSuffix(strings.TrimSpace(passwd), ":/var/lib/mother:/usr/sbin/nologin") {
		t.Errorf("passwd entry %q: want home /var/lib/mother and shell /usr/sbin/nologin", passwd)
	}
	c.wantMode("/var/lib/mother", 0o750, uid, gid)
	c.wantMode("/etc/mother", 0o750, 0, gid)
	c.wantMode("/etc/mother/mother.env", 0o640, 0, gid)
	c.wantMode("/usr/bin/mother", 0o755, 0, 0)
	if got := c.run(true, "mother", "--version"); !strings.Contains(got, version1) {
		t.Errorf("mother --version = %q, want %s", got, version1)
	}
	if got := c.run(true, "momctl", "--version"); !strings.Contains(got, version1) {
		t.Errorf("momctl --version = %q, want %s", got, version1)
	}
	unit := c.read("/lib/systemd/system/mother.service")
	if !strings.Contains(unit, "ExecStart=/usr/bin/mother /var/lib/mother\n") || !strings.Contains(unit, "StateDirectoryMode=0750\n") {
		t.Errorf("installed unit:\n%s", unit)
	}
	verifyUnit(t, unit, c.path("/usr/bin/mother"))
	if got := c.read("/var/lib/dpkg/info/mother.conffiles"); strings.TrimSpace(got) != "/etc/mother/mother.env" {
		t.Errorf("conffiles = %q, want /etc/mother/mother.env", got)
	}
	// The shell completions, where Debian's shells look: bash's loads
	// and completes the commands' own subcommands.
	for _, cmd := range []string{"mother", "momctl"} {
		script := strings.ReplaceAll(`. /usr/share/bash-completion/completions/CMD
complete -p CMD
fn=$(complete -p CMD | sed -n 's/.*-F \([^ ]*\).*/\1/p')
COMP_WORDS=(CMD c); COMP_CWORD=1; COMPREPLY=(); "$fn"
printf '%s\n' "${COMPREPLY[*]}"`, "CMD", cmd)
		got := c.run(true, "bash", "--norc", "--noprofile", "-c", script)
		if !strings.Contains(got, "complete -F") || !strings.Contains(got, "completion") {
			t.Errorf("bash completion of %s after install:\n%s", cmd, got)
		}
		c.wantMode("/usr/share/zsh/vendor-completions/_"+cmd, 0o644, 0, 0)
		c.wantMode("/usr/share/fish/vendor_completions.d/"+cmd+".fish", 0o644, 0, 0)
	}

	// What an operator adds: a configuration, data, a token.
	const config = `{"adapters": {"term": {"type": "cli"}}}` + "\n"
	c.run(true, "setpriv", "--reuid=mother", "--regid=mother", "--init-groups", "sh", "-c", "umask 077; printf '%s' '"+config+"' > /var/lib/mother/config.json; mkdir /var/lib/mother/store; echo kept > /var/lib/mother/store/data")
	if got := c.run(true, "setpriv", "--reuid=mother", "--regid=mother", "--init-groups", "sh", "-c", "mother --check-config /var/lib/mother && echo config-ok"); !strings.Contains(got, "config-ok") {
		t.Errorf("mother --check-config as user mother: %s", got)
	}
	env := c.read("/etc/mother/mother.env") + "DISCORD_BOT_TOKEN=operator-edit\n"
	if err := os.WriteFile(c.path("/etc/mother/mother.env"), []byte(env), 0o640); err != nil {
		t.Fatal(err)
	}

	// Upgrade.
	out = c.run(true, "dpkg", "-i", c.copyIn(b.mother[version2+"/amd64"]))
	if strings.Contains(out, "systemctl enable --now mother") {
		t.Errorf("the upgrade repeated the first-install message:\n%s", out)
	}
	if got := c.run(true, "dpkg-query", "-W", "-f=${Version}", "mother"); got != version2 {
		t.Errorf("installed version after upgrade = %q, want %s", got, version2)
	}
	if got := c.run(true, "mother", "--version"); !strings.Contains(got, version2) {
		t.Errorf("mother --version after upgrade = %q, want %s", got, version2)
	}
	if uid2, _ := c.id("passwd", "mother"); uid2 != uid {
		t.Errorf("mother's uid changed on upgrade: %d, was %d", uid2, uid)
	}
	if got := c.read("/var/lib/mother/config.json"); got != config {
		t.Errorf("config.json after upgrade = %q, want %q", got, config)
	}
	// The preinst kept the previous binary and a snapshot of the state.
	if !strings.Contains(out, "systemd is not running here, so mother was not restarted") {
		t.Errorf("the upgrade did not say it could not restart mother:\n%s", out)
	}
	if got, want := c.read("/var/lib/mother-upgrade/mother.previous"), readFile(t, binaryOf(version1, "mother")); got != want {
		t.Errorf("/var/lib/mother-upgrade/mother.previous is not the mother of %s", version1)
	}
	if got := c.read("/var/lib/mother-upgrade/previous-version"); got != version1+"\n" {
		t.Errorf("previous-version = %q, want %s", got, version1)
	}
	if got := c.read("/var/lib/mother-upgrade/snapshot/config.json"); got != config {
		t.Errorf("snapshot's config.json = %q, want %q", got, config)
	}
	c.wantMode("/var/lib/mother-upgrade/snapshot/config.json", 0o600, uid, gid)
	c.wantMode("/var/lib/mother-upgrade/snapshot", 0o750, 0, gid)
	c.gone("/var/lib/mother-upgrade/snapshot/store")
	if got := c.read("/var/lib/mother/store/data"); got != "kept\n" {
		t.Errorf("data after upgrade = %q", got)
	}
	if got := c.read("/etc/mother/mother.env"); got != env {
		t.Errorf("mother.env after upgrade lost the operator's edit:\n%s", got)
	}
	c.wantMode("/var/lib/mother", 0o750, uid, gid)
	c.wantMode("/var/lib/mother/config.json", 0o600, uid, gid)
	c.wantMode("/etc/mother", 0o750, 0, gid)
	c.wantMode("/etc/mother/mother.env", 0o640, 0, gid)

	// Remove: the programs go, the data and the configuration stay.
	c.run(true, "dpkg", "-r", "mother")
	if got := c.run(true, "dpkg-query", "-W", "-f=${db:Status-Abbrev}", "mother"); strings.TrimSpace(got) != "rc" {
		t.Errorf("status after remove = %q, want rc (configuration files kept)", got)
	}
	c.gone("/usr/bin/mother")
	c.gone("/lib/systemd/system/mother.service")
	c.gone("/usr/share/bash-completion/completions/momctl")
	if got := c.read("/var/lib/mother/config.json"); got != config {
		t.Errorf("config.json after remove = %q", got)
	}
	if got := c.read("/etc/mother/mother.env"); got != env {
		t.Errorf("mother.env after remove = %q", got)
	}
	c.wantMode("/var/lib/mother", 0o750, uid, gid)

	// Reinstall on the kept data, then purge: everything goes but the user.
	c.run(true, "dpkg", "-i", "/tmp/"+filepath.Base(b.mother[version2+"/amd64"]))
	if got := c.read("/etc/mother/mother.env"); got != env {
		t.Errorf("mother.env after reinstall = %q", got)
	}
	c.run(true, "dpkg", "-P", "mother")
	c.run(false, "dpkg-query", "-W", "mother")
	c.gone("/etc/mother")
	c.gone("/var/lib/mother")
	c.gone("/var/lib/mother-upgrade")
	c.gone("/usr/bin/momctl")
	// dpkg-statoverride --list exits 1 when there is no override left.
	if got, _ := exec.Command("chroot", c.root, "dpkg-statoverride", "--list").CombinedOutput(); strings.Contains(string(got), "/etc/mother") {
		t.Errorf("stat overrides left after purge:\n%s", got)
	}
	if _, ok := c.id("passwd", "mother"); !ok {
		t.Error("purge removed the user mother (it stays by design)")
	}

	t.Run("chick", func(t *testing.T) {
		c.t = t
		out := c.run(true, "dpkg", "-i", c.copyIn(b.chick[version1]))
		if !strings.Contains(out, "mother-chick-load") {
			t.Errorf("install did not say how to load the image:\n%s", out)
		}
		c.run(true, "dpkg", "-i", c.copyIn(b.chick[version2]))
		if got := c.run(true, "dpkg-query", "-W", "-f=${Version}", "mother-chick"); got != version2 {
			t.Errorf("mother-chick after upgrade = %q, want %s", got, version2)
		}
		for _, p := range []string{"/usr/share/mother-chick/inference/daemon.json", "/usr/share/mother-chick/inference/docker-override.conf"} {
			if got, want := c.read(p), readFile(t, filepath.Join(moduleRoot(t), "deploy", "inference", filepath.Base(p))); got != want {
				t.Errorf("%s differs from deploy/inference", p)
			}
		}
		c.wantMode("/usr/sbin/mother-chick-load", 0o755, 0, 0)
		c.wantMode("/usr/sbin/mother-docker-tls", 0o755, 0, 0)
		if got := c.run(true, "mother-docker-tls", "--help"); !strings.Contains(got, "usage: gen-docker-tls.sh") && !strings.Contains(got, "SERVER_DNS_NAME") {
			t.Errorf("mother-docker-tls --help:\n%s", got)
		}
		// The installed helper loads the installed tarball into the host's
		// engine (the root has no Docker).
		hatcherytest.Docker(t)
		load := exec.Command("sh", c.path("/usr/sbin/mother-chick-load"), c.path("/usr/share/mother-chick/mother-chick-image.tar"))
		if out, err := load.CombinedOutput(); err != nil || !strings.Contains(string(out), "Loaded image: "+b.imageTag) {
			t.Errorf("mother-chick-load: %v\n%s", err, out)
		}
		if out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Config.Entrypoint}}", b.imageTag).CombinedOutput(); err != nil || !strings.Contains(string(out), "/usr/local/bin/chick") {
			t.Errorf("loaded image %s: %v\n%s", b.imageTag, err, out)
		}
		c.run(true, "dpkg", "-P", "mother-chick")
		c.gone("/usr/share/mother-chick")
		c.gone("/usr/sbin/mother-chick-load")
	})
}

// binaryOf is the host path of a binary the packages of version hold.
func binaryOf(version, name string) string {
	return filepath.Join(buildDir, "bin", version, name+"-linux-amd64")
}

// verifyUnit runs systemd-analyze verify on the installed unit, its
// ExecStart pointed at the installed binary (verify wants it to exist).
func verifyUnit(t *testing.T, unit, binary string) {
	t.Helper()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		testenv.Unavailable(t, "systemd-analyze not installed (Debian package systemd)")
	}
	path := filepath.Join(t.TempDir(), "mother.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(unit, "/usr/bin/mother", binary)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", path).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("systemd-analyze verify of the packaged unit: %v\n%s", err, out)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
