package kubernetes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	"github.com/mother-chat/mother/pkg/hatchery/kubernetes"
	"github.com/mother-chat/mother/pkg/hatchery/kubernetes/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

// fixture is one test's namespace on the real test cluster, with the chick
// image imported and a runtime driving the namespace.
type fixture struct {
	k     *kubetest.Kube
	ns    string
	image string
	rt    *kubernetes.Runtime
	host  config.DockerHost
}

func setup(t *testing.T) *fixture {
	t.Helper()
	k := kubetest.Cluster(t)
	image := hatcherytest.BuildImage(t)
	importOnce(t, k, image)
	ns := k.Namespace(t, "kubedriver")
	h := config.DockerHost{Name: "cluster", Kind: config.HostKubernetes, Kubeconfig: k.Kubeconfig, Namespace: ns, ImagePullPolicy: "Never", WorkspaceSize: "64m"}
	rt, err := kubernetes.Open(h, kubernetes.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { rt.Close() })
	return &fixture{k: k, ns: ns, image: image, rt: rt, host: h}
}

var (
	importMu sync.Mutex
	imported = map[string]bool{}
)

// importOnce imports image into the cluster once per test binary.
func importOnce(t *testing.T, k *kubetest.Kube, image string) {
	t.Helper()
	importMu.Lock()
	defer importMu.Unlock()
	if !imported[image] {
		k.ImportImage(t, image)
		imported[image] = true
	}
}

// spec is a chick spec for the fixture: instance and chick id labels, a
// token, the chick image running command.
func (f *fixture) spec(instance, chick string, command ...string) hatchery.ContainerSpec {
	return hatchery.ContainerSpec{
		Name: "mother-chick-" + chick + "-" + instance, Image: f.image, Command: command,
		Env: []string{
			hatchery.EnvAddr + "=" + f.k.GatewayIP + ":7777", hatchery.EnvToken + "=" + tokenOf(chick),
			hatchery.EnvChickID + "=" + chick, "HOME=" + hatchery.Workspace, "TMPDIR=/tmp",
		},
		Labels: map[string]string{
			hatchery.LabelChickID: chick, hatchery.LabelInstance: instance,
			hatchery.LabelChannel: "cli/local", hatchery.LabelTier: "local",
		},
		Network:   config.NetworkBridge,
		Resources: config.Resources{Memory: "128m", CPUs: 0.25, Pids: 64, Tmpfs: "16m"},
		Hardening: config.Hardening{User: config.DefaultUser},
		Deadline:  10 * time.Minute, KillGrace: 3 * time.Second,
	}
}

func tokenOf(chick string) string { return "tok-" + chick + "-0123456789abcdef" }

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// run creates and starts spec, with a Wait asked first, and returns the
// id and the wait.
func (f *fixture) run(t *testing.T, s hatchery.ContainerSpec) (string, <-chan hatchery.Exit) {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	id, err := f.rt.Create(ctx, s)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = f.rt.Remove(context.Background(), id) })
	wait := f.rt.Wait(t.Context(), id, true)
	if err := f.rt.Start(ctx, id); err != nil {
		t.Fatalf("Start(%s): %v", id, err)
	}
	return id, wait
}

func waitExit(t *testing.T, wait <-chan hatchery.Exit, d time.Duration) hatchery.Exit {
	t.Helper()
	select {
	case ex := <-wait:
		return ex
	case <-time.After(d):
		t.Fatalf("the chick's pod did not end within %s", d)
		return hatchery.Exit{}
	}
}

// leftovers lists the Pods and Secrets of the namespace.
func (f *fixture) leftovers(t *testing.T) []string {
	t.Helper()
	c := f.k.Client(t)
	ctx := ctxT(t, 30*time.Second)
	var out []string
	pods, err := c.CoreV1().Pods(f.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		out = append(out, "pod/"+p.Name)
	}
	secrets, err := c.CoreV1().Secrets(f.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		out = append(out, "secret/"+s.Name)
	}
	return out
}

