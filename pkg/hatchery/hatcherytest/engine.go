package hatcherytest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/mother-chat/mother/internal/testenv"
)

// Engine is a second, real Docker engine (dockerd) on this machine, with
// its own data root, exec root and pid file under a temp directory, a
// bridge of its own (never docker0: a dockerd started with --bridge=none
// deletes the machine's docker0 at start) and no iptables, listening only on tcp://127.0.0.1:<port> with
// --tlsverify and certificates made by deploy/inference/gen-docker-tls.sh:
// what the inference server runs, reached the way Mother reaches it.
type Engine struct {
	// Address is tcp://127.0.0.1:<port>.
	Address string
	// CA, Cert, Key are Mother's client certificate files.
	CA, Cert, Key string

	t       testing.TB
	dir     string
	port    string
	dockerd string
	// bridge is the engine's own bridge interface (OwnBridge).
	bridge string
	// killed: Kill left it down; cleanup starts it once so it reaps (or,
	// with live-restore, adopts) what the dead daemon left.
	killed bool
	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	log    *os.File
}

// EngineOption tunes SecondEngine.
type EngineOption func(*engineConfig)

type engineConfig struct{ liveRestore bool }

// LiveRestore turns on dockerd's live-restore: containers outlive a daemon
// that dies or restarts, as on a server whose engine is upgraded.
func LiveRestore() EngineOption { return func(c *engineConfig) { c.liveRestore = true } }

