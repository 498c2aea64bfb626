package kubetest

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Version is the Kubernetes version of the cluster (the binaries
// .ci/ensure-kube builds).
const Version = "v1.34.4"

// harnessRev changes whenever the way the cluster is set up changes, so a
// cluster left running by an older harness is not taken for this one.
const harnessRev = "1"

// NodeName is the one node's name (the kubelet runs with
// --hostname-override=localhost: it refuses a loopback node IP, and the
// apiserver reaches it by that host name).
const NodeName = "localhost"

// BridgeName is the cluster's own bridge (never docker0) when it lives in
// the default state directory; a cluster elsewhere (MOTHER_KUBE_DIR) gets
// a bridge named after its directory, so two never share one.
const BridgeName = "motherkube0"

func bridgeFor(dir string) string {
	if dir == "/run/mother-kube" {
		return BridgeName
	}
	sum := sha256.Sum256([]byte(dir))
	return "mk" + hex.EncodeToString(sum[:])[:10]
}

// PauseImage is the Pods' sandbox image: FROM scratch, busybox-static,
// sleeping; imported into the cluster's containerd at start.
const PauseImage = "mother.local/kube-pause:1"

// The components, in start order.
var components = []string{"etcd", "containerd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet"}

// The kernel settings the kubelet changes at start (it sets what it
// wants unless told to fail instead); saved before the first start and
// put back at teardown.
var kubeletSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

// state is what Up records in <dir>/state.json: enough to reach, check and
// tear down a running cluster from another process.
type state struct {
	Rev     string `json:"rev"`
	Version string `json:"version"`
	// Manual: started by `kubecluster up`; tests never tear it down.
	Manual        bool              `json:"manual"`
	Dir           string            `json:"dir"`
	Server        string            `json:"server"`
	Token         string            `json:"token"`
	Bridge        string            `json:"bridge"`
	Subnet        string            `json:"subnet"`
	Gateway       string            `json:"gateway"`
	Ports         map[string]int    `json:"ports"`
	PIDs          map[string]int    `json:"pids"`
	Sysctls       map[string]string `json:"sysctls"`
	HadLogDir     bool              `json:"had_log_dir"`
	CgroupsBefore []string          `json:"cgroups_before"`
}

// Options tune Up.
type Options struct {
	// Dir is the cluster's state directory (default Dir()).
	Dir string
	// BinDir holds kube-apiserver, kubelet, kube-scheduler and
	// kube-controller-manager (default BinDir()).
	BinDir string
	// Manual marks a cluster brought up by hand: tests use it but never
	// tear it down.
	Manual bool
	// Logf reports progress (may be nil).
	Logf func(format string, args ...any)
}

// Dir is the machine-wide state directory: $MOTHER_KUBE_DIR or
// /run/mother-kube. Every checkout on the machine shares the one cluster.
func Dir() string {
	if d := os.Getenv("MOTHER_KUBE_DIR"); d != "" {
		return d
	}
	return "/run/mother-kube"
}

// BinDir is where .ci/ensure-kube puts the Kubernetes binaries:
// ${MOTHER_CACHE:-$HOME/.cache/mother}/kube/<Version>/bin.
func BinDir() string {
	cache := os.Getenv("MOTHER_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = "/root"
		}
		cache = filepath.Join(home, ".cache", "mother")
	}
	return filepath.Join(cache, "kube", Version, "bin")
}

// missingTools lists what Up needs and this machine lacks.
func missingTools(bin string) []string {
	var miss []string
	for _, c := range []string{"kube-apiserver", "kubelet", "kube-scheduler", "kube-controller-manager"} {
		if fi, err := os.Stat(filepath.Join(bin, c)); err != nil || fi.Mode()&0o111 == 0 {
			miss = append(miss, filepath.Join(bin, c))
		}
	}
	for _, c := range []string{"etcd", "containerd", "containerd-shim-runc-v2", "ctr", "runc", "ip", "docker"} {
		if _, err := exec.LookPath(c); err != nil {
			miss = append(miss, c)
		}
	}
	for _, p := range []string{"/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/portmap", "/usr/lib/cni/loopback", "/bin/busybox"} {
		if _, err := os.Stat(p); err != nil {
			miss = append(miss, p)
		}
	}
	return miss
}

