// Package docker is the hatchery's Docker Engine API driver: it dials an
// engine (unix socket, TLS over tcp, or ssh), makes hardened chick
// containers from a hatchery.ContainerSpec (the chick fetches its files
// from the nest itself), and implements hatchery.Runtime on top of
// github.com/docker/docker/client. The supervisor (pkg/hatchery) knows no
// Docker type.
package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/mother-chat/mother/pkg/config"
)

// API is the part of the Docker Engine API the driver uses; the real
// *client.Client implements it.
type API interface {
	ContainerCreate(ctx context.Context, cfg *container.Config, hc *container.HostConfig, nc *network.NetworkingConfig, p *ocispec.Platform, name string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, id string, opts container.StartOptions) error
	ContainerWait(ctx context.Context, id string, cond container.WaitCondition) (<-chan container.WaitResponse, <-chan error)
	ContainerKill(ctx context.Context, id, signal string) error
	ContainerRemove(ctx context.Context, id string, opts container.RemoveOptions) error
	ContainerList(ctx context.Context, opts container.ListOptions) ([]container.Summary, error)
	ContainerInspect(ctx context.Context, id string) (container.InspectResponse, error)
	ContainerLogs(ctx context.Context, id string, opts container.LogsOptions) (io.ReadCloser, error)
	CopyToContainer(ctx context.Context, id, dstPath string, content io.Reader, opts container.CopyToContainerOptions) error
	ServerVersion(ctx context.Context) (types.Version, error)
	ImageInspect(ctx context.Context, ref string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
	VolumeCreate(ctx context.Context, opts volume.CreateOptions) (volume.Volume, error)
	VolumeInspect(ctx context.Context, name string) (volume.Volume, error)
	VolumeRemove(ctx context.Context, name string, force bool) error
	Close() error
}

var _ API = (*client.Client)(nil)

// ErrPlainTCP refuses an unauthenticated tcp:// Docker host.
var ErrPlainTCP = errors.New("plain tcp:// Docker hosts are refused: use TLS client certificates (tlsCA, tlsCert, tlsKey), ssh://, or unix://")

// Dial returns a Docker client for one configured host, with API version
// negotiation on. Address forms: "unix:///path", "tcp://host:2376" with TLS
// client certificates, "ssh://user@host[:port]" (through the ssh command and
// `docker system dial-stdio` on the remote side), or empty for DOCKER_HOST
// or the local socket. Plain TCP without TLS is refused.
func Dial(h config.DockerHost, getenv func(string) string) (*client.Client, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	opts := []client.Opt{client.WithAPIVersionNegotiation()}
	addr := h.Address
	if addr == "" {
		addr = getenv("DOCKER_HOST")
		if addr == "" {
			addr = client.DefaultDockerHost
		}
		if strings.HasPrefix(addr, "tcp://") {
			certs := getenv("DOCKER_CERT_PATH")
			if certs == "" || getenv("DOCKER_TLS_VERIFY") == "" {
				return nil, fmt.Errorf("docker host %s (DOCKER_HOST): %w", h.Name, ErrPlainTCP)
			}
			opts = append(opts, client.WithTLSClientConfig(certs+"/ca.pem", certs+"/cert.pem", certs+"/key.pem"))
			opts = append(opts, client.WithHost(addr))
			return newClient(h.Name, opts)
		}
	}
	u, err := url.Parse(addr)
	if err != nil {
		return nil, fmt.Errorf("docker host %s: address %q: %w", h.Name, addr, err)
	}
	switch u.Scheme {
	case "unix", "npipe":
		opts = append(opts, client.WithHost(addr))
	case "tcp":
		if h.TLSCA == "" || h.TLSCert == "" || h.TLSKey == "" {
			return nil, fmt.Errorf("docker host %s: %w", h.Name, ErrPlainTCP)
		}
		opts = append(opts, client.WithHost(addr), client.WithTLSClientConfig(h.TLSCA, h.TLSCert, h.TLSKey))
	case "ssh":
		d, err := sshDialer(u, h)
		if err != nil {
			return nil, fmt.Errorf("docker host %s: %w", h.Name, err)
		}
		// The URL is only used to build request paths; every connection goes
		// through the ssh command.
		opts = append(opts, client.WithHost("http://docker.ssh"), client.WithDialContext(d))
	default:
		return nil, fmt.Errorf("docker host %s: scheme of %q must be unix://, tcp:// (with TLS) or ssh://", h.Name, addr)
	}
	return newClient(h.Name, opts)
}

func newClient(name string, opts []client.Opt) (*client.Client, error) {
	c, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker host %s: %w", name, err)
	}
	return c, nil
}

