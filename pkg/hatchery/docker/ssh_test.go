package docker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
)

// TestSSHDockerHost reaches the real engine through a real ssh login and
// `docker system dial-stdio` on the far side, the way Mother reaches an
// inference server configured as ssh://user@host.
func TestSSHDockerHost(t *testing.T) {
	hatcherytest.Docker(t)
	s := hatcherytest.SSHD(t)
	host := config.DockerHost{
		Name:              "gpu",
		Address:           s.Address(),
		SSHIdentityFile:   s.ClientKey,
		SSHKnownHostsFile: s.KnownHosts,
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
	os.WriteFile(other, []byte(fmt.Sprintf("[127.0.0.1]:%d ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n", s.Port)), 0o600)
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
