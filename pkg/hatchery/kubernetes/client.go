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

// podClient is the driver's view of the namespace's Pods.
type podClient struct{ objects }

func (p podClient) Create(ctx context.Context, in *corev1.Pod) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	return out, p.create(ctx, in, out)
}

func (p podClient) Get(ctx context.Context, name string) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	return out, p.get(ctx, name, out)
}

func (p podClient) List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	out := &corev1.PodList{}
	return out, p.list(ctx, opts, out)
}

func (p podClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return p.watch(ctx, opts)
}

func (p podClient) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return p.delete(ctx, name, opts)
}

// Logs is the request for a Pod's container log.
func (p podClient) Logs(name string, opts *corev1.PodLogOptions) *rest.Request {
	return p.req(p.c.Get()).Name(name).SubResource("log").VersionedParams(opts, paramCodec)
}

// secretClient is the driver's view of the namespace's Secrets.
type secretClient struct{ objects }

func (s secretClient) Create(ctx context.Context, in *corev1.Secret) (*corev1.Secret, error) {
	out := &corev1.Secret{}
	return out, s.create(ctx, in, out)
}

func (s secretClient) Get(ctx context.Context, name string) (*corev1.Secret, error) {
	out := &corev1.Secret{}
	return out, s.get(ctx, name, out)
}

func (s secretClient) List(ctx context.Context, opts metav1.ListOptions) (*corev1.SecretList, error) {
	out := &corev1.SecretList{}
	return out, s.list(ctx, opts, out)
}

func (s secretClient) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return s.delete(ctx, name, opts)
}

func (s secretClient) Patch(ctx context.Context, name string, pt types.PatchType, data []byte) error {
	return s.patch(ctx, name, pt, data)
}

// policyClient is the driver's view of the namespace's NetworkPolicies.
type policyClient struct{ objects }

func (n policyClient) Create(ctx context.Context, in *networkingv1.NetworkPolicy) error {
	return n.create(ctx, in, &networkingv1.NetworkPolicy{})
}

func (n policyClient) Get(ctx context.Context, name string) (*networkingv1.NetworkPolicy, error) {
	out := &networkingv1.NetworkPolicy{}
	return out, n.get(ctx, name, out)
}

func (n policyClient) Update(ctx context.Context, in *networkingv1.NetworkPolicy) error {
	return n.update(ctx, in.Name, in, &networkingv1.NetworkPolicy{})
}

func (n policyClient) Delete(ctx context.Context, name string) error {
	return n.delete(ctx, name, metav1.DeleteOptions{})
}
