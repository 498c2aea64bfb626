package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mother-chat/mother/internal/testenv"
)

// TestSystemdUnitVerifies runs systemd-analyze verify on the shipped unit,
// with ExecStart pointing at the mother binary built for this test (verify
// checks that the executable exists). A broken copy must fail, so the
// check is known to bite.
func TestSystemdUnitVerifies(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		testenv.Unavailable(t, "systemd-analyze not installed (Debian package systemd)")
	}
	unit, err := os.ReadFile("../../deploy/systemd/mother.service")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "ExecStart=/usr/local/bin/mother ") {
		t.Fatal("unit does not start /usr/local/bin/mother")
	}
	verify := func(body string) (string, error) {
		path := filepath.Join(t.TempDir(), "mother.service")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(analyze, "verify", path).CombinedOutput()
		return string(out), err
	}
	good := strings.ReplaceAll(string(unit), "/usr/local/bin/mother", motherBin)
	if out, err := verify(good); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	broken := strings.Replace(good, "NoNewPrivileges=yes", "NoNewPrivilege=yes", 1)
	if out, _ := verify(broken); !strings.Contains(out, "NoNewPrivilege") {
		t.Errorf("a misspelt key was not reported; verify output:\n%s", out)
	}
	for _, want := range []string{"Type=notify", "WatchdogSec=", "ProtectSystem=strict", "ReadWritePaths=/var/lib/mother", "NoNewPrivileges=yes", "Restart=on-failure", "User=mother", "EnvironmentFile="} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("unit lacks %s", want)
		}
	}
}

// TestDaemonNotifiesSystemd runs the real binary as a daemon the way the
// unit does (Type=notify, WatchdogSec) and stops it with SIGTERM.
func TestDaemonNotifiesSystemd(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "config.json"), []byte(`{"adapters": {"term": {"type": "cli"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cmd := exec.Command(motherBin, data)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "NOTIFY_SOCKET=" + sock, "WATCHDOG_USEC=200000", "MOTHER_GRPC_LISTEN=127.0.0.1:0"}
	stdin, _ := cmd.StdinPipe() // the cli adapter's stdin stays open
	defer stdin.Close()
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	noRaceAtEnd(t, "mother", stderr.String)
	defer cmd.Process.Kill()

	read := func() string {
		buf := make([]byte, 512)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no notification: %v\nstderr:\n%s", err, stderr.String())
		}
		return string(buf[:n])
	}
	if got := read(); !strings.HasPrefix(got, "READY=1\nSTATUS=serving 1 adapter") {
		t.Errorf("first notification = %q, want READY=1 with a status", got)
	}
	if got := read(); got != "WATCHDOG=1" {
		t.Errorf("second notification = %q, want a watchdog ping", got)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for got := read(); got != "STOPPING=1"; got = read() {
		if got != "WATCHDOG=1" {
			t.Fatalf("notification %q before STOPPING=1", got)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("daemon did not exit cleanly on SIGTERM: %v\nstderr:\n%s", err, stderr.String())
	}
}