// TestRuntimeLifecycle: create, start, wait for the exit code, read the
// logs, find the Pod by label (with the exact hatchery labels), remove it
// leaving no Pod and no Secret; what is gone is ErrContainerNotFound, a
// Pod that ended cannot be killed (ErrConflict).
func TestRuntimeLifecycle(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := ctxT(t, 3*time.Minute)
	id, wait := f.run(t, f.spec("m-life", "c-life0001", "sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 3"))
	ex := waitExit(t, wait, 2*time.Minute)
	if ex.Err != nil || ex.Code != 3 || ex.Ended != "" {
		t.Fatalf("Wait = %+v, want exit code 3, no error, not ended by Kubernetes", ex)
	}
	// A second wait on an ended Pod returns at once.
	if ex := waitExit(t, f.rt.Wait(ctx, id, false), time.Minute); ex.Code != 3 {
		t.Errorf("Wait(not next) on the ended pod = %+v, want code 3", ex)
	}
	st, err := f.rt.Inspect(ctx, id)
	if err != nil || st.Running || st.ExitCode != 3 {
		t.Errorf("Inspect = %+v, %v; want not running, code 3", st, err)
	}
	var logs bytes.Buffer
	if err := f.rt.Logs(ctx, id, false, &logs); err != nil {
		t.Fatalf("Logs: %v", err)
	}
	if !strings.Contains(logs.String(), "to-stdout") || !strings.Contains(logs.String(), "to-stderr") {
		t.Errorf("Logs = %q, want both streams", logs.String())
	}
	list, err := f.rt.List(ctx, hatchery.LabelInstance, "m-life")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(list) != 1 || list[0].ID != id || list[0].State != "exited" {
		t.Fatalf("List = %+v, want the one pod %s, exited", list, id)
	}
	if got := list[0].Labels; got[hatchery.LabelChannel] != "cli/local" || got[hatchery.LabelChickID] != "c-life0001" || got[hatchery.LabelTier] != "local" {
		t.Errorf("List labels = %v, want the hatchery's labels back (channel cli/local)", got)
	}
	if other, err := f.rt.List(ctx, hatchery.LabelInstance, "m-other"); err != nil || len(other) != 0 {
		t.Errorf("List of another instance = %+v, %v; want none", other, err)
	}
	if err := f.rt.Kill(ctx, id, "KILL"); !errors.Is(err, hatchery.ErrConflict) {
		t.Errorf("Kill of an ended pod = %v, want ErrConflict", err)
	}
	if err := f.rt.Remove(ctx, id); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := f.rt.Inspect(ctx, id); !errors.Is(err, hatchery.ErrContainerNotFound) {
		t.Errorf("Inspect after Remove = %v, want ErrContainerNotFound", err)
	}
	if err := f.rt.Remove(ctx, id); !errors.Is(err, hatchery.ErrContainerNotFound) {
		t.Errorf("second Remove = %v, want ErrContainerNotFound", err)
	}
	if err := f.rt.Logs(ctx, id, false, &logs); !errors.Is(err, hatchery.ErrContainerNotFound) {
		t.Errorf("Logs after Remove = %v, want ErrContainerNotFound", err)
	}
	if ex := waitExit(t, f.rt.Wait(ctx, id, false), time.Minute); !errors.Is(ex.Err, hatchery.ErrContainerNotFound) {
		t.Errorf("Wait(not next) on a removed pod = %+v, want ErrContainerNotFound", ex)
	}
	if left := f.leftovers(t); len(left) != 0 {
		t.Errorf("after Remove the namespace holds %v", left)
	}
	if v, err := f.rt.Version(ctx); err != nil || v != "Kubernetes "+kubetest.Version {
		t.Errorf("Version = %q, %v; want %s", v, err, kubetest.Version)
	}
}

