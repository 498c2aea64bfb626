// Package kubernetes is the hatchery's Kubernetes driver: a chick is a Pod
// (restartPolicy Never, hardened like a Docker chick, its Mother token in
// a Secret of its own) that the cluster's scheduler places, watched,
// killed and listed by label through k8s.io/client-go. Isolated chicks are
// confined by a NetworkPolicy per Mother instance, which lets them reach
// Mother's nest and nothing else, in place of the Docker gate. It
// implements hatchery.Runtime; the supervisor (pkg/hatchery) knows no
// Kubernetes type. See docs/kubernetes.md.
package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
)

// Runtime runs chicks as Pods in one namespace of one cluster.
type Runtime struct {
	core   *rest.RESTClient // core/v1
	net    *rest.RESTClient // networking.k8s.io/v1
	http   *http.Client
	ns     string
	host   config.DockerHost
	clock  clock.Clock
	logger *slog.Logger

	mu sync.Mutex
	// made are the Pods Create made a Secret for, by name, until Start
	// creates them.
	made map[string]*chickPod
	// policies are the NetworkPolicies ensured by this process: instance
	// to the spec they were made with.
	policies map[string]string
}

var (
	_ hatchery.Runtime      = (*Runtime)(nil)
	_ hatchery.SelfIsolator = (*Runtime)(nil)
)

// Options tune a Runtime.
type Options struct {
	Logger *slog.Logger
	// Clock is the time source (default clock.Real{}).
	Clock clock.Clock
}

// Open reaches the cluster of a configured host (its kubeconfig, or the
// in-cluster configuration when it names none) and drives it: the
// hatchery's Options.Dial for hosts of kind "kubernetes".
func Open(h config.DockerHost, opts Options) (*Runtime, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	var cc clientcmd.ClientConfig
	if h.Kubeconfig != "" {
		rules.ExplicitPath = h.Kubeconfig
		cc = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	}
	var rc *rest.Config
	var err error
	ns := h.Namespace
	if cc == nil {
		rc, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("kubernetes host %s: no kubeconfig set and not in a cluster: %w", h.Name, err)
		}
		if ns == "" {
			ns = inClusterNamespace()
		}
	} else {
		rc, err = cc.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubernetes host %s: kubeconfig %s: %w", h.Name, h.Kubeconfig, err)
		}
		if ns == "" {
			ns, _, _ = cc.Namespace()
		}
	}
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	h.Namespace = ns
	return New(rc, h, opts)
}

// New drives the cluster rc reaches, in h.Namespace (default "default").
func New(rc *rest.Config, h config.DockerHost, opts Options) (*Runtime, error) {
	rc = rest.CopyConfig(rc)
	// A few calls per chick, many chicks: client-go's defaults (5 per
	// second) would throttle a busy Mother.
	rc.QPS, rc.Burst = 50, 100
	if rc.UserAgent == "" {
		rc.UserAgent = "mother"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	logger := opts.Logger.With("component", "kubernetes", "host", h.Name)
	// The API server's warnings go to Mother's log, not to stderr.
	rc.WarningHandler = warnings{logger}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes host %s: %w", h.Name, err)
	}
	core, err := apiClient(rc, hc, corev1.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("kubernetes host %s: %w", h.Name, err)
	}
	nw, err := apiClient(rc, hc, networkingv1.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("kubernetes host %s: %w", h.Name, err)
	}
	if h.Namespace == "" {
		h.Namespace = metav1.NamespaceDefault
	}
	return &Runtime{
		core: core, net: nw, http: hc, ns: h.Namespace, host: h, clock: clock.OrReal(opts.Clock), logger: logger,
		made: map[string]*chickPod{}, policies: map[string]string{},
	}, nil
}

// warnings logs the API server's warnings.
type warnings struct{ logger *slog.Logger }

func (w warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.logger.Warn("the Kubernetes API server warns", "warning", text)
}

