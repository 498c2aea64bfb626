package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/gate/gatetest"
	"github.com/mother-chat/mother/pkg/wire"
)

// TestGateCommand runs `chick gate` as a process against a stand-in
// Mother: it makes its sockets, refuses what Mother refuses, and exits 0
// on SIGTERM, removing them.
func TestGateCommand(t *testing.T) {
	t.Parallel()
	m := gatetest.Start(t, nil)
	dir, err := os.MkdirTemp("", "gate")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "CHICK_RUN_MAIN=1", "CHICK_ARGS=gate",
		"MOTHER_ADDR="+m.Addr, "MOTHER_CA_PEM="+string(m.CAPEM),
		wire.EnvGateHost+"="+gatetest.Host, wire.EnvGateToken+"="+gatetest.Token, wire.EnvGateDir+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sock := filepath.Join(dir, wire.GateProxySocket)
	var c net.Conn
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if c, err = net.Dial("unix", sock); err == nil {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the gate never listened: %v\n%s", err, stderr.String())
		}
	}
	// The gate re-executed itself without its token in its environment
	// (as root, the test can read the environ of a non-dumpable process;
	// as another user, it is closed).
	if environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid)); err == nil {
		if bytes.Contains(environ, []byte(gatetest.Token)) || !bytes.Contains(environ, []byte(tokenFDVar+"=")) {
			t.Errorf("the gate's initial environment holds its token, or it did not re-execute: %q", environ)
		}
	} else if !errors.Is(err, os.ErrPermission) {
		t.Errorf("the gate's environ: %v", err)
	}
	fmt.Fprintf(c, "%sCONNECT github.com:443 HTTP/1.1\r\n\r\n", wire.GatePrefaceLine("c-1", wire.ChickGateKey(gatetest.Token, "c-1")))
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	c.Close()
	if resp.StatusCode != 403 || string(body) != "blocked: github.com:443 (not allowed for this chick)\n" {
		t.Errorf("answer %d %q", resp.StatusCode, body)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v\n%s", err, stderr.String())
	}
	for _, name := range []string{wire.GateNestSocket, wire.GateProxySocket} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind: %v", name, err)
		}
	}
}

// TestGateCommandNamesMissingSettings: a missing variable is named, and
// the exit code is 2; so is an unknown command.
func TestGateCommandNamesMissingSettings(t *testing.T) {
	t.Parallel()
	full := map[string]string{
		"MOTHER_ADDR": "127.0.0.1:1", "MOTHER_CA_PEM": "pem", wire.EnvGateHost: "h", wire.EnvGateToken: "t",
	}
	for name := range full {
		_, err := gateOptions(func(k string) string {
			if k == name {
				return ""
			}
			return full[k]
		})
		if err == nil || err.Error() != name+" is not set" {
			t.Errorf("without %s: %v", name, err)
		}
	}
	opts, err := gateOptions(func(k string) string { return full[k] })
	if err != nil || opts.Dir != wire.GateDir || opts.Upstream != "127.0.0.1:1" {
		t.Errorf("defaults: %+v %v", opts, err)
	}
	// The limits Mother passes (chicks.gate), and a bad one named.
	full[wire.EnvGateLimits] = wire.GateLimits{NestConnsPerChick: 2, ProxyConnsPerChick: 9, Pending: 7, Conns: 100, PrefaceTimeout: 3 * time.Second}.String()
	opts, err = gateOptions(func(k string) string { return full[k] })
	if err != nil || opts.MaxNestConnsPerChick != 2 || opts.MaxProxyConnsPerChick != 9 || opts.MaxPending != 7 || opts.MaxConns != 100 || opts.PrefaceTimeout != 3*time.Second {
		t.Errorf("limits %q: %+v %v", full[wire.EnvGateLimits], opts, err)
	}
	full[wire.EnvGateLimits] = "nest=4 bogus=1"
	if _, err := gateOptions(func(k string) string { return full[k] }); err == nil || !strings.Contains(err.Error(), `MOTHER_GATE_LIMITS: gate limits: unknown limit "bogus"`) {
		t.Errorf("a bad limit: %v", err)
	}
	for args, want := range map[string]string{
		"gate":  "chick gate: MOTHER_ADDR is not set; the gate is started by Mother",
		"bogus": `chick: unknown command "bogus"`,
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = []string{"CHICK_RUN_MAIN=1", "CHICK_ARGS=" + args}
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), want) {
			t.Errorf("chick %s: %v %q, want exit 2 and %q", args, err, out, want)
		}
	}
}