// SecondEngine starts a second dockerd with TLS and loads image (built
// on the local engine) into it. It needs root and dockerd; without them
// the test is skipped, except under CI=true. Everything (the daemon, its
// containerd, containers, mounts, the directory) is removed in
// t.Cleanup.
func SecondEngine(t testing.TB, image string, opts ...EngineOption) *Engine {
	t.Helper()
	var ec engineConfig
	for _, o := range opts {
		o(&ec)
	}
	local := Docker(t)
	skip := func(format string, args ...any) {
		t.Helper()
		testenv.Unavailable(t, "no second Docker engine: "+format, args...)
	}
	if os.Geteuid() != 0 {
		skip("dockerd needs root")
	}
	dockerd, err := exec.LookPath("dockerd")
	if err != nil {
		skip("dockerd not installed: %v", err)
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	// Short: containerd's sockets live under the exec root.
	dir, err := os.MkdirTemp("", "d2-")
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{t: t, dir: dir, dockerd: dockerd}
	// Its own bridge, deleted after the engine is gone (cleanups run last
	// registered first).
	e.bridge = OwnBridge(t, dir)
	t.Cleanup(e.cleanup)
	tls := filepath.Join(dir, "tls")
	out, err := exec.Command("bash", filepath.Join(root, "deploy/inference/gen-docker-tls.sh"), "-d", tls, "-days", "2", "localhost", "127.0.0.1").CombinedOutput()
	if err != nil {
		t.Fatalf("gen-docker-tls.sh: %v\n%s", err, out)
	}
	e.CA, e.Cert, e.Key = filepath.Join(tls, "ca.pem"), filepath.Join(tls, "cert.pem"), filepath.Join(tls, "key.pem")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, e.port, _ = net.SplitHostPort(l.Addr().String())
	l.Close()
	e.Address = "tcp://127.0.0.1:" + e.port
	conf := "{}\n"
	if ec.liveRestore {
		conf = `{"live-restore": true}` + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "daemon.json"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if e.log, err = os.Create(filepath.Join(dir, "dockerd.log")); err != nil {
		t.Fatal(err)
	}
	e.Start()
	// The chick image, from the local engine.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rc, err := local.ImageSave(ctx, []string{image})
	if err != nil {
		t.Fatalf("save %s: %v", image, err)
	}
	defer rc.Close()
	c := e.Client()
	resp, err := c.ImageLoad(ctx, rc)
	if err != nil {
		t.Fatalf("load %s into the second engine: %v", image, err)
	}
	// The load happens while its progress is read.
	msg, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("load %s into the second engine: %v", image, err)
	}
	if _, err := c.ImageInspect(ctx, image); err != nil {
		t.Fatalf("%s not in the second engine after load: %v\n%s", image, err, msg)
	}
	return e
}

// Client returns a new client for the engine (closed at cleanup).
func (e *Engine) Client() *client.Client {
	e.t.Helper()
	c, err := client.NewClientWithOpts(client.WithHost(e.Address), client.WithTLSClientConfig(e.CA, e.Cert, e.Key), client.WithAPIVersionNegotiation())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

// Start starts the daemon (again) and waits until it answers over TLS.
func (e *Engine) Start() {
	e.t.Helper()
	e.mu.Lock()
	if e.cmd != nil {
		e.mu.Unlock()
		e.t.Fatal("second engine already running")
	}
	tls := filepath.Join(e.dir, "tls")
	cmd := exec.Command(e.dockerd,
		"--config-file", filepath.Join(e.dir, "daemon.json"),
		"--data-root", filepath.Join(e.dir, "data"),
		"--exec-root", filepath.Join(e.dir, "x"),
		"--pidfile", filepath.Join(e.dir, "dockerd.pid"),
		"--bridge", e.bridge, "--iptables=false", "--ip-masq=false", "--ip6tables=false",
		"--shutdown-timeout", "2",
		"-H", e.Address,
		"--tlsverify", "--tlscacert", filepath.Join(tls, "ca.pem"),
		"--tlscert", filepath.Join(tls, "server-cert.pem"), "--tlskey", filepath.Join(tls, "server-key.pem"),
	)
	cmd.Stdout, cmd.Stderr = e.log, e.log
	// Its own process group, so a signal to the test does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		e.mu.Unlock()
		e.t.Fatalf("start dockerd: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	e.cmd, e.done, e.killed = cmd, done, false
	e.mu.Unlock()
	c, err := client.NewClientWithOpts(client.WithHost(e.Address), client.WithTLSClientConfig(e.CA, e.Cert, e.Key), client.WithAPIVersionNegotiation())
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.ServerVersion(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-done:
			e.t.Fatalf("the second dockerd exited at start:\n%s", e.logTail())
		default:
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the second dockerd does not answer on %s: %v\n%s", e.Address, err, e.logTail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop shuts the daemon down (SIGTERM: it stops its containers within its
// 2 s shutdown timeout and exits), as a host going away would.
func (e *Engine) Stop() {
	e.t.Helper()
	e.mu.Lock()
	cmd, done := e.cmd, e.done
	e.cmd = nil
	e.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	// Its managed containerd follows it; make sure before a restart.
	e.killStragglers(syscall.SIGTERM, 10*time.Second)
}

// Kill kills the daemon outright (SIGKILL), as a crash or a cut cable
// looks to Mother: no answer. Its containerd dies with it; its containers'
// shims live on (and, with LiveRestore, so do the containers after Start).
func (e *Engine) Kill() {
	e.t.Helper()
	e.mu.Lock()
	cmd, done := e.cmd, e.done
	e.cmd = nil
	if cmd != nil {
		e.killed = true
	}
	e.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
	// Its containerd dies with it (parent-death signal); wait until it is
	// gone and reaped, or the next dockerd takes it for alive and waits on
	// its dead socket.
	b, _ := os.ReadFile(filepath.Join(e.dir, "x", "containerd", "containerd.pid"))
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
		deadline := time.Now().Add(10 * time.Second)
		for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func (e *Engine) logTail() string {
	b, _ := os.ReadFile(filepath.Join(e.dir, "dockerd.log"))
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, "module=grpc") {
			keep = append(keep, l)
		}
	}
	out := strings.Join(keep, "\n")
	if len(out) > 6000 {
		out = out[len(out)-6000:]
	}
	return out
}

// cleanup removes the engine's containers, stops it, and removes every
// trace: leftover processes started from its directory, mounts, files.
func (e *Engine) cleanup() {
	e.mu.Lock()
	running, killed := e.cmd != nil, e.killed
	e.mu.Unlock()
	if killed && !running {
		// A fresh daemon reaps or adopts the dead one's containers, so
		// they can be removed below.
		e.Start()
		running = true
	}
	if running {
		if c, err := client.NewClientWithOpts(client.WithHost(e.Address), client.WithTLSClientConfig(e.CA, e.Cert, e.Key), client.WithAPIVersionNegotiation()); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if list, err := c.ContainerList(ctx, container.ListOptions{All: true}); err == nil {
				for _, ct := range list {
					_ = c.ContainerRemove(ctx, ct.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
				}
			}
			cancel()
			c.Close()
		}
		e.Stop()
	}
	e.killStragglers(syscall.SIGKILL, 5*time.Second)
	unmountUnder(e.dir)
	if e.log != nil {
		e.log.Close()
	}
	if err := os.RemoveAll(e.dir); err != nil {
		e.t.Logf("remove %s: %v", e.dir, err)
	}
}

// OwnBridge creates a bridge interface for a second dockerd (pass it as
// --bridge): a dockerd started with --bridge=none deletes the machine's
// docker0 at start, and one started without --bridge uses docker0 itself.
// The name is derived from key (a unique directory of the test's); the
// address is a /24 in 10.223.0.0/16 that no route on this machine uses yet.
// The bridge carries nothing off the machine: the engines that use it run
// with --iptables=false, so nothing is forwarded or masqueraded. It is
// deleted in t.Cleanup (after the engine's own cleanup, registered later).
// OwnBridge also registers a check that the machine's docker0, if it
// existed, is still there when the test ends.
func OwnBridge(t testing.TB, key string) string {
	t.Helper()
	hadDocker0 := exec.Command("ip", "link", "show", "docker0").Run() == nil
	t.Cleanup(func() {
		if hadDocker0 && exec.Command("ip", "link", "show", "docker0").Run() != nil {
			t.Errorf("the machine's docker0 bridge is gone after a second engine ran")
		}
	})
	sum := sha256.Sum256([]byte(key))
	name := "d2br" + hex.EncodeToString(sum[:])[:10]
	routes, err := exec.Command("ip", "-4", "route", "show").Output()
	if err != nil {
		t.Fatalf("list routes: %v", err)
	}
	subnet := ""
	for n := 1; n < 255; n++ {
		if !strings.Contains(string(routes), fmt.Sprintf("10.223.%d.", n)) {
			subnet = fmt.Sprintf("10.223.%d.1/24", n)
			break
		}
	}
	if subnet == "" {
		t.Fatal("no free /24 in 10.223.0.0/16 for a second engine's bridge")
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "link", "del", name).CombinedOutput(); err != nil {
			t.Logf("delete bridge %s: %v: %s", name, err, out)
		}
	})
	for _, args := range [][]string{
		{"link", "add", "name", name, "type", "bridge"},
		{"addr", "add", subnet, "dev", name},
		{"link", "set", name, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return name
}

// killStragglers signals the processes whose command line names the
// engine's directory (its containerd and shims, if any outlived it) and
// waits for them to go.
func (e *Engine) killStragglers(sig syscall.Signal, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for {
		pids := pidsMentioning(e.dir)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, sig)
		}
		if time.Now().After(deadline) {
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func pidsMentioning(s string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	self := os.Getpid()
	for _, en := range ents {
		pid, err := strconv.Atoi(en.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", en.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if st, _ := os.ReadFile(filepath.Join("/proc", en.Name(), "stat")); strings.Contains(string(st), ") Z ") {
			continue // a zombie: already gone
		}
		if strings.Contains(string(b), s) {
			out = append(out, pid)
		}
	}
	return out
}

// unmountUnder detaches every mount below dir, deepest first.
func unmountUnder(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(unescape(fields[4]), dir+"/") {
			points = append(points, unescape(fields[4]))
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, p := range points {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// String is the engine's address, for messages.
func (e *Engine) String() string { return fmt.Sprintf("dockerd %s (%s)", e.Address, e.dir) }
