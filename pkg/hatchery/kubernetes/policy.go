package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mother-chat/mother/pkg/hatchery"
)

// PolicyName is the name of the NetworkPolicy that confines the isolated
// chicks of a Mother instance.
func PolicyName(instance string) string { return "mother-chicks-" + instance }

// policyFor is the NetworkPolicy of instance's isolated chicks: they take
// no connection (no ingress) and make one kind only, to Mother's nest at
// motherAddr (its addresses, /32 or /128, on its port), plus DNS to the
// cluster's DNS in kube-system when motherAddr is a name (resolved now,
// with resolve, to the addresses allowed).
func policyFor(ctx context.Context, ns, instance, motherAddr string, resolve func(context.Context, string) ([]net.IP, error)) (*networkingv1.NetworkPolicy, error) {
	if instance == "" {
		return nil, fmt.Errorf("chick network policy: the spec has no %s label", hatchery.LabelInstance)
	}
	host, portS, err := net.SplitHostPort(motherAddr)
	if err != nil {
		return nil, fmt.Errorf("chick network policy: Mother's address %q (the host's motherAddress or grpc.advertise) must be host:port: %w", motherAddr, err)
	}
	port, err := strconv.Atoi(portS)
	if err != nil || port <= 0 || port > 65535 {
		return nil, fmt.Errorf("chick network policy: Mother's address %q: bad port", motherAddr)
	}
	var ips []net.IP
	name := false
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else {
		name = true
		if ips, err = resolve(ctx, host); err != nil {
			return nil, fmt.Errorf("chick network policy: resolve Mother's address %q: %w", host, err)
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("chick network policy: Mother's address %q resolves to nothing", host)
		}
	}
	var cidrs []string
	for _, ip := range ips {
		if ip4 := ip.To4(); ip4 != nil {
			cidrs = append(cidrs, ip4.String()+"/32")
		} else {
			cidrs = append(cidrs, ip.String()+"/128")
		}
	}
	slices.Sort(cidrs)
	cidrs = slices.Compact(cidrs)
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	nest := networkingv1.NetworkPolicyEgressRule{
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr(intstr.FromInt32(int32(port)))}},
	}
	for _, c := range cidrs {
		nest.To = append(nest.To, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: c}})
	}
	egress := []networkingv1.NetworkPolicyEgressRule{nest}
	if name {
		dns := intstr.FromInt32(53)
		egress = append(egress, networkingv1.NetworkPolicyEgressRule{
			To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: metav1.NamespaceSystem},
			}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &dns}, {Protocol: &tcp, Port: &dns}},
		})
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name: PolicyName(instance), Namespace: ns,
			Labels: map[string]string{labelManagedBy: managedBy, hatchery.LabelInstance: instance},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{
				hatchery.LabelInstance: instance, labelNetwork: isolatedPod, labelManagedBy: managedBy,
			}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{},
			Egress:      egress,
		},
	}, nil
}

func lookupIPs(ctx context.Context, host string) ([]net.IP, error) {
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, err
	}
	ips := make([]net.IP, 0, len(addrs))
	for _, a := range addrs {
		ips = append(ips, a.IP)
	}
	return ips, nil
}

// ensurePolicy makes sure the NetworkPolicy of instance's isolated chicks
// is there with the spec motherAddr needs: made when missing, updated
// when it differs. Once ensured, a process asks again only when the spec
// it needs changes.
func (r *Runtime) ensurePolicy(ctx context.Context, instance, motherAddr string) error {
	want, err := policyFor(ctx, r.ns, instance, motherAddr, lookupIPs)
	if err != nil {
		return err
	}
	specJSON, err := json.Marshal(want.Spec)
	if err != nil {
		return err
	}
	r.mu.Lock()
	done := r.policies[instance] == string(specJSON)
	r.mu.Unlock()
	if done {
		return nil
	}
	api := r.netpols()
	cur, err := api.Get(ctx, want.Name)
	switch {
	case apierrors.IsNotFound(err):
		if _, err := api.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create the chicks' network policy: %w", classify(err))
		}
		r.logger.Info("chick network policy created", "policy", want.Name, "namespace", r.ns, "mother", motherAddr)
	case err != nil:
		return fmt.Errorf("get the chicks' network policy: %w", classify(err))
	default:
		curJSON, _ := json.Marshal(cur.Spec)
		if string(curJSON) != string(specJSON) {
			cur.Spec = want.Spec
			cur.Labels = want.Labels
			if err := api.Update(ctx, cur.Name, cur); err != nil {
				return fmt.Errorf("update the chicks' network policy: %w", classify(err))
			}
			r.logger.Info("chick network policy updated", "policy", want.Name, "namespace", r.ns, "mother", motherAddr)
		}
	}
	r.mu.Lock()
	r.policies[instance] = string(specJSON)
	r.mu.Unlock()
	return nil
}

// RemovePolicy removes the NetworkPolicy of instance's chicks; one that is
// not there is not an error.
func (r *Runtime) RemovePolicy(ctx context.Context, instance string) error {
	err := r.netpols().Delete(ctx, PolicyName(instance), metav1.DeleteOptions{})
	r.mu.Lock()
	delete(r.policies, instance)
	r.mu.Unlock()
	if err != nil && !apierrors.IsNotFound(err) {
		return classify(err)
	}
	return nil
}
