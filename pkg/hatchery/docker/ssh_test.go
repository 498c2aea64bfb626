package docker

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/mother-chat/mother/internal/testenv"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
)

// sshd is a throwaway OpenSSH server on loopback, logging in one key.
type sshd struct {
	port       int
	clientKey  string
	knownHosts string
	hostPub    string
}

// startSSHD runs /usr/sbin/sshd on a free loopback port with its own host
// key and one authorised client key. Without sshd the test is skipped,
// except under CI=true (.ci/ensure-docker installs openssh-server).
func startSSHD(t *testing.T) *sshd {
	t.Helper()
	bin, err := exec.LookPath("sshd")
	if err != nil {
		bin = "/usr/sbin/sshd"
	}
	if _, err := os.Stat(bin); err != nil {
		testenv.Unavailable(t, "no sshd installed (openssh-server): %v", err)
	}
	if os.Geteuid() != 0 {
		testenv.Unavailable(t, "sshd logs in to the current user only when run as root here")
	}
	dir := t.TempDir()
	keygen := func(path string) {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v: %s", err, out)
		}
	}
	hostKey, clientKey := filepath.Join(dir, "host_key"), filepath.Join(dir, "client_key")
	keygen(hostKey)
	keygen(clientKey)
	pub, _ := os.ReadFile(clientKey + ".pub")
	authorized := filepath.Join(dir, "authorized_keys")
	os.WriteFile(authorized, pub, 0o600)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cfg := filepath.Join(dir, "sshd_config")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
AuthorizedKeysFile %s
PidFile %s
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
`, port, hostKey, authorized, filepath.Join(dir, "sshd.pid"))), 0o600)
	os.MkdirAll("/run/sshd", 0o755) // privilege separation directory
	cmd := exec.Command(bin, "-D", "-e", "-f", cfg)
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd did not come up: %s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	hostPub, _ := os.ReadFile(hostKey + ".pub")
	f := strings.Fields(string(hostPub))
	known := filepath.Join(dir, "known_hosts")
	os.WriteFile(known, []byte(fmt.Sprintf("[127.0.0.1]:%d %s %s\n", port, f[0], f[1])), 0o600)
	return &sshd{port: port, clientKey: clientKey, knownHosts: known, hostPub: f[0] + " " + f[1]}
}

// TestSSHDockerHost reaches the real engine through a real ssh login and
// `docker system dial-stdio` on the far side, the way Mother reaches an
// inference server configured as ssh://user@host.
func TestSSHDockerHost(t *testing.T) {
	hatcherytest.Docker(t)
	s := startSSHD(t)
	host := config.DockerHost{
		Name:              "gpu",
		Address:           fmt.Sprintf("ssh://root@127.0.0.1:%d", s.port),
		SSHIdentityFile:   s.clientKey,
		SSHKnownHostsFile: s.knownHosts,
	}
	c, err := Dial(host, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	v, err := c.ServerVersion(ctx)
	if err != nil {
		t.Fatalf("engine through ssh: %v", err)
	}
	if v.APIVersion == "" {
		t.Errorf("no API version from the engine: %+v", v)
	}
	// API version negotiation worked through the tunnel (a real call).
	if _, err := c.ContainerList(ctx, container.ListOptions{All: true}); err != nil {
		t.Errorf("ContainerList through ssh: %v", err)
	}

	// A host whose key is not the one in known_hosts is refused, and the
	// error says why instead of a bare EOF.
	other := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(other, []byte(fmt.Sprintf("[127.0.0.1]:%d ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n", s.port)), 0o600)
	bad := host
	bad.SSHKnownHostsFile = other
	c2, err := Dial(bad, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_, err = c2.ServerVersion(ctx)
	if err == nil || !strings.Contains(err.Error(), "ssh:") || !strings.Contains(strings.ToLower(err.Error()), "host key") {
		t.Errorf("wrong host key: err = %v, want ssh's host key complaint", err)
	}

	// A key the server does not know is refused without prompting.
	stranger := filepath.Join(t.TempDir(), "k")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", stranger).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %s", out)
	}
	unknown := host
	unknown.SSHIdentityFile = stranger
	c3, err := Dial(unknown, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	_, err = c3.ServerVersion(ctx)
	if err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Errorf("unknown key: err = %v, want ssh's permission denied", err)
	}
}