func (o *Options) defaults() {
	if o.Dir == "" {
		o.Dir = Dir()
	}
	if o.BinDir == "" {
		o.BinDir = BinDir()
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
}

// lockFile opens (creating) a lock file beside dir and flocks it.
func lockFile(dir, suffix string, how int) (*os.File, error) {
	path := strings.TrimRight(dir, "/") + suffix
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

// ctlLock serialises bringing the cluster up and down across processes.
func ctlLock(dir string) (*os.File, error) { return lockFile(dir, ".lock", syscall.LOCK_EX) }

func readState(dir string) (*state, error) {
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, "state.json"), err)
	}
	return &s, nil
}

func writeState(s *state) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.Dir, "state.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(s.Dir, "state.json"))
}

// healthy reports whether the recorded cluster still runs: every process
// alive and the apiserver ready, the node Ready and schedulable.
func (s *state) healthy(ctx context.Context) error {
	if s.Rev != harnessRev || s.Version != Version {
		return fmt.Errorf("a cluster of another harness (rev %s, %s) is recorded", s.Rev, s.Version)
	}
	for _, c := range components {
		if !alive(s.PIDs[c], s.Dir) {
			return fmt.Errorf("%s (pid %d) is not running", c, s.PIDs[c])
		}
	}
	c := s.kube()
	if err := c.readyz(ctx); err != nil {
		return err
	}
	return c.nodeReady(ctx)
}

func (s *state) kube() *Kube {
	if s.Bridge == "" {
		s.Bridge = bridgeFor(s.Dir)
	}
	return &Kube{
		Dir:              s.Dir,
		Kubeconfig:       filepath.Join(s.Dir, "admin.kubeconfig"),
		Server:           s.Server,
		Token:            s.Token,
		CAFile:           filepath.Join(s.Dir, "pki", "ca.crt"),
		NodeName:         NodeName,
		GatewayIP:        s.Gateway,
		Bridge:           s.Bridge,
		PodSubnet:        s.Subnet,
		ContainerdSocket: filepath.Join(s.Dir, "containerd.sock"),
	}
}

// alive reports whether pid runs and its command line or working
// directory names dir (so a recycled pid is not taken for ours).
func alive(pid int, dir string) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); strings.Contains(string(st), ") Z ") {
		return false
	}
	return strings.Contains(string(b), dir)
}

// Up brings the cluster up, or finds it already up and healthy, and
// returns it. It holds the control lock while it works, so concurrent test
// binaries (go test ./... runs several) start one cluster between them.
func Up(ctx context.Context, o Options) (*Kube, error) {
	o.defaults()
	lock, err := ctlLock(o.Dir)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	return upLocked(ctx, o)
}

func upLocked(ctx context.Context, o Options) (*Kube, error) {
	if s, err := readState(o.Dir); err == nil {
		hctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		herr := s.healthy(hctx)
		cancel()
		if herr == nil {
			if o.Manual && !s.Manual {
				s.Manual = true
				if err := writeState(s); err != nil {
					return nil, err
				}
			}
			o.Logf("kubetest: reusing the cluster in %s (%s)", s.Dir, s.Server)
			return s.kube(), nil
		}
		if users, err := lockFile(o.Dir, ".users", syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			return nil, fmt.Errorf("the cluster in %s is unhealthy (%v) and another process uses it", o.Dir, herr)
		} else {
			users.Close()
		}
		o.Logf("kubetest: the cluster in %s is unhealthy (%v): tearing it down", o.Dir, herr)
		if err := downLocked(o.Dir, o.Logf); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	} else if _, err := os.Stat(o.Dir); err == nil {
		// A directory without state: a start that died half way.
		if err := downLocked(o.Dir, o.Logf); err != nil {
			return nil, err
		}
	}
	if miss := missingTools(o.BinDir); len(miss) > 0 {
		return nil, fmt.Errorf("missing %s (run .ci/ensure-kube as root)", strings.Join(miss, ", "))
	}
	start := time.Now()
	s, err := start1(ctx, o)
	if err != nil {
		if s != nil {
			_ = writeState(s)
		}
		logs := ""
		if s != nil {
			logs = s.logTails()
		}
		if derr := downLocked(o.Dir, o.Logf); derr != nil {
			o.Logf("kubetest: teardown after a failed start: %v", derr)
		}
		return nil, fmt.Errorf("start the test cluster: %w%s", err, logs)
	}
	o.Logf("kubetest: cluster up in %s (%s)", time.Since(start).Round(100*time.Millisecond), s.Server)
	return s.kube(), nil
}