// TestRuntimeCreatedNotStarted: Create makes the chick's Secret only; List
// reports it created (so a restart reaps it), Inspect not running, and
// Remove leaves nothing.
func TestRuntimeCreatedNotStarted(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := ctxT(t, time.Minute)
	id, err := f.rt.Create(ctx, f.spec("m-made", "c-made0001", "true"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	list, err := f.rt.List(ctx, hatchery.LabelInstance, "m-made")
	if err != nil || len(list) != 1 || list[0].ID != id || list[0].State != hatchery.ContainerCreated {
		t.Fatalf("List = %+v, %v; want %s created", list, err, id)
	}
	if st, err := f.rt.Inspect(ctx, id); err != nil || st.Running {
		t.Errorf("Inspect = %+v, %v; want created, not running", st, err)
	}
	if err := f.rt.Remove(ctx, id); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if left := f.leftovers(t); len(left) != 0 {
		t.Errorf("after Remove the namespace holds %v", left)
	}
	if err := f.rt.Start(ctx, id); !errors.Is(err, hatchery.ErrContainerNotFound) {
		t.Errorf("Start after Remove = %v, want ErrContainerNotFound", err)
	}
}

// TestRuntimeKill: TERM deletes the Pod with its grace (the chick's trap
// runs and exits with its own code); KILL ends one that ignores TERM at
// once. Either way the Pod and its Secret are gone after Remove.
func TestRuntimeKill(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := ctxT(t, 3*time.Minute)
	term, termWait := f.run(t, f.spec("m-kill", "c-term0001", "sh", "-c", "trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 1; done"))
	stubborn, stubbornWait := f.run(t, f.spec("m-kill", "c-kill0001", "sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"))
	for _, id := range []string{term, stubborn} {
		waitLog(t, f.rt, id, "ready")
	}
	if err := f.rt.Kill(ctx, term, "TERM"); err != nil {
		t.Fatalf("Kill TERM: %v", err)
	}
	if ex := waitExit(t, termWait, 2*time.Minute); ex.Err != nil || ex.Code != 7 {
		t.Errorf("Wait after TERM = %+v, want the trap's exit code 7", ex)
	}
	if err := f.rt.Kill(ctx, stubborn, "KILL"); err != nil {
		t.Fatalf("Kill KILL: %v", err)
	}
	if ex := waitExit(t, stubbornWait, 2*time.Minute); ex.Err != nil || ex.Code != 137 {
		t.Errorf("Wait after KILL = %+v, want 137", ex)
	}
	for _, id := range []string{term, stubborn} {
		if err := f.rt.Remove(ctx, id); err != nil && !errors.Is(err, hatchery.ErrContainerNotFound) {
			t.Errorf("Remove(%s): %v", id, err)
		}
	}
	if left := f.leftovers(t); len(left) != 0 {
		t.Errorf("after the kills the namespace holds %v", left)
	}
}

// TestRuntimeLogsFollowFromStart: a follow begun the moment the Pod is
// created (before its container starts, and so before the kubelet has
// its log file) shows the whole log once, in order, and ends with the
// container.
func TestRuntimeLogsFollowFromStart(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := ctxT(t, 3*time.Minute)
	id, wait := f.run(t, f.spec("m-follow", "c-follow001", "sh", "-c", "for i in 1 2 3 4 5 6; do echo line-$i; sleep 0.5; done"))
	var logs bytes.Buffer
	if err := f.rt.Logs(ctx, id, true, &logs); err != nil {
		t.Fatalf("Logs(follow): %v", err)
	}
	want := "line-1\nline-2\nline-3\nline-4\nline-5\nline-6\n"
	if logs.String() != want {
		t.Errorf("Logs(follow) from the start = %q, want %q", logs.String(), want)
	}
	if ex := waitExit(t, wait, 2*time.Minute); ex.Err != nil || ex.Code != 0 {
		t.Errorf("Wait = %+v, want exit 0", ex)
	}
}

// waitLog follows the Pod's log until it shows want.
func waitLog(t *testing.T, rt *kubernetes.Runtime, id, want string) {
	t.Helper()
	// Minutes: a Pod on a machine busy with a cold build takes long to start.
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	w := &watchWriter{want: want, found: make(chan struct{})}
	ended := make(chan error, 1)
	go func() { ended <- rt.Logs(ctx, id, true, w) }()
	select {
	case <-w.found:
	case err := <-ended:
		select {
		case <-w.found:
		default:
			t.Fatalf("pod %s: the log follow ended (%v) before %q (got %q)", id, err, want, w.String())
		}
	case <-ctx.Done():
		t.Fatalf("pod %s never logged %q (got %q)", id, want, w.String())
	}
}

type watchWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	want  string
	found chan struct{}
	done  bool
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if !w.done && strings.Contains(w.buf.String(), w.want) {
		w.done = true
		close(w.found)
	}
	return n, err
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestRuntimeReopen: a runtime opened afresh (Mother restarted) finds a
// running chick Pod by its instance label, with its labels, waits for it,
// and reads its exit code.
func TestRuntimeReopen(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := ctxT(t, 3*time.Minute)
	wait, release := trigger(t, f)
	id, _ := f.run(t, f.spec("m-again", "c-again001", "sh", "-c", "echo ready; "+wait+"; exit 5"))
	waitLog(t, f.rt, id, "ready")
	f.rt.Close()

	rt, err := kubernetes.Open(f.host, kubernetes.Options{})
	if err != nil {
		t.Fatalf("Open again: %v", err)
	}
	defer rt.Close()
	list, err := rt.List(ctx, hatchery.LabelInstance, "m-again")
	if err != nil || len(list) != 1 {
		t.Fatalf("List after reopening = %+v, %v; want the one pod", list, err)
	}
	if c := list[0]; c.ID != id || c.State != hatchery.ContainerRunning || c.Labels[hatchery.LabelChickID] != "c-again001" {
		t.Fatalf("List after reopening = %+v, want %s running, chick c-again001", c, id)
	}
	exit := rt.Wait(ctx, id, false)
	if st, err := rt.Inspect(ctx, id); err != nil || !st.Running {
		t.Errorf("Inspect = %+v, %v; want running", st, err)
	}
	release()
	if ex := waitExit(t, exit, 2*time.Minute); ex.Err != nil || ex.Code != 5 {
		t.Errorf("Wait after reopening = %+v, want code 5", ex)
	}
}

// trigger listens on the cluster bridge's address: a chick Pod running
// release's script ("nc ADDR | grep -q go") goes on when the test calls
// the returned func, which says "go" to every connection.
func trigger(t *testing.T, f *fixture) (script string, release func()) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(f.k.GatewayIP, "0"))
	if err != nil {
		t.Fatalf("listen on the cluster bridge: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	conns := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(conns)
				return
			}
			conns <- c
		}
	}()
	var once sync.Once
	return fmt.Sprintf("nc %s | grep -q go", l.Addr()), func() {
		once.Do(func() {
			c, ok := <-conns
			if !ok {
				return
			}
			fmt.Fprintln(c, "go")
			c.Close()
		})
	}
}

