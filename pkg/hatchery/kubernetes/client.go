package kubernetes

import (
	"context"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// The driver talks to the API server through client-go's REST client
// over a scheme of the two API groups it uses (core/v1 and
// networking.k8s.io/v1), not through the generated clientset: the
// clientset's scheme registers every group Kubernetes serves when the
// process starts, which cost Mother about 7 MB of resident memory on the
// Pi for types she never sends (docs/kubernetes.md, "Footprint").
// .ci/check-deps keeps k8s.io/client-go/kubernetes out of cmd/mother.

// paramCodec and negotiator encode and decode the objects the driver
// sends and reads, and their options.
var paramCodec, negotiator = codecs()

func codecs() (kruntime.ParameterCodec, kruntime.NegotiatedSerializer) {
	s := kruntime.NewScheme()
	// The options (ListOptions, DeleteOptions...) in the unnamed group, as
	// client-go's own scheme has them.
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	for _, add := range []func(*kruntime.Scheme) error{corev1.AddToScheme, networkingv1.AddToScheme} {
		if err := add(s); err != nil {
			// The generated registrations cannot fail but on a
			// programming error (a type registered twice).
			panic(err)
		}
	}
	return kruntime.NewParameterCodec(s), serializer.NewCodecFactory(s).WithoutConversion()
}

// apiClient is a REST client for one API group version.
func apiClient(rc *rest.Config, hc *http.Client, gv schema.GroupVersion) (*rest.RESTClient, error) {
	c := rest.CopyConfig(rc)
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	if gv.Group == "" {
		c.APIPath = "/api"
	}
	c.NegotiatedSerializer = negotiator
	return rest.RESTClientForConfigAndClient(c, hc)
}

// objects are the objects of one resource ("pods") in one namespace.
type objects struct {
	c        rest.Interface
	ns, kind string
}

func (o objects) req(r *rest.Request) *rest.Request { return r.Namespace(o.ns).Resource(o.kind) }

func (o objects) create(ctx context.Context, in, out kruntime.Object) error {
	return o.req(o.c.Post()).VersionedParams(&metav1.CreateOptions{}, paramCodec).Body(in).Do(ctx).Into(out)
}

func (o objects) update(ctx context.Context, name string, in, out kruntime.Object) error {
	return o.req(o.c.Put()).Name(name).VersionedParams(&metav1.UpdateOptions{}, paramCodec).Body(in).Do(ctx).Into(out)
}

func (o objects) get(ctx context.Context, name string, out kruntime.Object) error {
	return o.req(o.c.Get()).Name(name).Do(ctx).Into(out)
}

func (o objects) list(ctx context.Context, opts metav1.ListOptions, out kruntime.Object) error {
	return o.req(o.c.Get()).VersionedParams(&opts, paramCodec).Do(ctx).Into(out)
}

func (o objects) watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return o.req(o.c.Get()).VersionedParams(&opts, paramCodec).Watch(ctx)
}

func (o objects) delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return o.req(o.c.Delete()).Name(name).Body(&opts).Do(ctx).Error()
}

func (o objects) patch(ctx context.Context, name string, pt types.PatchType, data []byte) error {
	return o.req(o.c.Patch(pt)).Name(name).Body(data).Do(ctx).Error()
}

// typed is objects of one kind (T, listed as L), such as Pods.
type typed[T any, PT interface {
	*T
	kruntime.Object
}, L any, PL interface {
	*L
	kruntime.Object
}] struct{ objects }

func (c typed[T, PT, L, PL]) Create(ctx context.Context, in PT) (PT, error) {
	out := PT(new(T))
	return out, c.create(ctx, in, out)
}

func (c typed[T, PT, L, PL]) Update(ctx context.Context, name string, in PT) error {
	return c.update(ctx, name, in, PT(new(T)))
}

func (c typed[T, PT, L, PL]) Get(ctx context.Context, name string) (PT, error) {
	out := PT(new(T))
	return out, c.get(ctx, name, out)
}

func (c typed[T, PT, L, PL]) List(ctx context.Context, opts metav1.ListOptions) (PL, error) {
	out := PL(new(L))
	return out, c.list(ctx, opts, out)
}

func (c typed[T, PT, L, PL]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return c.watch(ctx, opts)
}

func (c typed[T, PT, L, PL]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return c.delete(ctx, name, opts)
}

func (c typed[T, PT, L, PL]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte) error {
	return c.patch(ctx, name, pt, data)
}

type (
	podClient    = typed[corev1.Pod, *corev1.Pod, corev1.PodList, *corev1.PodList]
	secretClient = typed[corev1.Secret, *corev1.Secret, corev1.SecretList, *corev1.SecretList]
	policyClient = typed[networkingv1.NetworkPolicy, *networkingv1.NetworkPolicy, networkingv1.NetworkPolicyList, *networkingv1.NetworkPolicyList]
)

// podLogs is the request for a Pod's container log.
func podLogs(pods podClient, name string, opts *corev1.PodLogOptions) *rest.Request {
	return pods.req(pods.c.Get()).Name(name).SubResource("log").VersionedParams(opts, paramCodec)
}
