package packaging

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// rootEnv is the environment of the commands run inside the root.
var rootEnv = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C", "DEBIAN_FRONTEND=noninteractive", "HOME=/root"}

// asMother runs a shell script inside the root as the user mother.
func (c *chroot) asMother(script string) string {
	c.t.Helper()
	return c.run(true, "setpriv", "--reuid=mother", "--regid=mother", "--init-groups", "sh", "-c", "umask 077; cd /var/lib/mother; "+script)
}

// startMother starts the installed /usr/bin/mother on /var/lib/mother
// inside the root as the unit would (user mother, no terminal), since no
// systemd runs there. stop sends SIGTERM, waits and returns what she
// printed.
func (c *chroot) startMother() (stop func() string) {
	c.t.Helper()
	cmd := exec.Command("chroot", c.root, "setpriv", "--reuid=mother", "--regid=mother", "--init-groups", "/usr/bin/mother", "/var/lib/mother")
	cmd.Env = rootEnv
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	stopped := false
	stop = func() string {
		if !stopped {
			stopped = true
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		}
		return out.String()
	}
	c.t.Cleanup(func() { stop() })
	return stop
}

// upgradeCheck runs the installed /usr/lib/mother/upgrade-check with a
// health timeout of timeout seconds and returns its exit status and output.
func (c *chroot) upgradeCheck(timeout int) (int, string) {
	c.t.Helper()
	cmd := exec.Command("chroot", c.root, "/usr/lib/mother/upgrade-check")
	cmd.Env = append(rootEnv, fmt.Sprintf("MOTHER_UPGRADE_HEALTH_TIMEOUT=%d", timeout))
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		c.t.Fatal(err)
	}
	return 0, string(out)
}