// TestRuntimeEndedByKubernetes: a Pod whose image is not on the node (pull
// policy Never) is reported at once, with the reason; a Pod deleted by
// someone else while it runs ends the wait, saying so.
func TestRuntimeEndedByKubernetes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := ctxT(t, 3*time.Minute)
	s := f.spec("m-ended", "c-noimg001", "true")
	s.Image = "mother-no-such-image:none"
	_, wait := f.run(t, s)
	ex := waitExit(t, wait, 2*time.Minute)
	if ex.Err != nil || ex.Code != -1 || !strings.Contains(ex.Ended, "ErrImageNeverPull") {
		t.Errorf("Wait for a pod without its image = %+v, want ended with ErrImageNeverPull", ex)
	}

	id, wait := f.run(t, f.spec("m-ended", "c-gone0001", "sh", "-c", "echo ready; while :; do sleep 1; done"))
	waitLog(t, f.rt, id, "ready")
	zero := int64(0)
	if err := f.k.Client(t).CoreV1().Pods(f.ns).Delete(ctx, id, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	ex = waitExit(t, wait, 2*time.Minute)
	if ex.Err != nil || !strings.Contains(ex.Ended, "deleted") {
		t.Errorf("Wait for a pod deleted under it = %+v, want ended, saying it was deleted", ex)
	}
}

// TestRuntimeEvicted: a chick that fills its /workspace past the
// emptyDir's sizeLimit is evicted by the kubelet (its local storage
// eviction), and Wait says so, with the kubelet's message.
func TestRuntimeEvicted(t *testing.T) {
	t.Parallel()
	f := setup(t)
	_, wait := f.run(t, f.spec("m-evict", "c-evict001", "sh", "-c", "head -c 100000000 /dev/zero > /workspace/fill; echo filled; while :; do sleep 1; done"))
	ex := waitExit(t, wait, 4*time.Minute)
	if ex.Err != nil || !strings.HasPrefix(ex.Ended, "evicted") || !strings.Contains(ex.Ended, "exceeds the limit") {
		t.Errorf("Wait for a pod past its workspace's size = %+v, want evicted, with the kubelet's message", ex)
	}
	t.Logf("ended: %s", ex.Ended)
}

