package kubernetes

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mother-chat/mother/pkg/config"
	"github.com/mother-chat/mother/pkg/hatchery"
	"github.com/mother-chat/mother/pkg/wire"
)

// Names and labels the driver puts on what it makes.
const (
	// containerName is the chick's one container in its Pod.
	containerName = "chick"
	// annotationLabels holds the hatchery's labels as JSON, exactly: a
	// label value Kubernetes refuses (a channel id with a '/') is kept
	// there only.
	annotationLabels = "mother.labels"
	// labelManagedBy marks every object the driver makes.
	labelManagedBy = "app.kubernetes.io/managed-by"
	managedBy      = "mother"
	// labelNetwork marks a chick Pod the NetworkPolicy confines
	// (chicks.network "isolated" or "none").
	labelNetwork = "mother.network"
	isolatedPod  = "isolated"
)

// secretEnv are the environment variables that carry a secret: they go
// into the chick's Secret, never into the Pod spec.
var secretEnv = []string{hatchery.EnvToken, wire.EnvGateKey}

// deadlineMargin is added to a chick's timeout and kill grace for its
// Pod's activeDeadlineSeconds: the hatchery's own limit (which says
// "timed out") comes first; the Pod's is the backstop while Mother is
// down.
const deadlineMargin = 30 * time.Second

// chickPod is a chick's Pod and Secret, made from its spec by Create and
// created by Start.
type chickPod struct {
	pod    *corev1.Pod
	secret *corev1.Secret
	// isolated: the Pod is confined by the namespace's chick
	// NetworkPolicy, which must allow motherAddr.
	isolated   bool
	motherAddr string
	instance   string
}

var nameUnsafe = regexp.MustCompile(`[^a-z0-9-]+`)

// podName makes a DNS-1123 label of the container name the hatchery
// chose, with a random suffix: a new Pod never meets one of an earlier
// try still being deleted.
func podName(name string) string {
	n := strings.Trim(nameUnsafe.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if n == "" {
		n = "mother-chick"
	}
	if len(n) > 57 {
		n = strings.TrimRight(n[:57], "-")
	}
	const letters = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, 5)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	for i := range b {
		b[i] = letters[int(b[i])%len(letters)]
	}
	return n + "-" + string(b)
}

// kubeLabels are the hatchery's labels that are valid Kubernetes label
// values (all are kept in the annotation), plus the driver's own.
func kubeLabels(l map[string]string, isolated bool) map[string]string {
	out := map[string]string{labelManagedBy: managedBy}
	for k, v := range l {
		if len(validation.IsQualifiedName(k)) == 0 && len(validation.IsValidLabelValue(v)) == 0 {
			out[k] = v
		}
	}
	if isolated {
		out[labelNetwork] = isolatedPod
	}
	return out
}

// hatcheryLabels reads the hatchery's labels back from an object.
func hatcheryLabels(m metav1.ObjectMeta) map[string]string {
	if s, ok := m.Annotations[annotationLabels]; ok {
		var l map[string]string
		if json.Unmarshal([]byte(s), &l) == nil {
			return l
		}
	}
	out := map[string]string{}
	for k, v := range m.Labels {
		if k != labelManagedBy && k != labelNetwork {
			out[k] = v
		}
	}
	return out
}

func on(b *bool) bool { return b == nil || *b }