// Namespace is where the runtime makes its Pods.
func (r *Runtime) Namespace() string { return r.ns }

func (r *Runtime) pods() podClient       { return podClient{objects{r.core, r.ns, "pods"}} }
func (r *Runtime) secrets() secretClient { return secretClient{objects{r.core, r.ns, "secrets"}} }
func (r *Runtime) netpols() policyClient {
	return policyClient{objects{r.net, r.ns, "networkpolicies"}}
}

// IsolatesChicks implements hatchery.SelfIsolator: isolated chicks are
// confined by the namespace's chick NetworkPolicy.
func (r *Runtime) IsolatesChicks() bool { return true }

// marked is an API error tagged with the hatchery's kind for it; its
// text is the API's.
type marked struct {
	kind error
	err  error
}

func (m *marked) Error() string   { return m.err.Error() }
func (m *marked) Unwrap() []error { return []error{m.kind, m.err} }

// classify marks err with the hatchery error its kind is.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return &marked{hatchery.ErrContainerNotFound, err}
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return &marked{hatchery.ErrConflict, err}
	case apierrors.IsServiceUnavailable(err), noConnection(err):
		return &marked{hatchery.ErrUnreachable, err}
	}
	return err
}

// noConnection reports whether err means the API server could not be
// reached or dropped the connection (as opposed to an answer).
func noConnection(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var op *net.OpError
	var dns *net.DNSError
	var ue *url.Error
	return errors.As(err, &op) || errors.As(err, &dns) || errors.As(err, &ue) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// Create implements hatchery.Runtime. Kubernetes has no Pod made but not
// started: Create checks the spec, makes sure the chick NetworkPolicy is
// there, and creates the chick's Secret (the "created" container List
// reports until Start); Start creates the Pod. The id is the Pod's name.
func (r *Runtime) Create(ctx context.Context, s hatchery.ContainerSpec) (string, error) {
	cp, err := buildPod(s, r.host, r.ns)
	if err != nil {
		return "", err
	}
	if cp.isolated {
		if err := r.ensurePolicy(ctx, cp.instance, cp.motherAddr); err != nil {
			return "", err
		}
	}
	if _, err := r.secrets().Create(ctx, cp.secret); err != nil {
		if apierrors.IsNotFound(err) {
			// Not a missing image: the namespace is not there.
			return "", fmt.Errorf("create the chick's secret in namespace %s: %v", r.ns, err)
		}
		return "", fmt.Errorf("create the chick's secret: %w", classify(err))
	}
	name := cp.pod.Name
	r.mu.Lock()
	r.made[name] = cp
	r.mu.Unlock()
	return name, nil
}

// Start implements hatchery.Runtime: it creates the Pod Create prepared,
// then makes the Pod the owner of its Secret, so the cluster's garbage
// collector removes the Secret with the Pod (Remove deletes it too).
func (r *Runtime) Start(ctx context.Context, id string) error {
	r.mu.Lock()
	cp := r.made[id]
	r.mu.Unlock()
	if cp == nil {
		return &marked{hatchery.ErrContainerNotFound, fmt.Errorf("pod %s: not created by this process (no spec to start it from)", id)}
	}
	pod, err := r.pods().Create(ctx, cp.pod)
	if err != nil {
		return fmt.Errorf("create the chick's pod: %w", classify(err))
	}
	r.mu.Lock()
	delete(r.made, id)
	r.mu.Unlock()
	patch := fmt.Appendf(nil, `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":%q,"uid":%q}]}}`, pod.Name, pod.UID)
	if err := r.secrets().Patch(ctx, id, types.MergePatchType, patch); err != nil {
		// The Pod runs; Remove deletes the Secret in any case.
		r.logger.Warn("chick's secret not owned by its pod; it is removed with the chick", "pod", id, "err", err)
	}
	return nil
}

// Wait implements hatchery.Runtime: it watches the Pod until it is done
// (Succeeded or Failed, evicted, its node lost, a container that can
// never start) or deleted. next: a Pod that is not there yet is waited
// for (Wait is asked before Start).
func (r *Runtime) Wait(ctx context.Context, id string, next bool) <-chan hatchery.Exit {
	out := make(chan hatchery.Exit, 1)
	go func() { out <- r.wait(ctx, id, next) }()
	return out
}

func (r *Runtime) wait(ctx context.Context, id string, next bool) hatchery.Exit {
	var last *corev1.Pod
	sel := fields.OneTermEqualSelector("metadata.name", id).String()
	for {
		list, err := r.pods().List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return errExit(ctx, err)
		}
		if len(list.Items) == 0 {
			if last != nil {
				return deletedExit(last)
			}
			if !next {
				return hatchery.Exit{Code: -1, Err: &marked{hatchery.ErrContainerNotFound, fmt.Errorf("pod %s not found", id)}}
			}
		} else {
			last = &list.Items[0]
			if e := exitOf(last); e.done {
				return hatchery.Exit{Code: e.code, Ended: e.ended}
			}
		}
		w, err := r.pods().Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
		if err != nil {
			return errExit(ctx, err)
		}
		ex, done := r.follow(ctx, w, &last)
		w.Stop()
		if done {
			return ex
		}
		// The watch ended (the server's timeout, or an expired
		// resource version): look again, after a breath.
		if clock.Sleep(ctx, r.clock, time.Second) != nil {
			return errExit(ctx, ctx.Err())
		}
	}
}