// TestRuntimeUnreachable: an API server that does not answer is
// ErrUnreachable.
func TestRuntimeUnreachable(t *testing.T) {
	t.Parallel()
	rt, err := kubernetes.New(&rest.Config{Host: "https://127.0.0.1:1", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, config.DockerHost{Name: "gone", Kind: config.HostKubernetes}, kubernetes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	ctx := ctxT(t, 30*time.Second)
	if _, err := rt.Version(ctx); !errors.Is(err, hatchery.ErrUnreachable) {
		t.Errorf("Version = %v, want ErrUnreachable", err)
	}
	if _, err := rt.List(ctx, hatchery.LabelInstance, "m-1"); !errors.Is(err, hatchery.ErrUnreachable) {
		t.Errorf("List = %v, want ErrUnreachable", err)
	}
	if ex := <-rt.Wait(ctx, "x", false); !errors.Is(ex.Err, hatchery.ErrUnreachable) {
		t.Errorf("Wait = %+v, want ErrUnreachable", ex)
	}
}

// restricted makes the namespace enforce the "restricted" Pod Security
// Standard: the API server refuses a Pod that is not hardened to it.
func (f *fixture) restricted(t *testing.T) {
	t.Helper()
	patch := []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"restricted","pod-security.kubernetes.io/enforce-version":"latest"}}}`)
	if _, err := f.k.Client(t).CoreV1().Namespaces().Patch(ctxT(t, 30*time.Second), f.ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("label namespace %s restricted: %v", f.ns, err)
	}
}

// TestPodSpecHardened reads a chick's Pod and Secret back from the API:
// hardened as the issue asks (and admitted in a namespace that enforces
// the restricted Pod Security Standard), the token only in the Secret
// (owned by the Pod), the limits and sizes from the spec.
func TestPodSpecHardened(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.restricted(t)
	ctx := ctxT(t, 2*time.Minute)
	s := f.spec("m-spec", "c-spec0001", "sh", "-c", "sleep 600")
	s.Deadline, s.KillGrace = 20*time.Minute, 7*time.Second
	id, _ := f.run(t, s)
	c := f.k.Client(t)
	p, err := c.CoreV1().Pods(f.ns).Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(p)
	if strings.Contains(string(raw), tokenOf("c-spec0001")) {
		t.Errorf("the token is in the pod spec:\n%s", raw)
	}
	ps := p.Spec
	check := func(what string, ok bool) {
		t.Helper()
		if !ok {
			t.Errorf("%s: not as wanted; pod spec:\n%s", what, raw)
		}
	}
	check("restartPolicy Never", ps.RestartPolicy == corev1.RestartPolicyNever)
	check("automountServiceAccountToken false", ps.AutomountServiceAccountToken != nil && !*ps.AutomountServiceAccountToken)
	check("enableServiceLinks false", ps.EnableServiceLinks != nil && !*ps.EnableServiceLinks)
	check("activeDeadlineSeconds from the timeout and grace", ps.ActiveDeadlineSeconds != nil && *ps.ActiveDeadlineSeconds == 20*60+7+30)
	check("terminationGracePeriodSeconds from the kill grace", ps.TerminationGracePeriodSeconds != nil && *ps.TerminationGracePeriodSeconds == 7)
	check("pod runAsNonRoot, uid 65534", ps.SecurityContext != nil && ps.SecurityContext.RunAsNonRoot != nil && *ps.SecurityContext.RunAsNonRoot &&
		ps.SecurityContext.RunAsUser != nil && *ps.SecurityContext.RunAsUser == 65534 && ps.SecurityContext.RunAsGroup != nil && *ps.SecurityContext.RunAsGroup == 65534)
	check("pod seccomp RuntimeDefault", ps.SecurityContext.SeccompProfile != nil && ps.SecurityContext.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault)
	check("no host namespaces", !ps.HostNetwork && !ps.HostPID && !ps.HostIPC)
	if len(ps.Containers) != 1 {
		t.Fatalf("containers = %d, want 1", len(ps.Containers))
	}
	ct := ps.Containers[0]
	sc := ct.SecurityContext
	check("container security context", sc != nil)
	check("readOnlyRootFilesystem", sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem)
	check("allowPrivilegeEscalation false", sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation)
	check("not privileged", sc.Privileged != nil && !*sc.Privileged)
	check("capabilities drop ALL", sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) && len(sc.Capabilities.Add) == 0)
	check("imagePullPolicy from the host", ct.ImagePullPolicy == corev1.PullNever)
	check("working dir", ct.WorkingDir == hatchery.Workspace)
	lim := ct.Resources.Limits
	check("memory limit 128Mi", lim.Memory().Value() == 128<<20)
	check("cpu limit 250m", lim.Cpu().MilliValue() == 250)
	sizes := map[string]string{}
	for _, v := range ps.Volumes {
		check("volume "+v.Name+" is an emptyDir", v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil)
		if v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil {
			sizes[v.Name] = string(v.EmptyDir.Medium) + ":" + v.EmptyDir.SizeLimit.String()
		}
	}
	mounts := map[string]string{}
	for _, m := range ct.VolumeMounts {
		mounts[m.MountPath] = m.Name
	}
	check("/workspace and /tmp mounts", len(mounts) == 2 && sizes[mounts["/workspace"]] == ":64Mi" && sizes[mounts["/tmp"]] == "Memory:16Mi")
	var tokenRef *corev1.SecretKeySelector
	for _, e := range ct.Env {
		if e.Name == hatchery.EnvToken {
			check("the token has no value in the spec", e.Value == "" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil)
			if e.ValueFrom != nil {
				tokenRef = e.ValueFrom.SecretKeyRef
			}
		}
	}
	if tokenRef == nil {
		t.Fatalf("no %s in the container's env:\n%s", hatchery.EnvToken, raw)
	}
	check("labels", p.Labels[hatchery.LabelInstance] == "m-spec" && p.Labels[hatchery.LabelChickID] == "c-spec0001" && p.Labels[hatchery.LabelTier] == "local")

	sec, err := c.CoreV1().Secrets(f.ns).Get(ctx, tokenRef.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chick's secret: %v", err)
	}
	if got := string(sec.Data[tokenRef.Key]); got != tokenOf("c-spec0001") {
		t.Errorf("secret %s[%s] = %q, want the token", sec.Name, tokenRef.Key, got)
	}
	if len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].UID != p.UID || sec.OwnerReferences[0].Kind != "Pod" {
		t.Errorf("secret owners = %+v, want the pod %s (%s)", sec.OwnerReferences, p.Name, p.UID)
	}
	if err := f.rt.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if left := f.leftovers(t); len(left) != 0 {
		t.Errorf("after Remove the namespace holds %v", left)
	}
}

// TestPlacement: a tier's node selector, toleration and extended resource
// reach its Pods; the scheduler places one whose selector the node
// matches (and never one whose selector it lacks).
func TestPlacement(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := ctxT(t, 2*time.Minute)
	f.host.Placement = map[string]config.Placement{
		"gpu": {
			NodeSelector:      map[string]string{"mother.test/gpu": "true"},
			Tolerations:       []config.Toleration{{Key: "nvidia.com/gpu", Operator: "Exists", Effect: "NoSchedule"}},
			ExtendedResources: map[string]int64{"example.com/gpu": 1},
		},
		"*": {NodeSelector: map[string]string{corev1.LabelHostname: f.k.NodeName}},
	}
	rt, err := kubernetes.Open(f.host, kubernetes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	gpu := f.spec("m-place", "c-gpu00001", "true")
	gpu.Labels[hatchery.LabelTier] = "gpu"
	gid, err := rt.Create(ctx, gpu)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Remove(context.Background(), gid)
	if err := rt.Start(ctx, gid); err != nil {
		t.Fatal(err)
	}
	c := f.k.Client(t)
	p, err := c.CoreV1().Pods(f.ns).Get(ctx, gid, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ct := p.Spec.Containers[0]
	q := ct.Resources.Limits["example.com/gpu"]
	if p.Spec.NodeSelector["mother.test/gpu"] != "true" || q.Value() != 1 || len(p.Spec.Tolerations) == 0 || p.Spec.Tolerations[0].Key != "nvidia.com/gpu" {
		t.Errorf("the gpu tier's pod: nodeSelector %v, limits %v, tolerations %+v", p.Spec.NodeSelector, ct.Resources.Limits, p.Spec.Tolerations)
	}

	// Any other tier: the "*" placement, on the one node, runs.
	id, wait := func() (string, <-chan hatchery.Exit) {
		s := f.spec("m-place", "c-local001", "true")
		id, err := rt.Create(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rt.Remove(context.Background(), id) })
		w := rt.Wait(ctx, id, true)
		if err := rt.Start(ctx, id); err != nil {
			t.Fatal(err)
		}
		return id, w
	}()
	if ex := waitExit(t, wait, 2*time.Minute); ex.Err != nil || ex.Code != 0 {
		t.Errorf("the local tier's pod = %+v, want exit 0", ex)
	}
	lp, err := c.CoreV1().Pods(f.ns).Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lp.Spec.NodeName != f.k.NodeName || lp.Spec.NodeSelector[corev1.LabelHostname] != f.k.NodeName {
		t.Errorf("the local tier's pod: node %q, selector %v", lp.Spec.NodeName, lp.Spec.NodeSelector)
	}
	// The gpu Pod is never placed: no node has the label or the resource.
	p, err = c.CoreV1().Pods(f.ns).Get(ctx, gid, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != "" {
		t.Errorf("the gpu pod was placed on %s, which has no gpu", p.Spec.NodeName)
	}
}

// TestNetworkPolicy: isolated chicks get the instance's NetworkPolicy (no
// ingress; egress to Mother's address and port only, plus the cluster DNS
// when the address is a name) and the label it selects; bridge chicks do
// not. The test cluster's bridge CNI does not enforce policies: this
// checks the objects, not their enforcement.
func TestNetworkPolicy(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := ctxT(t, 2*time.Minute)
	c := f.k.Client(t)

	iso := f.spec("m-net", "c-iso00001", "true")
	iso.Network = config.NetworkIsolated
	iid, err := f.rt.Create(ctx, iso)
	if err != nil {
		t.Fatal(err)
	}
	defer f.rt.Remove(context.Background(), iid)
	if err := f.rt.Start(ctx, iid); err != nil {
		t.Fatal(err)
	}
	pol, err := c.NetworkingV1().NetworkPolicies(f.ns).Get(ctx, kubernetes.PolicyName("m-net"), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chicks' network policy: %v", err)
	}
	raw, _ := json.Marshal(pol.Spec)
	if len(pol.Spec.Ingress) != 0 || !slices.Contains(pol.Spec.PolicyTypes, "Ingress") || !slices.Contains(pol.Spec.PolicyTypes, "Egress") {
		t.Errorf("policy admits ingress: %s", raw)
	}
	if len(pol.Spec.Egress) != 1 || len(pol.Spec.Egress[0].To) != 1 || pol.Spec.Egress[0].To[0].IPBlock == nil ||
		pol.Spec.Egress[0].To[0].IPBlock.CIDR != f.k.GatewayIP+"/32" || len(pol.Spec.Egress[0].Ports) != 1 ||
		*pol.Spec.Egress[0].Ports[0].Port != intstr.FromInt32(7777) {
		t.Errorf("policy egress = %s, want %s/32 port 7777 only", raw, f.k.GatewayIP)
	}
	p, err := c.CoreV1().Pods(f.ns).Get(ctx, iid, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range pol.Spec.PodSelector.MatchLabels {
		if p.Labels[k] != v {
			t.Errorf("the policy's selector %s=%s does not select the isolated pod (labels %v)", k, v, p.Labels)
		}
	}

	br := f.spec("m-net", "c-bridge01", "true")
	bid, err := f.rt.Create(ctx, br)
	if err != nil {
		t.Fatal(err)
	}
	defer f.rt.Remove(context.Background(), bid)
	if err := f.rt.Start(ctx, bid); err != nil {
		t.Fatal(err)
	}
	bp, err := c.CoreV1().Pods(f.ns).Get(ctx, bid, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	selected := true
	for k, v := range pol.Spec.PodSelector.MatchLabels {
		selected = selected && bp.Labels[k] == v
	}
	if selected {
		t.Errorf("the policy selects a bridge chick (labels %v)", bp.Labels)
	}

	// Another instance whose Mother is a name: DNS to kube-system too.
	named := f.spec("m-named", "c-named001", "true")
	named.Network = config.NetworkNone
	named.Env[0] = hatchery.EnvAddr + "=localhost:7443"
	nid, err := f.rt.Create(ctx, named)
	if err != nil {
		t.Fatal(err)
	}
	defer f.rt.Remove(context.Background(), nid)
	np, err := c.NetworkingV1().NetworkPolicies(f.ns).Get(ctx, kubernetes.PolicyName("m-named"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nraw, _ := json.Marshal(np.Spec)
	if len(np.Spec.Egress) != 2 || !strings.Contains(string(nraw), `"cidr":"127.0.0.1/32"`) || !strings.Contains(string(nraw), `"kubernetes.io/metadata.name":"kube-system"`) {
		t.Errorf("policy for a named address = %s, want its addresses on 7443 and DNS to kube-system", nraw)
	}

	// A changed address updates the policy.
	iso2 := f.spec("m-net", "c-iso00002", "true")
	iso2.Network = config.NetworkIsolated
	iso2.Env[0] = hatchery.EnvAddr + "=" + f.k.GatewayIP + ":7778"
	id2, err := f.rt.Create(ctx, iso2)
	if err != nil {
		t.Fatal(err)
	}
	defer f.rt.Remove(context.Background(), id2)
	pol, err = c.NetworkingV1().NetworkPolicies(f.ns).Get(ctx, kubernetes.PolicyName("m-net"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := *pol.Spec.Egress[0].Ports[0].Port; got != intstr.FromInt32(7778) {
		t.Errorf("policy port after the address changed = %v, want 7778", got.String())
	}
	if err := f.rt.RemovePolicy(ctx, "m-net"); err != nil {
		t.Errorf("RemovePolicy: %v", err)
	}
	if _, err := c.NetworkingV1().NetworkPolicies(f.ns).Get(ctx, kubernetes.PolicyName("m-net"), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("policy after RemovePolicy: %v, want not found", err)
	}
}

// inspectScript prints, section by section, what a chick can see of its
// environment, privileges, mounts and filesystem (as the Docker chicks'
// security test does).
const inspectScript = `
echo '== env'; env
echo '== status'; grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status
echo '== mounts'; cat /proc/self/mounts
echo '== sa'; ls -la /var/run/secrets/kubernetes.io /run/secrets/kubernetes.io 2>&1
echo '== secrets'; find / \( -path /proc -o -path /sys \) -prune -o \( -name token -o -name ca.crt -o -name namespace \) -print 2>/dev/null
echo '== rootfs'; for p in /probe /usr/local/bin/probe /etc/probe /bin/probe; do touch "$p" 2>&1; done
echo '== workspace-write'; touch /workspace/probe && echo workspace writable
echo '== tmp-write'; touch /tmp/probe && echo tmp writable
echo '== end'
`

// TestInsideChickPod runs the inspection in a chick Pod: no service
// account token, no secret in the environment but the chick's own token,
// no service links, no capability, no-new-privileges, the seccomp filter,
// uid 65534, a read-only root with /workspace and /tmp writable (/tmp in
// memory).
func TestInsideChickPod(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.restricted(t)
	ctx := ctxT(t, 3*time.Minute)
	c := f.k.Client(t)
	// A Service in the namespace: with service links on, its address
	// would be in every Pod's environment.
	_, err := c.CoreV1().Services(f.ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "probe"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"app": "none"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create a service: %v", err)
	}
	s := f.spec("m-inside", "c-inside01", "sh", "-c", inspectScript)
	s.Network = config.NetworkIsolated
	id, wait := f.run(t, s)
	if ex := waitExit(t, wait, 2*time.Minute); ex.Err != nil || ex.Code != 0 {
		t.Fatalf("Wait = %+v, want exit 0", ex)
	}
	var logs bytes.Buffer
	if err := f.rt.Logs(ctx, id, false, &logs); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	sec := sections(out)
	if _, ok := sec["end"]; !ok {
		t.Fatalf("the inspection did not run to its end:\n%s", out)
	}
	t.Logf("seen from inside the chick pod:\n%s", out)

	// Environment: the chick's own variables and the kubelet's address of
	// the API service (always set, not a secret); nothing else, no
	// service links, and no secret but the chick's own token.
	allowed := map[string]bool{"PATH": true, "HOME": true, "HOSTNAME": true, "SHLVL": true, "PWD": true, "TMPDIR": true,
		hatchery.EnvAddr: true, hatchery.EnvToken: true, hatchery.EnvChickID: true}
	for _, line := range strings.Split(strings.TrimSpace(sec["env"]), "\n") {
		name, val, _ := strings.Cut(line, "=")
		switch {
		case allowed[name]:
		case strings.HasPrefix(name, "KUBERNETES_SERVICE_") || strings.HasPrefix(name, "KUBERNETES_PORT"):
			if strings.Contains(strings.ToLower(val), "token") {
				t.Errorf("env %s holds something other than an address: %q", name, val)
			}
		default:
			t.Errorf("unexpected variable in the chick's environment: %s", line)
		}
	}
	if !strings.Contains(sec["env"], hatchery.EnvToken+"="+tokenOf("c-inside01")) {
		t.Errorf("the chick's token did not reach it from its secret (the checks prove nothing):\n%s", sec["env"])
	}
	if strings.Contains(sec["env"], "PROBE_SERVICE") {
		t.Errorf("service links in the environment:\n%s", sec["env"])
	}
	// Files: no service account token, no Kubernetes secret volume.
	if n := strings.Count(sec["sa"], "No such file or directory"); n != 2 {
		t.Errorf("a service account directory is mounted:\n%s", sec["sa"])
	}
	if strings.TrimSpace(sec["secrets"]) != "" {
		t.Errorf("token-like files in the chick pod:\n%s", sec["secrets"])
	}
	// Privileges.
	for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		if !regexp.MustCompile(`(?m)^` + set + `:\s+0000000000000000$`).MatchString(sec["status"]) {
			t.Errorf("%s is not empty:\n%s", set, sec["status"])
		}
	}
	if !regexp.MustCompile(`(?m)^NoNewPrivs:\s+1$`).MatchString(sec["status"]) {
		t.Errorf("no-new-privileges is off:\n%s", sec["status"])
	}
	if !regexp.MustCompile(`(?m)^Seccomp:\s+2$`).MatchString(sec["status"]) {
		t.Errorf("no seccomp filter:\n%s", sec["status"])
	}
	if !regexp.MustCompile(`(?m)^Uid:\s+65534\s+65534\s+65534\s+65534$`).MatchString(sec["status"]) {
		t.Errorf("the chick does not run as 65534:\n%s", sec["status"])
	}
	// Mounts: read-only root, writable workspace, /tmp a tmpfs.
	rootRO, wsRW, tmpFS := false, false, false
	for _, line := range strings.Split(sec["mounts"], "\n") {
		fl := strings.Fields(line)
		if len(fl) < 4 {
			continue
		}
		opts := "," + fl[3] + ","
		switch fl[1] {
		case "/":
			rootRO = strings.Contains(opts, ",ro,")
		case hatchery.Workspace:
			wsRW = strings.Contains(opts, ",rw,")
		case "/tmp":
			tmpFS = fl[2] == "tmpfs" && strings.Contains(opts, ",rw,")
		}
		if strings.Contains(fl[1], "serviceaccount") {
			t.Errorf("a service account mount: %s", line)
		}
	}
	if !rootRO || !wsRW || !tmpFS {
		t.Errorf("root read-only %v, workspace writable %v, /tmp a writable tmpfs %v; mounts:\n%s", rootRO, wsRW, tmpFS, sec["mounts"])
	}
	if n := strings.Count(sec["rootfs"], "Read-only file system"); n != 4 {
		t.Errorf("the root filesystem took a write (%d of 4 refused):\n%s", n, sec["rootfs"])
	}
	if !strings.Contains(sec["workspace-write"], "workspace writable") || !strings.Contains(sec["tmp-write"], "tmp writable") {
		t.Errorf("workspace or /tmp not writable:\n%s", out)
	}
}

// sections splits the script's output at its "== name" lines.
func sections(out string) map[string]string {
	m := map[string]string{}
	name := ""
	for _, line := range strings.Split(out, "\n") {
		if n, ok := strings.CutPrefix(line, "== "); ok {
			name = strings.TrimSpace(n)
			m[name] = ""
			continue
		}
		if name != "" {
			m[name] += line + "\n"
		}
	}
	return m
}