// buildPod makes a chick's Pod and Secret from its spec, hardened to the
// Docker driver's bar (decision 4): the chick user, non-root, read-only
// root, no privilege escalation, every capability dropped, the runtime's
// seccomp profile, memory and CPU limits, size-limited emptyDirs for
// /workspace and /tmp (in memory, like a tmpfs), no service account token
// and no service links. The secret variables (the Mother token) are in
// the Secret, read through secretKeyRef.
func buildPod(s hatchery.ContainerSpec, h config.DockerHost, namespace string) (*chickPod, error) {
	if s.GateVolume != "" {
		return nil, fmt.Errorf("a kubernetes host has no gate (its NetworkPolicy confines isolated chicks)")
	}
	if s.Image == "" {
		return nil, fmt.Errorf("chicks.image: empty")
	}
	ids, err := config.NumericUser(s.Hardening.User)
	if err != nil {
		return nil, fmt.Errorf("chicks.hardening.user: a kubernetes host needs a numeric uid[:gid]: %w", err)
	}
	if ids[0] == 0 {
		return nil, fmt.Errorf("chicks.hardening.user: chicks must not run as root")
	}
	mem, err := config.ParseBytes(s.Resources.Memory)
	if err != nil {
		return nil, fmt.Errorf("chicks.resources.memory: %w", err)
	}
	tmpfs, err := config.ParseBytes(s.Resources.Tmpfs)
	if err != nil {
		return nil, fmt.Errorf("chicks.resources.tmpfs: %w", err)
	}
	// The host's own workspaceSize, else chicks.resources.workspaceBytes
	// (the Docker driver's tmpfs size too).
	wsField, wsSize := "chicks.hosts.workspaceSize", h.WorkspaceSize
	if wsSize == "" {
		wsField, wsSize = "chicks.resources.workspaceBytes", s.Resources.WorkspaceBytes
	}
	if wsSize == "" {
		wsSize = config.DefaultWorkspaceBytes
	}
	ws, err := config.ParseBytes(wsSize)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", wsField, err)
	}
	isolated := s.Network == config.NetworkIsolated || s.Network == config.NetworkNone
	switch s.Network {
	case config.NetworkIsolated, config.NetworkNone, config.NetworkBridge, "":
	default:
		return nil, fmt.Errorf("chicks.network %q: a kubernetes host runs chicks \"isolated\" (its NetworkPolicy) or \"bridge\" (the Pod network)", s.Network)
	}
	name := podName(s.Name)
	labels := kubeLabels(s.Labels, isolated)
	all, err := json.Marshal(s.Labels)
	if err != nil {
		return nil, err
	}
	annotations := map[string]string{annotationLabels: string(all)}

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels, Annotations: annotations},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{},
	}
	var env []corev1.EnvVar
	var motherAddr string
	for _, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		if k == hatchery.EnvAddr {
			motherAddr = v
		}
		if slices.Contains(secretEnv, k) {
			secret.Data[k] = []byte(v)
			env = append(env, corev1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: k},
			}})
			continue
		}
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}

	limits := corev1.ResourceList{}
	requests := corev1.ResourceList{}
	if mem > 0 {
		limits[corev1.ResourceMemory] = *resource.NewQuantity(mem, resource.BinarySI)
		requests[corev1.ResourceMemory] = limits[corev1.ResourceMemory]
	}
	if s.Resources.CPUs > 0 {
		limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(math.Ceil(s.Resources.CPUs*1000)), resource.DecimalSI)
		requests[corev1.ResourceCPU] = limits[corev1.ResourceCPU]
	}
	if h.Requests.Memory != "" {
		m, err := config.ParseBytes(h.Requests.Memory)
		if err != nil {
			return nil, fmt.Errorf("chicks.hosts.requests.memory: %w", err)
		}
		requests[corev1.ResourceMemory] = *resource.NewQuantity(m, resource.BinarySI)
	}
	if h.Requests.CPUs > 0 {
		requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(math.Ceil(h.Requests.CPUs*1000)), resource.DecimalSI)
	}
	place := h.PlacementFor(s.Labels[hatchery.LabelTier])
	for _, r := range slices.Sorted(maps.Keys(place.ExtendedResources)) {
		q := *resource.NewQuantity(place.ExtendedResources[r], resource.DecimalSI)
		limits[corev1.ResourceName(r)] = q
		requests[corev1.ResourceName(r)] = q
	}
	var tolerations []corev1.Toleration
	for _, t := range place.Tolerations {
		kt := corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value, Effect: corev1.TaintEffect(t.Effect)}
		if t.TolerationSeconds > 0 {
			kt.TolerationSeconds = &t.TolerationSeconds
		}
		tolerations = append(tolerations, kt)
	}

	hd := s.Hardening
	uid := ids[0]
	psc := &corev1.PodSecurityContext{
		RunAsUser:      &uid,
		RunAsNonRoot:   ptr(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if ids[1] >= 0 {
		gid := ids[1]
		psc.RunAsGroup = &gid
	}
	csc := &corev1.SecurityContext{
		RunAsNonRoot:           ptr(true),
		ReadOnlyRootFilesystem: ptr(on(hd.ReadOnlyRoot)),
		SeccompProfile:         &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		Privileged:             ptr(false),
	}
	if on(hd.NoNewPrivileges) {
		csc.AllowPrivilegeEscalation = ptr(false)
	}
	if on(hd.DropCapabilities) {
		csc.Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
	}
	pull := corev1.PullPolicy(h.ImagePullPolicy)
	if pull == "" {
		pull = corev1.PullIfNotPresent
	}
	c := corev1.Container{
		Name: containerName, Image: s.Image, ImagePullPolicy: pull,
		Env: env, WorkingDir: hatchery.Workspace,
		Resources:       corev1.ResourceRequirements{Limits: limits, Requests: requests},
		SecurityContext: csc,
		VolumeMounts: []corev1.VolumeMount{
			{Name: "workspace", MountPath: hatchery.Workspace},
			{Name: "tmp", MountPath: "/tmp"},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	if len(s.Command) > 0 {
		c.Command, c.Args = s.Command[:1], s.Command[1:]
	}
	grace := int64(s.KillGrace.Round(time.Second) / time.Second)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  ptr(false),
			EnableServiceLinks:            ptr(false),
			TerminationGracePeriodSeconds: &grace,
			SecurityContext:               psc,
			NodeSelector:                  place.NodeSelector,
			Tolerations:                   tolerations,
			Containers:                    []corev1.Container{c},
			Volumes: []corev1.Volume{
				{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: resource.NewQuantity(ws, resource.BinarySI)}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: resource.NewQuantity(tmpfs, resource.BinarySI)}}},
			},
		},
	}
	if s.Deadline > 0 {
		d := int64((s.Deadline + s.KillGrace + deadlineMargin).Round(time.Second) / time.Second)
		pod.Spec.ActiveDeadlineSeconds = &d
	}
	return &chickPod{pod: pod, secret: secret, isolated: isolated, motherAddr: motherAddr, instance: s.Labels[hatchery.LabelInstance]}, nil
}

func ptr[T any](v T) *T { return &v }
