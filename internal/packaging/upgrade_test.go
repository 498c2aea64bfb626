package packaging

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
// the test starts her as the unit would). Healthy: the check says so and
// changes nothing. Then a new version that changed her state and cannot
// start (a binary that only fails, standing for a broken release): the
// check goes back to the previous binary and the state the preinst
// snapshotted, says so, keeps what it replaced, and keeps the lines only
// appended to the ledger; the previous Mother then starts healthy.
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

	// Healthy: the new Mother answers /healthz (degraded: no model server
	// answers in the root, which going back would not change).
	stop := c.startMother()
	code, said := c.upgradeCheck(60)
	logs := stop()
	if code != 0 || !strings.Contains(said, "mother "+version2+" is") || !strings.Contains(said, "http://"+listen+"/healthz") {
		t.Fatalf("upgrade-check with a healthy mother = %d:\n%s\nmother's output:\n%s", code, said, logs)
	}
	if got := c.run(true, "mother", "--version"); !strings.Contains(got, version2) {
		t.Errorf("mother --version after a healthy check = %q, want %s", got, version2)
	}

	// Not healthy: what the new version changed, then a binary that fails.
	changed := strings.TrimSuffix(config, "}\n") + `, "log": {"level": "debug"}}` + "\n"
	c.asMother("printf '%s' '" + changed + "' > config.json; echo after > state/x/marker.json; echo new > state/x/created.json; " +
		"echo '{\"n\":2}' >> chicks/usage/2026-12-06.jsonl; echo '{\"m\":2}' >> workspace/log.jsonl")
	if err := os.WriteFile(c.path("/usr/bin/mother"), []byte("#!/bin/sh\necho 'mother: this release cannot start' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	stop = c.startMother()
	code, said = c.upgradeCheck(3)
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
	logs = stop()
	if !strings.Contains(health, "mother "+version1+" is") {
		t.Errorf("momctl health with the previous mother back = %q, want %s up\nmother's output:\n%s", health, version1, logs)
	}
}