// follow reads a Pod's watch until the chick is done; false when the
// watch ends first.
func (r *Runtime) follow(ctx context.Context, w watch.Interface, last **corev1.Pod) (hatchery.Exit, bool) {
	for {
		// A Pod being deleted whose node does not confirm the end in
		// time is lost with its node.
		var lost <-chan time.Time
		if at := lostAt(*last); !at.IsZero() {
			lost = clock.After(r.clock, max(at.Sub(r.clock.Now()), 0))
		}
		select {
		case <-ctx.Done():
			return errExit(ctx, ctx.Err()), true
		case <-lost:
			return hatchery.Exit{Code: exitCode(*last), Ended: "its node did not confirm the end of its Pod (the node is lost or unreachable)"}, true
		case ev, ok := <-w.ResultChan():
			if !ok {
				return hatchery.Exit{}, false
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				*last = p
				if e := exitOf(p); e.done {
					return hatchery.Exit{Code: e.code, Ended: e.ended}, true
				}
			case watch.Deleted:
				if p, ok := ev.Object.(*corev1.Pod); ok {
					if e := exitOf(p); e.done {
						return hatchery.Exit{Code: e.code, Ended: e.ended}, true
					}
					*last = p
				}
				return deletedExit(*last), true
			case watch.Error:
				return hatchery.Exit{}, false
			}
		}
	}
}

// deletedExit is the exit of a Pod that was deleted: its container's
// exit code if it had ended, else a Pod deleted under a running chick.
func deletedExit(p *corev1.Pod) hatchery.Exit {
	if e := exitOf(p); e.done || e.code >= 0 {
		return hatchery.Exit{Code: e.code, Ended: e.ended}
	}
	return hatchery.Exit{Code: -1, Ended: "its Pod was deleted while it ran"}
}

func errExit(ctx context.Context, err error) hatchery.Exit {
	if ctx.Err() != nil {
		return hatchery.Exit{Code: -1, Err: ctx.Err()}
	}
	return hatchery.Exit{Code: -1, Err: classify(err)}
}

// killGrace is the grace of a KILL: one second rather than a force
// delete (grace 0), which makes the API forget the Pod at once while the
// kubelet still stops it with its full terminationGracePeriodSeconds.
// With one second the Pod is there until its container is gone, and its
// exit code is seen.
const killGrace = 1