// logTails is the end of each component's log, for a failed start.
func (s *state) logTails() string {
	var b strings.Builder
	for _, c := range components {
		data, err := os.ReadFile(filepath.Join(s.Dir, "logs", c+".log"))
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		fmt.Fprintf(&b, "\n--- %s.log (end)\n%s", c, strings.Join(lines, "\n"))
	}
	return b.String()
}

// start1 creates the state directory, the certificates and configuration,
// and starts each component, waiting for each to answer.
func start1(ctx context.Context, o Options) (*state, error) {
	dir := o.Dir
	for _, sub := range []string{"pki", "logs", "etcd", "containerd", "cni/net.d", "cni/ipam", "kubelet", "pod-logs", "images"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, err
		}
	}
	s := &state{Rev: harnessRev, Version: Version, Manual: o.Manual, Dir: dir, Ports: map[string]int{}, PIDs: map[string]int{}, Sysctls: map[string]string{}}
	for _, k := range kubeletSysctls {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err == nil {
			s.Sysctls[k] = strings.TrimSpace(string(b))
		}
	}
	if _, err := os.Stat("/var/log/containers"); err == nil {
		s.HadLogDir = true
	}
	s.CgroupsBefore = k8sCgroups()
	ports, err := freePorts(8)
	if err != nil {
		return s, err
	}
	for i, name := range []string{"etcd-client", "etcd-peer", "apiserver", "scheduler", "controller-manager", "kubelet", "kubelet-healthz", "containerd-stream"} {
		s.Ports[name] = ports[i]
	}
	s.Server = fmt.Sprintf("https://127.0.0.1:%d", s.Ports["apiserver"])
	s.Bridge = bridgeFor(dir)
	if s.Subnet, s.Gateway, err = freeSubnet(); err != nil {
		return s, err
	}
	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		return s, err
	}
	s.Token = hex.EncodeToString(tok)
	if err := writeState(s); err != nil {
		return s, err
	}
	if err := writePKI(s); err != nil {
		return s, fmt.Errorf("certificates: %w", err)
	}
	if err := writeConfigs(s); err != nil {
		return s, err
	}
	if err := createBridge(s); err != nil {
		return s, err
	}
	if err := writeState(s); err != nil {
		return s, err
	}

	// etcd.
	if err := startProc(s, "etcd", "etcd",
		"--name", "mother-kube",
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", s.Ports["etcd-client"]),
		"--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", s.Ports["etcd-client"]),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", s.Ports["etcd-peer"]),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", s.Ports["etcd-peer"]),
		"--initial-cluster", fmt.Sprintf("mother-kube=http://127.0.0.1:%d", s.Ports["etcd-peer"]),
	); err != nil {
		return s, err
	}
	if err := waitFor(ctx, s, "etcd", 60*time.Second, func(ctx context.Context) error {
		return httpGet(ctx, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/health", s.Ports["etcd-client"]), "")
	}); err != nil {
		return s, err
	}

	// containerd, then the sandbox image.
	if err := startProc(s, "containerd", "containerd", "--config", filepath.Join(dir, "containerd", "config.toml")); err != nil {
		return s, err
	}
	sock := filepath.Join(dir, "containerd.sock")
	if err := waitFor(ctx, s, "containerd", 60*time.Second, func(ctx context.Context) error {
		return exec.CommandContext(ctx, "ctr", "-a", sock, "version").Run()
	}); err != nil {
		return s, err
	}
	if err := importPause(ctx, s); err != nil {
		return s, err
	}

	// kube-apiserver.
	pki := filepath.Join(dir, "pki")
	if err := startProc(s, "kube-apiserver", filepath.Join(o.BinDir, "kube-apiserver"),
		"--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", s.Ports["etcd-client"]),
		"--bind-address", "127.0.0.1",
		"--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(s.Ports["apiserver"]),
		"--tls-cert-file", filepath.Join(pki, "apiserver.crt"),
		"--tls-private-key-file", filepath.Join(pki, "apiserver.key"),
		"--client-ca-file", filepath.Join(pki, "ca.crt"),
		"--token-auth-file", filepath.Join(pki, "tokens.csv"),
		"--authorization-mode", "AlwaysAllow",
		"--service-account-key-file", filepath.Join(pki, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(pki, "sa.key"),
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-cluster-ip-range", "10.96.0.0/24",
		"--endpoint-reconciler-type", "none",
		"--kubelet-preferred-address-types", "Hostname",
		"--kubelet-client-certificate", filepath.Join(pki, "apiserver-kubelet-client.crt"),
		"--kubelet-client-key", filepath.Join(pki, "apiserver-kubelet-client.key"),
		"--profiling=false",
	); err != nil {
		return s, err
	}
	k := s.kube()
	if err := waitFor(ctx, s, "kube-apiserver", 120*time.Second, k.readyz); err != nil {
		return s, err
	}

	// kube-controller-manager: the garbage collector (a Secret owned by a
	// Pod goes with it), namespace deletion, default service accounts, the
	// node lifecycle (it lifts the not-ready taint a new node is born
	// with, so the scheduler places Pods on it).
	if err := startProc(s, "kube-controller-manager", filepath.Join(o.BinDir, "kube-controller-manager"),
		"--kubeconfig", filepath.Join(dir, "controller-manager.kubeconfig"),
		"--authentication-kubeconfig", filepath.Join(dir, "controller-manager.kubeconfig"),
		"--authorization-kubeconfig", filepath.Join(dir, "controller-manager.kubeconfig"),
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(s.Ports["controller-manager"]),
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--service-account-private-key-file", filepath.Join(pki, "sa.key"),
		"--root-ca-file", filepath.Join(pki, "ca.crt"),
		"--allocate-node-cidrs=false",
		"--profiling=false",
	); err != nil {
		return s, err
	}
	// kube-scheduler.
	if err := startProc(s, "kube-scheduler", filepath.Join(o.BinDir, "kube-scheduler"),
		"--kubeconfig", filepath.Join(dir, "scheduler.kubeconfig"),
		"--authentication-kubeconfig", filepath.Join(dir, "scheduler.kubeconfig"),
		"--authorization-kubeconfig", filepath.Join(dir, "scheduler.kubeconfig"),
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(s.Ports["scheduler"]),
		"--leader-elect=false",
		"--profiling=false",
	); err != nil {
		return s, err
	}
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for _, c := range []string{"kube-controller-manager", "kube-scheduler"} {
		port := s.Ports[strings.TrimPrefix(c, "kube-")]
		if err := waitFor(ctx, s, c, 90*time.Second, func(ctx context.Context) error {
			return httpGet(ctx, insecure, fmt.Sprintf("https://127.0.0.1:%d/healthz", port), "")
		}); err != nil {
			return s, err
		}
	}

	// kubelet.
	if err := startProc(s, "kubelet", filepath.Join(o.BinDir, "kubelet"),
		"--config", filepath.Join(dir, "kubelet-config.yaml"),
		"--kubeconfig", filepath.Join(dir, "kubelet.kubeconfig"),
		"--root-dir", filepath.Join(dir, "kubelet"),
		"--cert-dir", filepath.Join(dir, "kubelet", "pki"),
		"--hostname-override", NodeName,
		"--v", "1",
	); err != nil {
		return s, err
	}
	if err := waitFor(ctx, s, "kubelet", 120*time.Second, k.nodeReady); err != nil {
		return s, err
	}
	if err := writeState(s); err != nil {
		return s, err
	}
	return s, nil
}

