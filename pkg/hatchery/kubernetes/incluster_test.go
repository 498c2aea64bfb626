package kubernetes_test

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mother-chat/mother/pkg/hatchery/kubernetes/kubetest"
)

// TestInClusterConfig: Mother running in the cluster reaches it with the
// in-cluster configuration (a host entry without a kubeconfig): the
// driver, in a Pod with its service account's token (internal/incluster),
// finds its namespace from the service account, asks the version, and
// runs a chick Pod beside itself to its end. The test cluster has no
// service proxy, so the Pod uses the host's network and is told the API
// server's loopback address in the two variables the kubelet would set to
// the kubernetes Service; the token, the CA and the namespace are the
// real service account's.
func TestInClusterConfig(t *testing.T) {
	t.Parallel()
	f := setup(t)
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "incluster"), "./internal/incluster")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build internal/incluster: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\nCOPY incluster /incluster\nENTRYPOINT [\"/incluster\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const tag = "mother-kube-incluster:test"
	if out, err := exec.Command("docker", "build", "-q", "-t", tag, dir).CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	importOnce(t, f.k, tag)
	api, err := url.Parse(f.k.Server)
	if err != nil {
		t.Fatal(err)
	}
	c := f.k.Client(t)
	ctx := ctxT(t, 4*time.Minute)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "mother-incluster"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			HostNetwork:   true,
			Containers: []corev1.Container{{
				Name: "mother", Image: tag, ImagePullPolicy: corev1.PullNever,
				Env: []corev1.EnvVar{
					{Name: "KUBERNETES_SERVICE_HOST", Value: api.Hostname()},
					{Name: "KUBERNETES_SERVICE_PORT", Value: api.Port()},
					{Name: "CHICK_IMAGE", Value: f.image},
					{Name: "CHICK_SAYS", Value: "hello-from-a-chick-beside-mother"},
				},
			}},
		},
	}
	if _, err := c.CoreV1().Pods(f.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var phase corev1.PodPhase
	for ctx.Err() == nil {
		p, err := c.CoreV1().Pods(f.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if phase = p.Status.Phase; phase == corev1.PodSucceeded || phase == corev1.PodFailed {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	logs, err := c.CoreV1().Pods(f.ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).Do(context.Background()).Raw()
	if err != nil {
		t.Fatalf("the in-cluster Pod's log: %v", err)
	}
	if phase != corev1.PodSucceeded {
		t.Fatalf("the in-cluster Pod ended %s:\n%s", phase, logs)
	}
	for _, want := range []string{"namespace=" + f.ns + "\n", "version=Kubernetes " + kubetest.Version + "\n",
		"chick exit=0 log=hello-from-a-chick-beside-mother\n", "left=0\n", "OK\n"} {
		if !bytes.Contains(logs, []byte(want)) {
			t.Errorf("the in-cluster Pod's log lacks %q:\n%s", strings.TrimSpace(want), logs)
		}
	}
}
