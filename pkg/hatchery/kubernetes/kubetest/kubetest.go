// Package kubetest gives tests a real single-node Kubernetes cluster on
// this machine: etcd (Debian's), kube-apiserver, kube-controller-manager,
// kube-scheduler and a kubelet (v1.34, built from the Go module proxy by
// .ci/ensure-kube and cached by version), running Pods through a
// containerd instance of its own (never Docker's) on a bridge of its own
// (motherkube0, never docker0), all on loopback.
//
// The cluster is machine-wide and shared: Cluster starts it once (or finds
// it running and healthy) under a lock, so the several test binaries of
// `go test ./...` use one cluster; each test makes its own namespace
// (Namespace). A package that uses it calls Main from its TestMain: the
// last test binary to finish tears a cluster the tests started down, and
// leaves the machine as it was. `go run
// ./pkg/hatchery/kubernetes/kubetest/cmd/kubecluster up|down|status`
// brings one up and down by hand (tests use it and leave it up).
//
// Without root, or without the binaries (.ci/ensure-kube builds them), the
// tests skip, except under CI=true, where they fail.
package kubetest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mother-chat/mother/internal/testenv"
	"github.com/mother-chat/mother/pkg/hatchery/hatcherytest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Kube is a running test cluster.
type Kube struct {
	// Dir is the cluster's state directory (logs in Dir/logs).
	Dir string
	// Kubeconfig is an admin kubeconfig file (token in system:masters).
	Kubeconfig string
	// Server is the apiserver's URL, https://127.0.0.1:<port>.
	Server string
	// Token is the admin's bearer token.
	Token string
	// CAFile is the CA that signed the apiserver's serving certificate.
	CAFile string
	// NodeName is the one node's name ("localhost").
	NodeName string
	// GatewayIP is the cluster bridge's address on the host: where a Pod
	// reaches a listener on this machine (listen on GatewayIP:port).
	GatewayIP string
	// Bridge is the name of the cluster's bridge interface.
	Bridge string
	// PodSubnet is the Pods' subnet (CIDR) on the bridge.
	PodSubnet string
	// ContainerdSocket is the cluster's own containerd's socket.
	ContainerdSocket string
}

// RESTConfig is a client configuration for the admin (a new copy each
// call).
func (k *Kube) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            k.Server,
		BearerToken:     k.Token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: k.CAFile},
		QPS:             100,
		Burst:           200,
		Timeout:         30 * time.Second,
	}
}

// Clientset is a client-go clientset for the admin.
func (k *Kube) Clientset() (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(k.RESTConfig())
}

// Client is Clientset for a test: a failure ends the test.
func (k *Kube) Client(t testing.TB) *kubernetes.Clientset {
	t.Helper()
	c, err := k.Clientset()
	if err != nil {
		t.Fatalf("kubernetes client: %v", err)
	}
	return c
}

func (k *Kube) readyz(ctx context.Context) error {
	cfg := k.RESTConfig()
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		return err
	}
	return httpGet(ctx, &http.Client{Transport: tr}, k.Server+"/readyz", "")
}

// nodeReady checks that the node is Ready and carries no NoSchedule
// taint (a new node is born not-ready-tainted until the node lifecycle
// controller sees it Ready), so the scheduler can place Pods.
func (k *Kube) nodeReady(ctx context.Context) error {
	c, err := k.Clientset()
	if err != nil {
		return err
	}
	n, err := c.CoreV1().Nodes().Get(ctx, k.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("node %s: %w", k.NodeName, err)
	}
	ready := false
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready {
		return fmt.Errorf("node %s not Ready", k.NodeName)
	}
	for _, taint := range n.Spec.Taints {
		if taint.Effect == corev1.TaintEffectNoSchedule || taint.Effect == corev1.TaintEffectNoExecute {
			return fmt.Errorf("node %s tainted %s:%s", k.NodeName, taint.Key, taint.Effect)
		}
	}
	if n.Spec.Unschedulable {
		return fmt.Errorf("node %s unschedulable", k.NodeName)
	}
	return nil
}

// ImportImage docker-saves a locally built image and imports it into the
// cluster's containerd, so Pods run it with imagePullPolicy: Never. The
// image keeps its name (a tag without a registry is docker.io/library/...,
// which is how the kubelet names it too).
func (k *Kube) ImportImage(t testing.TB, tag string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := importImage(ctx, k.Dir, tag); err != nil {
		t.Fatal(err)
	}
}

// Namespace creates a namespace of its own for the test (name prefixed
// with prefix), waits for its default service account (the admission
// plugin refuses Pods until it exists), and deletes it when the test
// ends.
func (k *Kube) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	c := k.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ns, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	name := ns.Name
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		zero := int64(0)
		if err := c.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("delete namespace %s: %v", name, err)
		}
	})
	for {
		_, err := c.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return name
		}
		if !apierrors.IsNotFound(err) || ctx.Err() != nil {
			t.Fatalf("the default service account of namespace %s: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var (
	once     sync.Once
	shared   *Kube
	startErr error
	skipWhy  string
	users    *os.File
	usersMu  sync.Mutex
)

// Cluster returns the shared test cluster, started and ready (node Ready
// and schedulable). The first call in a test binary starts it, or reuses
// the one running on the machine; later calls return it at once. Without
// root or the Kubernetes binaries the test is skipped, except under
// CI=true, where that is a failure.
func Cluster(t testing.TB) *Kube {
	t.Helper()
	// The sandbox image and the images tests import come from the local
	// Docker engine.
	hatcherytest.Docker(t)
	once.Do(func() {
		if os.Geteuid() != 0 {
			skipWhy = "the Kubernetes test cluster needs root (containerd, the kubelet, a bridge)"
			return
		}
		if miss := missingTools(BinDir()); len(miss) > 0 {
			skipWhy = fmt.Sprintf("the Kubernetes test cluster needs %v (run .ci/ensure-kube as root)", miss)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		o := Options{Logf: func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }}
		o.defaults()
		lock, err := ctlLock(o.Dir)
		if err != nil {
			startErr = err
			return
		}
		defer lock.Close()
		shared, startErr = upLocked(ctx, o)
		if startErr != nil {
			return
		}
		// Hold a shared lock on the users file as long as this process
		// lives: the last user out (Main) may tear down.
		usersMu.Lock()
		users, startErr = lockFile(o.Dir, ".users", syscall.LOCK_SH)
		usersMu.Unlock()
	})
	if skipWhy != "" {
		testenv.Unavailable(t, "%s", skipWhy)
	}
	if startErr != nil {
		t.Fatal(startErr)
	}
	return shared
}

// Main runs the tests of a package that uses the cluster and then, if
// this was the last test binary using a cluster the tests started (not
// one brought up by hand), tears it down. Call it from TestMain:
//
//	func TestMain(m *testing.M) { kubetest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if err := Release(); err != nil {
		fmt.Fprintf(os.Stderr, "kubetest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// Release gives up this process's use of the cluster and tears it down
// when no other process uses it and the tests started it. Main calls it;
// a program that called Cluster outside go test may call it itself.
func Release() error {
	usersMu.Lock()
	defer usersMu.Unlock()
	if users == nil {
		return nil
	}
	dir := Dir()
	lock, err := ctlLock(dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	users.Close()
	users = nil
	excl, err := lockFile(dir, ".users", syscall.LOCK_EX|syscall.LOCK_NB)
	if err != nil {
		return nil // another process still uses it
	}
	defer excl.Close()
	s, err := readState(dir)
	if err != nil || s.Manual {
		return nil
	}
	return downLocked(dir, func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) })
}