// freePort is a loopback port nothing listens on now (the root shares the
// host's network).
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestUpgradeChecksAndGoesBack upgrades mother in the root and runs the
// check the postinst runs after restarting her (no systemd runs there:
// the test starts her as the unit would). A new version that changed her
// state and cannot start (a binary that only fails, standing for a broken
// release): the check goes back to the previous binary and the state the
// preinst snapshotted, says so, keeps what it replaced, and keeps the
// lines only appended to the ledger; the previous Mother then starts
// healthy. Installed again, the new version is healthy: the check says so
// and changes nothing, and later refuses to go back.
func TestUpgradeChecksAndGoesBack(t *testing.T) {
	c := newChroot(t)
	b := packages(t)
	c.run(true, "dpkg", "-i", c.copyIn(b.mother[version1+"/amd64"]))
	listen := freePort(t)
	config := `{"adapters": {"term": {"type": "cli"}}, "metrics": {"listen": "` + listen + `"}}` + "\n"
	c.asMother("printf '%s' '" + config + "' > config.json; mkdir -p state/x chicks/usage workspace; " +
		"echo before > state/x/marker.json; echo '{\"n\":1}' > chicks/usage/2026-12-06.jsonl; echo '{\"m\":1}' > workspace/log.jsonl")

	out := c.run(true, "dpkg", "-i", c.copyIn(b.mother[version2+"/amd64"]))
	if !strings.Contains(out, "systemd is not running here, so mother was not restarted") {
		t.Errorf("the upgrade did not say it could not restart mother:\n%s", out)
	}
	for _, p := range []string{"config.json", "state/x/marker.json", "chicks/usage/2026-12-06.jsonl"} {
		if got, want := c.read("/var/lib/mother-upgrade/snapshot/"+p), c.read("/var/lib/mother/"+p); got != want {
			t.Errorf("snapshot of %s = %q, want %q", p, got, want)
		}
	}
	c.gone("/var/lib/mother-upgrade/snapshot/workspace")

	// Not healthy: what the new version changed, then a binary that fails.
	changed := strings.TrimSuffix(config, "}\n") + `, "log": {"level": "debug"}}` + "\n"
	c.asMother("printf '%s' '" + changed + "' > config.json; echo after > state/x/marker.json; echo new > state/x/created.json; " +
		"echo '{\"n\":2}' >> chicks/usage/2026-12-06.jsonl; echo '{\"m\":2}' >> workspace/log.jsonl")
	if err := os.WriteFile(c.path("/usr/bin/mother"), []byte("#!/bin/sh\necho 'mother: this release cannot start' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	stop := c.startMother()
	code, said := c.upgradeCheck(3)
	stop()
	for _, want := range []string{
		"mother: after the upgrade to " + version2 + ", mother is not healthy after 3s: http://" + listen + "/healthz does not answer",
		"mother: went back to the previous mother " + version1 + ": /usr/bin/mother is that binary again",
		"what " + version2 + " changed there is kept in /var/lib/mother/.upgrade-replaced-",
		"mother: systemd is not running here: start mother yourself.",
		"mother: the package still says " + version2,
		"apt install mother=" + version1,
	} {
		if !strings.Contains(said, want) {
			t.Errorf("upgrade-check going back did not say %q:\n%s", want, said)
		}
	}
	if code != 1 {
		t.Errorf("upgrade-check going back exited %d, want 1", code)
	}
	if got := c.run(true, "mother", "--version"); !strings.Contains(got, version1) {
		t.Errorf("mother --version after going back = %q, want %s", got, version1)
	}
	c.wantMode("/usr/bin/mother", 0o755, 0, 0)
	if got := c.read("/var/lib/mother/config.json"); got != config {
		t.Errorf("config.json after going back = %q, want %q", got, config)
	}
	if got := c.read("/var/lib/mother/state/x/marker.json"); got != "before\n" {
		t.Errorf("state/x/marker.json after going back = %q, want the snapshot's", got)
	}
	c.gone("/var/lib/mother/state/x/created.json")
	if got := c.read("/var/lib/mother/chicks/usage/2026-12-06.jsonl"); got != "{\"n\":1}\n{\"n\":2}\n" {
		t.Errorf("the ledger after going back = %q, want both lines (only appended to: kept)", got)
	}
	if got := c.read("/var/lib/mother/workspace/log.jsonl"); got != "{\"m\":1}\n{\"m\":2}\n" {
		t.Errorf("the workspace log after going back = %q, want both lines", got)
	}
	aside, _ := filepath.Glob(c.path("/var/lib/mother/.upgrade-replaced-*"))
	if len(aside) != 1 {
		t.Fatalf("replaced files kept in %v, want one directory", aside)
	}
	for p, want := range map[string]string{"config.json": changed, "state/x/marker.json": "after\n", "state/x/created.json": "new\n"} {
		if got, err := os.ReadFile(filepath.Join(aside[0], p)); err != nil || string(got) != want {
			t.Errorf("kept aside %s = %q, %v; want %q", p, got, err, want)
		}
	}
	uid, _ := c.id("passwd", "mother")
	gid, _ := c.id("group", "mother")
	c.wantMode("/var/lib/mother/config.json", 0o600, uid, gid)
	c.wantMode("/var/lib/mother/state/x/marker.json", 0o600, uid, gid)

	// The previous Mother runs on what was put back.
	stop = c.startMother()
	health := c.run(true, "momctl", "health", "--wait", "60s", "/var/lib/mother")
	logs := stop()
	if !strings.Contains(health, "mother "+version1+" is") {
		t.Errorf("momctl health with the previous mother back = %q, want %s up\nmother's output:\n%s", health, version1, logs)
	}

	// Trying again: the binary kept is the one put back, of version1.
	c.run(true, "dpkg", "-i", "/tmp/"+filepath.Base(b.mother[version2+"/amd64"]))
	if got, want := c.read("/var/lib/mother-upgrade/mother.previous"), readFile(t, binaryOf(version1, "mother")); got != want {
		t.Errorf("after going back and reinstalling, mother.previous is not the mother of %s", version1)
	}
	if got := c.read("/var/lib/mother-upgrade/previous-version"); got != version1+"\n" {
		t.Errorf("after going back and reinstalling, previous-version = %q, want %s", got, version1)
	}
	// Healthy: the new Mother answers /healthz (degraded: no model server
	// answers in the root, which going back would not change).
	stop = c.startMother()
	code, said = c.upgradeCheck(60)
	logs = stop()
	if code != 0 || !strings.Contains(said, "mother "+version2+" is") || !strings.Contains(said, "http://"+listen+"/healthz") {
		t.Fatalf("upgrade-check with a healthy mother = %d:\n%s\nmother's output:\n%s", code, said, logs)
	}
	if got := c.run(true, "mother", "--version"); !strings.Contains(got, version2) {
		t.Errorf("mother --version after a healthy check = %q, want %s", got, version2)
	}

	// Healthy once: a later trouble is not this upgrade's to undo.
	code, said = c.upgradeCheck(1)
	if code != 2 || !strings.Contains(said, "mother "+version2+" was healthy after this upgrade") {
		t.Errorf("upgrade-check after a healthy one, with mother stopped = %d, want 2 and not going back:\n%s", code, said)
	}
	if got := c.run(true, "mother", "--version"); !strings.Contains(got, version2) {
		t.Errorf("mother --version = %q, want %s still", got, version2)
	}
}

// The previous release, 0.1.0: its mother package built from its commit
// with its own tools and scripts (no preinst, and prerm and postrm that
// accept failed-upgrade), as an owner has it installed.
const (
	previousCommit  = "05b3fdcb302cbc3d3815d038374912c2737df861"
	previousVersion = "0.1.0"
)

var (
	previousOnce sync.Once
	previousDeb  string
	previousErr  error
)

// previousPackage builds the mother package of 0.1.0 once per test binary:
// a shared clone of this repository checked out at previousCommit, whose
// binaries and internal/mkpackages make it.
func previousPackage(t *testing.T) string {
	t.Helper()
	root := moduleRoot(t)
	previousOnce.Do(func() {
		previousErr = func() error {
			src := filepath.Join(buildDir, "src-"+previousVersion)
			run := func(dir string, env []string, name string, args ...string) error {
				cmd := exec.Command(name, args...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), env...)
				if out, err := cmd.CombinedOutput(); err != nil {
					return fmt.Errorf("%s %v: %v\n%s", name, args, err, out)
				}
				return nil
			}
			if err := run(buildDir, nil, "git", "clone", "--quiet", "--shared", "--no-checkout", root, src); err != nil {
				return err
			}
			if err := run(src, nil, "git", "checkout", "--quiet", "--detach", previousCommit); err != nil {
				return err
			}
			bin := filepath.Join(buildDir, "bin", previousVersion)
			env := []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64"}
			for _, name := range []string{"mother", "momctl"} {
				if err := run(src, env, "go", "build", "-trimpath", "-o", filepath.Join(bin, name+"-linux-amd64"), "-ldflags", "-s -w -X main.version="+previousVersion, "./cmd/"+name); err != nil {
					return err
				}
			}
			tool := filepath.Join(buildDir, "mkpackages-"+previousVersion)
			if err := run(src, env, "go", "build", "-o", tool, "./internal/mkpackages"); err != nil {
				return err
			}
			out := filepath.Join(buildDir, "deb", previousVersion)
			if err := run(src, nil, tool, "-root", src, "-bin", bin, "-arch", "amd64", "-out", out, "-version", previousVersion); err != nil {
				return err
			}
			previousDeb = filepath.Join(out, "mother_"+previousVersion+"_amd64.deb")
			return nil
		}()
	})
	if previousErr != nil {
		t.Fatalf("build the 0.1.0 package: %v", previousErr)
	}
	return previousDeb
}

// healthz waits up to a minute for /healthz at listen to say Mother is up
// (ok or degraded) and returns its body; it asks from the host, which
// shares the root's network, so it needs nothing inside the root.
func healthz(t *testing.T, listen string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last string
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + listen + "/healthz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = string(body)
			if strings.Contains(last, `"status":"ok"`) || strings.Contains(last, `"status":"degraded"`) {
				return last
			}
		} else {
			last = err.Error()
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("/healthz at %s did not say Mother is up within a minute: %s", listen, last)
	return ""
}

// TestDowngrade installs the newer package, lets its Mother write her data
// directory, and installs older packages over it with dpkg:
//   - onto a data directory from the future (format 99), an older package
//     with these scripts: the installed prerm's mother rollback refuses
//     with its sentence, the older prerm's failed-upgrade refuses too, and
//     dpkg gives up: the newer package stays installed and runs;
//   - 0.1.0, the real previous package: mother rollback puts the data
//     directory back for it (format 1 to 0) and 0.1.0 runs on it;
//   - 0.1.0 onto a directory from the future: 0.1.0's scripts cannot
//     refuse (they accept failed-upgrade), so dpkg installs it anyway; the
//     postrm says so and masks the service, and reinstalling the newer
//     package unmasks it.
func TestDowngrade(t *testing.T) {
	c := newChroot(t)
	b := packages(t)
	previous := c.copyIn(previousPackage(t))
	newer := c.copyIn(b.mother[version2+"/amd64"])
	older := c.copyIn(b.mother[version1+"/amd64"])
	status := func() string { return c.run(true, "dpkg-query", "-W", "-f=${Version} ${db:Status-Abbrev}", "mother") }

	c.run(true, "dpkg", "-i", newer)
	listen := freePort(t)
	c.asMother(`printf '%s\n' '{"adapters": {"term": {"type": "cli"}}, "metrics": {"listen": "` + listen + `"}}' > config.json`)
	stop := c.startMother()
	healthz(t, listen)
	logs := stop()
	format := c.read("/var/lib/mother/state/format.json")
	var f struct {
		Format int `json:"format"`
	}
	if err := json.Unmarshal([]byte(format), &f); err != nil || f.Format != 1 {
		t.Fatalf("state/format.json after mother %s ran = %q, %v; want format 1\n%s", version2, format, err, logs)
	}

	// Refused: the directory is from the future.
	const future = `{"format": 99, "release": "9.0.0"}`
	c.asMother("printf '%s\\n' '" + future + "' > state/format.json")
	out := c.run(false, "dpkg", "-i", older)
	for _, want := range []string{
		"mother: the downgrade to " + version1 + " is refused: mother " + version2 + " stays installed.",
		"mother: mother " + version2 + " refused the downgrade to " + version1 + " (above): it stays installed.",
		"mother: mother rollback: cannot roll back /var/lib/mother to Mother 0.2.0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the refused downgrade did not say %q:\n%s", want, out)
		}
	}
	if got := status(); got != version2+" ii " {
		t.Errorf("after the refused downgrade: %q, want %s installed (ii)", got, version2)
	}
	if got := c.run(true, "mother", "--version"); !strings.Contains(got, version2) {
		t.Errorf("mother --version after the refused downgrade = %q, want %s", got, version2)
	}
	if got := c.read("/var/lib/mother/state/format.json"); got != future+"\n" {
		t.Errorf("state/format.json after the refused downgrade = %q, want it untouched", got)
	}
	// Still working, once the directory is the one it wrote.
	c.asMother("printf '%s' '" + format + "' > state/format.json")
	stop = c.startMother()
	if got := healthz(t, listen); !strings.Contains(got, version2) {
		t.Errorf("/healthz after the refused downgrade = %s, want %s", got, version2)
	}
	stop()

	// Restored: down to 0.1.0.
	out = c.run(true, "dpkg", "-i", previous)
	if !strings.Contains(out, "mother: rolled /var/lib/mother back for Mother 0.1.0") {
		t.Errorf("the downgrade to 0.1.0 did not say mother rollback put the data back:\n%s", out)
	}
	if got := status(); got != previousVersion+" ii " {
		t.Errorf("after the downgrade: %q, want %s installed", got, previousVersion)
	}
	c.gone("/var/lib/mother/state/format.json")
	stop = c.startMother()
	if got := healthz(t, listen); !strings.Contains(got, previousVersion) {
		t.Errorf("/healthz of 0.1.0 after the downgrade = %s", got)
	}
	stop()

	// 0.1.0 onto a directory from the future: dpkg goes on; masked.
	c.run(true, "dpkg", "-i", newer)
	c.asMother("printf '%s\\n' '" + future + "' > state/format.json")
	out = c.run(true, "dpkg", "-i", previous)
	for _, want := range []string{
		"mother: the downgrade to " + previousVersion + " is refused: mother " + version2 + " stays installed.",
		"mother: dpkg installed " + previousVersion + " although its downgrade was refused",
		"Install " + version2 + " again (apt install mother=" + version2 + ")",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the downgrade to 0.1.0 dpkg made anyway did not say %q:\n%s", want, out)
		}
	}
	const mask = "/etc/systemd/system/mother.service"
	if target, err := os.Readlink(c.path(mask)); err != nil || target != "/dev/null" {
		t.Errorf("%s = %q, %v; want a link to /dev/null (masked)", mask, target, err)
	}
	c.run(true, "dpkg", "-i", newer)
	c.gone(mask)
	if got := c.read("/var/lib/mother/state/format.json"); got != future+"\n" {
		t.Errorf("state/format.json = %q, want it untouched throughout", got)
	}
}
