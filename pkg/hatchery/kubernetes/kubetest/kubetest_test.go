package kubetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestMain(m *testing.M) { Main(m) }

var (
	bbOnce sync.Once
	bbErr  error
	bbOut  []byte
)

// busyboxImage builds a FROM scratch image holding only busybox-static,
// once per test binary, on the local Docker engine.
func busyboxImage(t *testing.T) string {
	t.Helper()
	const tag = "mother-kubetest-busybox:1"
	bbOnce.Do(func() {
		dir := t.TempDir()
		bb, err := os.ReadFile("/bin/busybox")
		if err != nil {
			bbErr = err
			return
		}
		if bbErr = os.WriteFile(filepath.Join(dir, "busybox"), bb, 0o755); bbErr != nil {
			return
		}
		if bbErr = os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nCOPY busybox /bin/busybox\n"), 0o644); bbErr != nil {
			return
		}
		bbOut, bbErr = exec.Command("docker", "build", "-q", "-t", tag, dir).CombinedOutput()
	})
	if bbErr != nil {
		t.Fatalf("build %s: %v\n%s", tag, bbErr, bbOut)
	}
	return tag
}

// waitPod polls the Pod until done says so, or fails the test.
func waitPod(t *testing.T, c *kubernetes.Clientset, ns, name string, wait time.Duration, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	var last *corev1.Pod
	for {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = p
			if done(p) {
				return p
			}
		} else if ctx.Err() == nil && !apierrors.IsNotFound(err) {
			t.Fatalf("get pod %s/%s: %v", ns, name, err)
		}
		if ctx.Err() != nil {
			if last != nil {
				t.Fatalf("pod %s/%s: gave up waiting; phase %s, status %+v", ns, name, last.Status.Phase, last.Status)
			}
			t.Fatalf("pod %s/%s: gave up waiting: %v", ns, name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestClusterRunsAPod: the node is Ready, a Pod from an imported FROM
// scratch image is placed by the scheduler (no nodeName), reaches a
// listener on the host at GatewayIP, runs to completion, its logs are read
// through the apiserver, and it is deleted.
func TestClusterRunsAPod(t *testing.T) {
	k := Cluster(t)
	c := k.Client(t)
	ctx := t.Context()

	n, err := c.CoreV1().Nodes().Get(ctx, k.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get node %s: %v", k.NodeName, err)
	}
	ready := false
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			ready = cond.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		t.Fatalf("node %s not Ready: %+v", k.NodeName, n.Status.Conditions)
	}
	if got := n.Status.NodeInfo.KubeletVersion; got != Version {
		t.Errorf("kubelet version = %q, want %q", got, Version)
	}

	image := busyboxImage(t)
	k.ImportImage(t, image)
	ns := k.Namespace(t, "kubetest")

	// A listener on the host, on the cluster's bridge: the Pod fetches a
	// secret word from it and prints it.
	word := make([]byte, 8)
	if _, err := rand.Read(word); err != nil {
		t.Fatal(err)
	}
	secret := hex.EncodeToString(word)
	l, err := net.Listen("tcp", net.JoinHostPort(k.GatewayIP, "0"))
	if err != nil {
		t.Fatalf("listen on the gateway %s: %v", k.GatewayIP, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, secret) })}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	no := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Labels: map[string]string{"app": "kubetest"}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           image,
				ImagePullPolicy: corev1.PullNever,
				Command: []string{"/bin/busybox", "sh", "-c",
					fmt.Sprintf("echo hello from the pod; echo word=$(/bin/busybox wget -q -O - http://%s)", l.Addr().String())},
			}},
		},
	}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	p := waitPod(t, c, ns, "hello", 3*time.Minute, func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
	if p.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("pod phase = %s, want Succeeded; status %+v", p.Status.Phase, p.Status)
	}
	if p.Spec.NodeName != k.NodeName {
		t.Errorf("pod placed on %q, want the scheduler to place it on %q", p.Spec.NodeName, k.NodeName)
	}
	scheduled := false
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionTrue {
			scheduled = true
		}
	}
	if !scheduled {
		t.Errorf("pod has no PodScheduled=True condition: %+v", p.Status.Conditions)
	}
	evs, err := c.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=hello,reason=Scheduled"})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	if len(evs.Items) == 0 {
		t.Errorf("no Scheduled event for the pod: the scheduler did not place it")
	} else if src := evs.Items[0].ReportingController + evs.Items[0].Source.Component; !strings.Contains(src, "default-scheduler") {
		t.Errorf("Scheduled event from %q, want default-scheduler", src)
	}

	logs, err := c.CoreV1().Pods(ns).GetLogs("hello", &corev1.PodLogOptions{Container: "main"}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("read pod logs through the apiserver: %v", err)
	}
	if want := "hello from the pod\nword=" + secret + "\n"; string(logs) != want {
		t.Errorf("pod logs = %q, want %q", logs, want)
	}

	if err := c.CoreV1().Pods(ns).Delete(ctx, "hello", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod: %v", err)
	}
	waitGone(t, func(ctx context.Context) error {
		_, err := c.CoreV1().Pods(ns).Get(ctx, "hello", metav1.GetOptions{})
		return err
	})
}

// waitGone polls get until it reports NotFound.
func waitGone(t *testing.T, get func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for {
		err := get(ctx)
		if apierrors.IsNotFound(err) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("still there after 2 minutes (last: %v)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestClusterCollectsOwnedObjects: the controller-manager runs, so a
// Secret owned by a Pod goes with the Pod (the garbage collector).
func TestClusterCollectsOwnedObjects(t *testing.T) {
	k := Cluster(t)
	c := k.Client(t)
	ctx := t.Context()
	image := busyboxImage(t)
	k.ImportImage(t, image)
	ns := k.Namespace(t, "kubetest-gc")
	no := false
	pod, err := c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "owner"},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name: "main", Image: image, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/bin/busybox", "sleep", "600"},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}
	if _, err := c.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "owned", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
		}}},
		StringData: map[string]string{"token": "x"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create secret: %v", err)
	}
	waitPod(t, c, ns, "owner", 3*time.Minute, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if err := c.CoreV1().Pods(ns).Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod: %v", err)
	}
	waitGone(t, func(ctx context.Context) error {
		_, err := c.CoreV1().Secrets(ns).Get(ctx, "owned", metav1.GetOptions{})
		return err
	})
}

// TestClusterReused: a second call returns the same cluster, and the
// machine-wide record (what another test binary or kubecluster reads)
// names the same apiserver.
func TestClusterReused(t *testing.T) {
	a := Cluster(t)
	b := Cluster(t)
	if a != b {
		t.Errorf("Cluster returned %p then %p, want the same cluster", a, b)
	}
	s, err := Status(t.Context(), "")
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if s.Server != a.Server || s.Token != a.Token || s.GatewayIP != a.GatewayIP {
		t.Errorf("Status = %+v, want the cluster Cluster returned %+v", s, a)
	}
	// A second start under the lock reuses it rather than starting anew.
	k, err := Up(t.Context(), Options{})
	if err != nil {
		t.Fatalf("Up on a running cluster: %v", err)
	}
	if k.Server != a.Server {
		t.Errorf("Up started a new cluster at %s, want the running one at %s", k.Server, a.Server)
	}
}