// Kill implements hatchery.Runtime: the Pod is deleted, with a grace of
// one second for "KILL", with its own terminationGracePeriodSeconds (the
// kill grace) for any other signal. A Pod that is done is not running:
// ErrConflict, and it stays (for its logs).
func (r *Runtime) Kill(ctx context.Context, id, signal string) error {
	p, err := r.pods().Get(ctx, id)
	if err != nil {
		return classify(err)
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return &marked{hatchery.ErrConflict, fmt.Errorf("pod %s is not running (%s)", id, p.Status.Phase)}
	}
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}}
	if signal == "KILL" || signal == "SIGKILL" || signal == "9" {
		g := int64(killGrace)
		opts.GracePeriodSeconds = &g
	}
	return classify(r.pods().Delete(ctx, id, opts))
}

// Remove implements hatchery.Runtime: the Pod, by force (grace 0), and its
// Secret. What is not there is not an error unless neither is.
func (r *Runtime) Remove(ctx context.Context, id string) error {
	r.mu.Lock()
	delete(r.made, id)
	r.mu.Unlock()
	zero := int64(0)
	perr := r.pods().Delete(ctx, id, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	serr := r.secrets().Delete(ctx, id, metav1.DeleteOptions{})
	switch {
	case perr != nil && !apierrors.IsNotFound(perr):
		return classify(perr)
	case serr != nil && !apierrors.IsNotFound(serr):
		return classify(serr)
	case perr != nil && serr != nil:
		return classify(perr)
	}
	return nil
}

// List implements hatchery.Runtime: the Pods labelled key=value, and
// Secrets with that label whose Pod was never made ("created").
func (r *Runtime) List(ctx context.Context, key, value string) ([]hatchery.Container, error) {
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return nil, fmt.Errorf("list chicks by %s=%q: not a label value: %s", key, value, errs[0])
	}
	sel := labels.SelectorFromSet(labels.Set{key: value, labelManagedBy: managedBy}).String()
	pods, err := r.pods().List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, classify(err)
	}
	secrets, err := r.secrets().List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, classify(err)
	}
	out := make([]hatchery.Container, 0, len(pods.Items))
	has := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		has[p.Name] = true
		out = append(out, hatchery.Container{ID: p.Name, State: state(p), Labels: hatcheryLabels(p.ObjectMeta)})
	}
	for _, s := range secrets.Items {
		if !has[s.Name] {
			out = append(out, hatchery.Container{ID: s.Name, State: hatchery.ContainerCreated, Labels: hatcheryLabels(s.ObjectMeta)})
		}
	}
	return out, nil
}

// Inspect implements hatchery.Runtime. A chick whose Secret is there but
// not its Pod is created, not running.
func (r *Runtime) Inspect(ctx context.Context, id string) (hatchery.ContainerState, error) {
	p, err := r.pods().Get(ctx, id)
	if apierrors.IsNotFound(err) {
		if _, serr := r.secrets().Get(ctx, id); serr == nil {
			return hatchery.ContainerState{ExitCode: -1}, nil
		}
	}
	if err != nil {
		return hatchery.ContainerState{ExitCode: -1}, classify(err)
	}
	e := exitOf(p)
	return hatchery.ContainerState{Running: !e.done, ExitCode: e.code, Ended: e.ended}, nil
}

