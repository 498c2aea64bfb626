package hatcherytest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/internal/testenv"
)

// SSHServer is a throwaway OpenSSH server on loopback that logs root in
// with one key. Through it, `ssh root@127.0.0.1 -p Port docker system
// dial-stdio` reaches this machine's Docker engine, the way Mother reaches
// a chicks.hosts entry with an ssh:// address.
type SSHServer struct {
	Port       int    // on 127.0.0.1
	ClientKey  string // the private key it accepts (for sshIdentityFile)
	KnownHosts string // a known_hosts file holding only its host key (for sshKnownHostsFile)
	HostPub    string // its host key, "ssh-ed25519 AAAA..."
}

// Address is the server as a Docker host address, ssh://root@127.0.0.1:Port.
func (s *SSHServer) Address() string {
	return fmt.Sprintf("ssh://root@127.0.0.1:%d", s.Port)
}

// SSHD runs /usr/sbin/sshd on a free loopback port with its own host key
// and one authorised client key, until the test ends. The far side runs
// the docker CLI from sshd's default PATH. Without sshd, or not as root
// (the only user it can log in here), the test is skipped, except under
// CI=true, where that is a failure (.ci/ensure-docker installs
// openssh-server).
func SSHD(t testing.TB) *SSHServer {
	t.Helper()
	bin, err := exec.LookPath("sshd")
	if err != nil {
		bin = "/usr/sbin/sshd"
	}
	if _, err := os.Stat(bin); err != nil {
		testenv.Unavailable(t, "no sshd installed (openssh-server): %v", err)
	}
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		testenv.Unavailable(t, "no ssh-keygen installed (openssh-client): %v", err)
	}
	if os.Geteuid() != 0 {
		testenv.Unavailable(t, "sshd logs in to the current user only when run as root here")
	}
	dir := t.TempDir()
	write := func(path, content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	keygen := func(path string) {
		t.Helper()
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v: %s", err, out)
		}
	}
	hostKey, clientKey := filepath.Join(dir, "host_key"), filepath.Join(dir, "client_key")
	keygen(hostKey)
	keygen(clientKey)
	authorized := filepath.Join(dir, "authorized_keys")
	write(authorized, read(clientKey+".pub"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cfg := filepath.Join(dir, "sshd_config")
	write(cfg, fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
AuthorizedKeysFile %s
PidFile %s
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
`, port, hostKey, authorized, filepath.Join(dir, "sshd.pid")))
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil { // privilege separation directory
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-D", "-e", "-f", cfg)
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			t.Fatalf("sshd exited: %s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited // its stderr is all in logs now
			t.Fatalf("sshd did not come up: %s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	f := strings.Fields(read(hostKey + ".pub"))
	if len(f) < 2 {
		t.Fatalf("host key %s.pub: %q", hostKey, f)
	}
	known := filepath.Join(dir, "known_hosts")
	write(known, fmt.Sprintf("[127.0.0.1]:%d %s %s\n", port, f[0], f[1]))
	return &SSHServer{Port: port, ClientKey: clientKey, KnownHosts: known, HostPub: f[0] + " " + f[1]}
}