// waitFor polls check until it succeeds, the component exits, or wait
// passes.
func waitFor(ctx context.Context, s *state, component string, wait time.Duration, check func(context.Context) error) error {
	deadline := time.Now().Add(wait)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := check(cctx)
		cancel()
		if err == nil {
			return nil
		}
		if gone, how := ended(s.PIDs[component], s.Dir); gone {
			return fmt.Errorf("%s (pid %d) exited at start: %s (last check: %v)", component, s.PIDs[component], how, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %v", component, wait, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func httpGet(ctx context.Context, c *http.Client, url, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b := make([]byte, 512)
		n, _ := resp.Body.Read(b)
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(b[:n])))
	}
	return nil
}

// startProc starts a component in a session of its own (it outlives the
// test binary that started it: other test binaries share it), its output
// in <dir>/logs/<name>.log, and records its pid.
func startProc(s *state, name, path string, args ...string) error {
	logf, err := os.OpenFile(filepath.Join(s.Dir, "logs", name+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(path, args...)
	cmd.Dir = s.Dir // alive() recognises our processes by it, too
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Stdin = nil
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	s.PIDs[name] = cmd.Process.Pid
	exitsMu.Lock()
	ours[cmd.Process.Pid] = true
	exitsMu.Unlock()
	// Reap it if it dies while this process lives, keeping how it ended
	// for the start's error; it is not waited for otherwise (it belongs to
	// the machine, not to this process).
	pid := cmd.Process.Pid
	go func() {
		err := cmd.Wait()
		exitsMu.Lock()
		exits[pid] = fmt.Sprintf("%v (%s)", err, cmd.ProcessState)
		exitsMu.Unlock()
	}()
	// Every component gets a command line naming the state dir (alive
	// checks it); etcd's and containerd's do through their flags.
	return writeState(s)
}

// exits records how the components this process started (ours) ended,
// by pid.
var (
	exitsMu sync.Mutex
	exits   = map[int]string{}
	ours    = map[int]bool{}
)

// ended tells whether a component's process has ended, and how if this
// process started it. One of ours has ended once it is reaped: until then
// its pid cannot be another's, and alive's look at its command line can
// be wrong just after the start (an exec in progress shows an empty one).
func ended(pid int, dir string) (bool, string) {
	exitsMu.Lock()
	how, reaped := exits[pid]
	mine := ours[pid]
	exitsMu.Unlock()
	if mine {
		return reaped, how
	}
	return !alive(pid, dir), ""
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// freeSubnet picks the Pods' /24 in 10.224.0.0/16 that no route on this
// machine uses yet.
func freeSubnet() (subnet, gateway string, err error) {
	routes, err := exec.Command("ip", "-4", "route", "show").Output()
	if err != nil {
		return "", "", fmt.Errorf("list routes: %w", err)
	}
	for n := 0; n < 255; n++ {
		prefix := fmt.Sprintf("10.224.%d.", n)
		if !strings.Contains(string(routes), prefix) {
			return prefix + "0/24", prefix + "1", nil
		}
	}
	return "", "", errors.New("no free /24 in 10.224.0.0/16 for the cluster's bridge")
}

// createBridge makes the cluster's bridge with the gateway address before
// any Pod exists, so a test can listen on GatewayIP at once. The bridge
// CNI plugin finds and uses it.
func createBridge(s *state) error {
	if exec.Command("ip", "link", "show", s.Bridge).Run() == nil {
		if out, err := exec.Command("ip", "link", "del", s.Bridge).CombinedOutput(); err != nil {
			return fmt.Errorf("delete stale bridge %s: %v: %s", s.Bridge, err, out)
		}
	}
	for _, args := range [][]string{
		{"link", "add", "name", s.Bridge, "type", "bridge"},
		{"addr", "add", s.Gateway + "/24", "dev", s.Bridge},
		{"link", "set", s.Bridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// writePKI makes a CA, the apiserver's serving certificate (127.0.0.1,
// localhost), the apiserver's client certificate for the kubelet, the
// service account key pair and the token file.
func writePKI(s *state) error {
	pki := filepath.Join(s.Dir, "pki")
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "mother-kube test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(1, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(pki, "ca.crt"), "CERTIFICATE", caDER); err != nil {
		return err
	}
	leaf := func(name string, serial int64, tmpl *x509.Certificate) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.AddDate(1, 0, 0)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		kb, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(filepath.Join(pki, name+".crt"), "CERTIFICATE", der); err != nil {
			return err
		}
		return writePEM(filepath.Join(pki, name+".key"), "EC PRIVATE KEY", kb)
	}
	if err := leaf("apiserver", 2, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 96, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return err
	}
	if err := leaf("apiserver-kubelet-client", 3, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return err
	}
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(pki, "sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(sa)); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(pki, "sa.pub"), "PUBLIC KEY", pub); err != nil {
		return err
	}
	// One token per identity; the admin's is in system:masters. (The
	// authorizer is AlwaysAllow: the groups document intent.)
	var tokens strings.Builder
	fmt.Fprintf(&tokens, "%s,admin,admin,\"system:masters\"\n", s.Token)
	for _, id := range []struct{ name, user, group string }{
		{"kubelet", "system:node:" + NodeName, "system:nodes"},
		{"scheduler", "system:kube-scheduler", ""},
		{"controller-manager", "system:kube-controller-manager", ""},
	} {
		tok := make([]byte, 24)
		if _, err := rand.Read(tok); err != nil {
			return err
		}
		t := hex.EncodeToString(tok)
		fmt.Fprintf(&tokens, "%s,%s,%s,\"%s\"\n", t, id.user, id.user, id.group)
		if err := writeKubeconfig(filepath.Join(s.Dir, id.name+".kubeconfig"), s.Server, filepath.Join(pki, "ca.crt"), t); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(pki, "tokens.csv"), []byte(tokens.String()), 0o600); err != nil {
		return err
	}
	return writeKubeconfig(filepath.Join(s.Dir, "admin.kubeconfig"), s.Server, filepath.Join(pki, "ca.crt"), s.Token)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func writeKubeconfig(path, server, ca, token string) error {
	conf := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: mother-kube
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: user
  user:
    token: %s
contexts:
- name: mother-kube
  context:
    cluster: mother-kube
    user: user
current-context: mother-kube
`, server, ca, token)
	return os.WriteFile(path, []byte(conf), 0o600)
}

// writeConfigs writes containerd's, the CNI's and the kubelet's
// configuration.
func writeConfigs(s *state) error {
	dir := s.Dir
	containerd := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "%[7]d"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[8]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[9]q
    max_conf_num = 1
`,
		filepath.Join(dir, "containerd", "root"),
		filepath.Join(dir, "containerd", "state"),
		filepath.Join(dir, "containerd.sock"),
		filepath.Join(dir, "containerd-ttrpc.sock"),
		filepath.Join(dir, "containerd", "opt"),
		PauseImage,
		s.Ports["containerd-stream"],
		filepath.Join(dir, "runc"),
		filepath.Join(dir, "cni", "net.d"),
	)
	if err := os.WriteFile(filepath.Join(dir, "containerd", "config.toml"), []byte(containerd), 0o600); err != nil {
		return err
	}
	cni := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "motherkube",
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      s.Bridge,
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": filepath.Join(dir, "cni", "ipam"),
					"ranges":  []any{[]any{map[string]any{"subnet": s.Subnet, "gateway": s.Gateway}}},
					"routes":  []any{map[string]any{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}},
		},
	}
	b, err := json.MarshalIndent(cni, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "cni", "net.d", "10-motherkube.conflist"), b, 0o600); err != nil {
		return err
	}
	kubelet := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %d
healthzBindAddress: 127.0.0.1
healthzPort: %d
readOnlyPort: 0
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
failCgroupV1: false
featureGates:
  # In-place resize reads the Pod's cgroup, which cgroupsPerQOS: false
  # does not make: v1.34.4's kubelet then panics (nil memory config in
  # doPodResizeAction) on a Pod it decides to resize, and the node goes
  # NotReady under every test at once.
  InPlacePodVerticalScaling: false
makeIPTablesUtilChains: false
hairpinMode: none
podLogsDir: %s
volumePluginDir: %s
resolvConf: ""
registerNode: true
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
  imagefs.inodesFree: "1%%"
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: %s
authorization:
  mode: AlwaysAllow
`,
		s.Ports["kubelet"], s.Ports["kubelet-healthz"],
		filepath.Join(dir, "containerd.sock"),
		filepath.Join(dir, "pod-logs"),
		filepath.Join(dir, "kubelet", "volume-plugins"),
		filepath.Join(dir, "pki", "ca.crt"),
	)
	return os.WriteFile(filepath.Join(dir, "kubelet-config.yaml"), []byte(kubelet), 0o600)
}

// importPause builds the sandbox image (FROM scratch, busybox-static,
// sleeping as PID 1) with docker and imports it into the cluster's
// containerd.
func importPause(ctx context.Context, s *state) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	build := filepath.Join(s.Dir, "images", "pause")
	if err := os.MkdirAll(build, 0o700); err != nil {
		return err
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(build, "busybox"), bb, 0o755); err != nil {
		return err
	}
	df := "FROM scratch\nCOPY busybox /bin/busybox\nENTRYPOINT [\"/bin/busybox\", \"sleep\", \"2147483647\"]\n"
	if err := os.WriteFile(filepath.Join(build, "Dockerfile"), []byte(df), 0o644); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "docker", "build", "-q", "-t", PauseImage, build).CombinedOutput(); err != nil {
		return fmt.Errorf("build the pause image: %v: %s", err, out)
	}
	return importImage(ctx, s.Dir, PauseImage)
}

// importImage docker-saves tag and imports it into the cluster's
// containerd (namespace k8s.io, where the kubelet looks).
func importImage(ctx context.Context, dir, tag string) error {
	tar := filepath.Join(dir, "images", fmt.Sprintf("import-%d.tar", time.Now().UnixNano()))
	defer os.Remove(tar)
	if out, err := exec.CommandContext(ctx, "docker", "save", "-o", tar, tag).CombinedOutput(); err != nil {
		return fmt.Errorf("docker save %s: %v: %s", tag, err, out)
	}
	if out, err := exec.CommandContext(ctx, "ctr", "-a", filepath.Join(dir, "containerd.sock"), "-n", "k8s.io", "images", "import", tar).CombinedOutput(); err != nil {
		return fmt.Errorf("import %s into the cluster's containerd: %v: %s", tag, err, out)
	}
	return nil
}

// Down tears the cluster in the state directory down (whoever started
// it): Pods' containers, the components, mounts, the bridge, the state
// directory, the kernel settings the kubelet changed. Safe to call when
// nothing runs.
func Down(dir string, logf func(string, ...any)) error {
	if dir == "" {
		dir = Dir()
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	lock, err := ctlLock(dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	return downLocked(dir, logf)
}

func downLocked(dir string, logf func(string, ...any)) error {
	s, err := readState(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		logf("kubetest: %v; tearing down what is there", err)
	}
	if s == nil {
		s = &state{Dir: dir, PIDs: map[string]int{}}
	}
	if s.Bridge == "" {
		s.Bridge = bridgeFor(dir)
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		deleteBridge(s.Bridge, logf)
		return nil
	}
	logf("kubetest: tearing the cluster in %s down", dir)
	// The control plane first, so nothing restarts what goes next; then
	// the kubelet; the Pods' containers through runc (the kubelet would
	// take a while per Pod); containerd and its shims last.
	for _, c := range []string{"kube-scheduler", "kube-controller-manager", "kube-apiserver", "kubelet"} {
		stop(s.PIDs[c], dir, 10*time.Second)
	}
	// The shim keeps one runc root per containerd namespace (k8s.io).
	roots, _ := filepath.Glob(filepath.Join(dir, "runc", "*"))
	for _, root := range roots {
		out, err := exec.Command("runc", "--root", root, "list", "-q").Output()
		if err != nil {
			continue
		}
		for _, id := range strings.Fields(string(out)) {
			if b, err := exec.Command("runc", "--root", root, "delete", "-f", id).CombinedOutput(); err != nil {
				logf("kubetest: runc delete %s: %v: %s", id, err, b)
			}
		}
	}
	stop(s.PIDs["containerd"], dir, 10*time.Second)
	stop(s.PIDs["etcd"], dir, 10*time.Second)
	// Shims and anything else still naming the directory.
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		pids := pidsMentioning(dir)
		for _, pid := range pids {
			_ = syscall.Kill(pid, sig)
		}
		deadline := time.Now().Add(5 * time.Second)
		for len(pidsMentioning(dir)) > 0 && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
	}
	unmountUnder(dir)
	deleteBridge(s.Bridge, logf)
	for k, v := range s.Sysctls {
		if cur, err := os.ReadFile("/proc/sys/" + k); err == nil && strings.TrimSpace(string(cur)) != v {
			if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
				logf("kubetest: restore %s=%s: %v", k, v, err)
			}
		}
	}
	// The kubelet links container logs into /var/log/containers.
	if ents, err := os.ReadDir("/var/log/containers"); err == nil {
		for _, e := range ents {
			p := filepath.Join("/var/log/containers", e.Name())
			if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, dir+"/") {
				os.Remove(p)
			}
		}
		if !s.HadLogDir && s.Rev != "" {
			os.Remove("/var/log/containers") // only if empty
		}
	}
	removeNewCgroups(s.CgroupsBefore)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	logf("kubetest: cluster down")
	return nil
}

func deleteBridge(name string, logf func(string, ...any)) {
	if exec.Command("ip", "link", "show", name).Run() == nil {
		if out, err := exec.Command("ip", "link", "del", name).CombinedOutput(); err != nil {
			logf("kubetest: delete bridge %s: %v: %s", name, err, out)
		}
	}
}

// stop sends SIGTERM to pid (if it is still ours), then SIGKILL after
// grace.
func stop(pid int, dir string, grace time.Duration) {
	if !alive(pid, dir) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for alive(pid, dir) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			time.Sleep(200 * time.Millisecond)
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
		if alive(pid, s) {
			out = append(out, pid)
		}
	}
	return out
}

// unmountUnder detaches every mount below dir, deepest first (the
// kubelet's bind mounts, containerd's overlays and network namespaces).
func unmountUnder(dir string) {
	for range 3 {
		f, err := os.Open("/proc/self/mountinfo")
		if err != nil {
			return
		}
		var points []string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 4 {
				p := unescape(fields[4])
				if p == dir || strings.HasPrefix(p, dir+"/") {
					points = append(points, p)
				}
			}
		}
		f.Close()
		if len(points) == 0 {
			return
		}
		sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
		for _, p := range points {
			_ = syscall.Unmount(p, syscall.MNT_DETACH)
		}
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

// k8sCgroups lists the cgroup directories named k8s.io (where the
// cluster's containerd puts Pods' containers) under each v1 controller.
func k8sCgroups() []string {
	m, _ := filepath.Glob("/sys/fs/cgroup/*/k8s.io")
	return m
}

// removeNewCgroups removes the k8s.io cgroup directories that did not
// exist before the cluster started (empty once the containers are gone).
func removeNewCgroups(before []string) {
	had := map[string]bool{}
	for _, p := range before {
		had[p] = true
	}
	for _, p := range k8sCgroups() {
		if had[p] {
			continue
		}
		// Children first (empty leaves a dead container left).
		var dirs []string
		_ = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			_ = syscall.Rmdir(d)
		}
	}
}

// Status returns the cluster recorded in dir (default Dir()) if it is up
// and healthy.
func Status(ctx context.Context, dir string) (*Kube, error) {
	if dir == "" {
		dir = Dir()
	}
	s, err := readState(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no cluster recorded in %s", dir)
	}
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := s.healthy(ctx); err != nil {
		return nil, fmt.Errorf("the cluster in %s is not healthy: %w", dir, err)
	}
	return s.kube(), nil
}