// Logs implements hatchery.Runtime: the chick container's log through the
// API server. Following a Pod that has not started waits for it, and a
// follow that ends while the Pod is not done is taken up again, skipping
// what was already written: one begun before the Pod is scheduled, or as
// its container starts (before the kubelet has its log file), ends at
// once with nothing.
func (r *Runtime) Logs(ctx context.Context, id string, follow bool, w io.Writer) error {
	var written int64
	for {
		rc, err := podLogs(r.pods(), id, &corev1.PodLogOptions{Container: containerName, Follow: follow}).Stream(ctx)
		if apierrors.IsBadRequest(err) {
			// Its container has not started: nothing to show yet.
			if !follow {
				return nil
			}
			ran, err := r.waitStarted(ctx, id)
			if err != nil || !ran {
				return err // nil: it ended without ever running
			}
			continue
		}
		if apierrors.IsNotFound(err) {
			// The API server passes on the kubelet's answer, and a kubelet
			// that has not yet taken up a Pod bound to its node answers 404
			// for it: the Pod is missing only if the API says so.
			if _, err := r.pods().Get(ctx, id); err != nil {
				return classify(err)
			}
			if !follow {
				return nil
			}
			if clock.Sleep(ctx, r.clock, 200*time.Millisecond) != nil {
				return nil
			}
			continue
		}
		if err != nil {
			return classify(err)
		}
		n, err := copyAfter(w, rc, written)
		written += n
		rc.Close()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if !follow {
			return nil
		}
		p, err := r.pods().Get(ctx, id)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return classify(err)
		}
		switch ran, done := started(p); {
		case exitOf(p).done:
			// It ended: read what it wrote after the follow ended, once.
			follow = false
		case !ran && !done:
			// Not started (a Pod not scheduled yet has an empty log).
			if ran, err := r.waitStarted(ctx, id); err != nil || !ran {
				return err
			}
		default:
			if clock.Sleep(ctx, r.clock, 200*time.Millisecond) != nil {
				return nil
			}
		}
	}
}

// copyAfter copies src to w but for its first skip bytes, which an
// earlier follow of the same log wrote; n counts what it wrote.
func copyAfter(w io.Writer, src io.Reader, skip int64) (n int64, err error) {
	if skip > 0 {
		if _, err := io.CopyN(io.Discard, src, skip); err != nil {
			if err == io.EOF {
				err = nil
			}
			return 0, err
		}
	}
	return io.Copy(w, src)
}

// waitStarted waits until the Pod's container has started (ran) or never
// will (the Pod is done or deleted without it).
func (r *Runtime) waitStarted(ctx context.Context, id string) (ran bool, err error) {
	sel := fields.OneTermEqualSelector("metadata.name", id).String()
	for {
		list, err := r.pods().List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return false, classify(err)
		}
		if len(list.Items) == 0 {
			return false, &marked{hatchery.ErrContainerNotFound, fmt.Errorf("pod %s not found", id)}
		}
		if ran, done := started(&list.Items[0]); done {
			return ran, nil
		}
		w, err := r.pods().Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
		if err != nil {
			return false, classify(err)
		}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if ev.Type == watch.Deleted {
				w.Stop()
				return false, nil
			}
			if ran, done := started(p); done {
				w.Stop()
				return ran, nil
			}
		}
		w.Stop()
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if clock.Sleep(ctx, r.clock, time.Second) != nil {
			return false, ctx.Err()
		}
	}
}

// started: whether the chick's container runs or ran (ran), or never
// will; done when either is known.
func started(p *corev1.Pod) (ran, done bool) {
	cs := chickStatus(p)
	if cs != nil && (cs.State.Running != nil || cs.State.Terminated != nil) {
		return true, true
	}
	return false, exitOf(p).done
}

// Version implements hatchery.Runtime: the API server's version, naming
// the engine ("Kubernetes v1.34.4"; momctl status shows it as it is).
func (r *Runtime) Version(ctx context.Context) (string, error) {
	body, err := r.core.Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return "", classify(err)
	}
	var v version.Info
	if err := json.Unmarshal(body, &v); err != nil {
		return "", fmt.Errorf("kubernetes version: %w", err)
	}
	return "Kubernetes " + v.GitVersion, nil
}

// Close implements hatchery.Runtime.
func (r *Runtime) Close() error {
	r.http.CloseIdleConnections()
	return nil
}

// inClusterNamespace is the namespace of the Pod Mother runs in, from its
// service account; empty when it cannot be read.
func inClusterNamespace() string {
	b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