// sshDialer connects through `ssh [-p port] [user@]host -- docker system
// dial-stdio`, the remote Docker CLI's stdio bridge to its engine. ssh runs
// in batch mode (a daemon has no one to type a password), with the host's
// identity and known-hosts files when configured, and what it says on
// stderr becomes the connection's error.
func sshDialer(u *url.URL, h config.DockerHost) (func(ctx context.Context, network, addr string) (net.Conn, error), error) {
	if u.Host == "" {
		return nil, fmt.Errorf("ssh address %q has no host", u.String())
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("ssh address %q: a path is not supported", u.String())
	}
	target := u.Hostname()
	if u.User != nil {
		if _, hasPass := u.User.Password(); hasPass {
			return nil, fmt.Errorf("ssh address must not contain a password; use keys")
		}
		target = u.User.Username() + "@" + target
	}
	args := []string{"-o", "ConnectTimeout=30", "-o", "BatchMode=yes", "-T"}
	if h.SSHIdentityFile != "" {
		args = append(args, "-i", h.SSHIdentityFile, "-o", "IdentitiesOnly=yes")
	}
	if h.SSHKnownHostsFile != "" {
		args = append(args, "-o", "UserKnownHostsFile="+h.SSHKnownHostsFile, "-o", "StrictHostKeyChecking=yes")
	}
	if p := u.Port(); p != "" {
		if _, err := strconv.Atoi(p); err != nil {
			return nil, fmt.Errorf("ssh port %q: %w", p, err)
		}
		args = append(args, "-p", p)
	}
	args = append(args, "--", target, "docker", "system", "dial-stdio")
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		// The connection outlives the dial's ctx; it ends on Close.
		cmd := exec.Command("ssh", args...)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		stderr := &tailBuffer{max: 2048}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start ssh: %w", err)
		}
		return &cmdConn{cmd: cmd, w: stdin, r: stdout, stderr: stderr}, nil
	}, nil
}

// cmdConn is a net.Conn over a command's stdin and stdout.
type cmdConn struct {
	cmd    *exec.Cmd
	w      io.WriteCloser
	r      io.ReadCloser
	stderr *tailBuffer

	waitOnce sync.Once
	waitErr  error
}

// wait reaps ssh once; after it, everything ssh wrote to stderr is in
// c.stderr (exec copies it in a goroutine that Wait joins).
func (c *cmdConn) wait() error {
	c.waitOnce.Do(func() { c.waitErr = c.cmd.Wait() })
	return c.waitErr
}

// Read passes stdout through; when it ends because ssh failed (refused
// key, unknown host, no docker on the far side), the error says why.
func (c *cmdConn) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	if errors.Is(err, io.EOF) {
		if werr := c.wait(); werr != nil {
			msg := strings.TrimSpace(c.stderr.String())
			if msg == "" {
				msg = werr.Error()
			}
			return n, fmt.Errorf("ssh: %s", msg)
		}
	}
	return n, err
}
func (c *cmdConn) Write(b []byte) (int, error) { return c.w.Write(b) }
func (c *cmdConn) Close() error {
	c.w.Close()
	if c.cmd.Process != nil {
		_ = c.cmd.Process.Kill()
	}
	_ = c.wait()
	return nil
}
func (c *cmdConn) LocalAddr() net.Addr              { return sshAddr{} }
func (c *cmdConn) RemoteAddr() net.Addr             { return sshAddr{} }
func (c *cmdConn) SetDeadline(time.Time) error      { return nil }
func (c *cmdConn) SetReadDeadline(time.Time) error  { return nil }
func (c *cmdConn) SetWriteDeadline(time.Time) error { return nil }

type sshAddr struct{}

func (sshAddr) Network() string { return "ssh" }
func (sshAddr) String() string  { return "ssh" }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
