package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/agora-dev/agora/internal/compute/kubernetes/gatewayurl"
)

// Resolving a gateway name.
const (
	// maxGatewayAddrs caps the addresses a gateway name may resolve to: each becomes a rule of
	// the pod's NetworkPolicy and a line of its /etc/hosts.
	maxGatewayAddrs = 8
	// resolveTimeout bounds resolving the gateway's name at a Job's creation.
	resolveTimeout = 10 * time.Second
)

// gatewayAddr is the network gateway as pods reach it: an IP address, or a DNS name that is
// resolved on agora's host when each Job is made. A pod gets no DNS (its NetworkPolicy admits
// only the gateway), so the name's addresses are pinned twice, identically: as the policy's
// only egress peers, and in the pod's /etc/hosts (hostAliases), which the worker's resolver
// reads first. The policy stays exact; a pod keeps the addresses of its Job's creation.
type gatewayAddr struct {
	name  string       // the DNS name, "" when the URL holds an IP address
	addrs []netip.Addr // the IP address, or the name's addresses once resolved
	port  uint16
	peer  *GatewayPeer // serve's pods, admitted besides addrs; nil for none
}

// GatewayPeer is where serve's pods are, for [Options.GatewayPeer]: the pods of Namespace
// whose labels include all of Pods.
type GatewayPeer struct {
	Namespace string
	Pods      map[string]string
}

// maxPeerLabels bounds a gateway peer's labels: each is in every dispatch's NetworkPolicy.
const maxPeerLabels = 16

// checkPeer refuses a peer that would admit more than serve's pods: a namespace and at least
// one label are required, each a valid name and label.
func checkPeer(p *GatewayPeer) (*GatewayPeer, error) {
	if p == nil {
		return nil, nil
	}
	if errs := validation.IsDNS1123Label(p.Namespace); len(errs) > 0 {
		return nil, fmt.Errorf("gateway peer: namespace %q: %s", p.Namespace, strings.Join(errs, "; "))
	}
	if len(p.Pods) == 0 {
		return nil, errors.New("gateway peer: no pod labels: it would admit every pod of namespace " + p.Namespace)
	}
	if len(p.Pods) > maxPeerLabels {
		return nil, fmt.Errorf("gateway peer: %d pod labels, at most %d", len(p.Pods), maxPeerLabels)
	}
	pods := make(map[string]string, len(p.Pods))
	for k, v := range p.Pods {
		if errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(errs) > 0 {
			return nil, fmt.Errorf("gateway peer: label %q=%q: %s", k, v, strings.Join(errs, "; "))
		}
		pods[k] = v
	}
	if dispatchPodLabels(pods) {
		return nil, fmt.Errorf("gateway peer: pods %v: agora's dispatch pods may wear every one of these labels, so the peer would admit them, not serve's pods: name a label only serve's pods have (e.g. {app: agora})", pods)
	}
	return &GatewayPeer{Namespace: p.Namespace, Pods: pods}, nil
}

// dispatchPodLabels says whether a pod of a dispatch (a Job's, a slot's, a Sandbox's) may wear
// every label of pods: the labels agora sets on it (labels, labelSlot, labelHome) and those
// its Job's controller adds (a peer of {app.kubernetes.io/managed-by: agora}, the label the
// manifests' own ingress rule admits dispatch pods by, would select every dispatch pod and no
// serve pod).
func dispatchPodLabels(pods map[string]string) bool {
	for k, v := range pods {
		switch {
		case k == labelManagedBy && v == managedBy, k == labelDispatch, k == labelSlot, k == labelHome:
		case k == "job-name", k == "controller-uid", strings.HasPrefix(k, "batch.kubernetes.io/"), strings.HasPrefix(k, "agents.x-k8s.io/"):
		default:
			return false
		}
	}
	return true
}

// policyPeer is the NetworkPolicy peer of serve's pods: ONE peer holding both selectors, which
// Kubernetes ANDs (two peers, one per selector, would admit the whole namespace, or those
// labels in every namespace).
func (p *GatewayPeer) policyPeer() networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: p.Namespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: maps.Clone(p.Pods)},
	}
}

// parseGatewayURL accepts exactly https://HOST:PORT[/], HOST an IP address or a DNS name
// ([gatewayurl.Parse]).
func parseGatewayURL(s string) (gatewayAddr, error) {
	a, err := gatewayurl.Parse(s)
	if err != nil {
		return gatewayAddr{}, err
	}
	if a.Name != "" {
		return gatewayAddr{name: a.Name, port: a.Port}, nil
	}
	return gatewayAddr{addrs: []netip.Addr{a.IP}, port: a.Port}, nil
}

// resolveGateway returns the gateway's addresses for one Job: the IP address of the URL, or
// the name's addresses now, sorted, at most maxGatewayAddrs. A name that resolves to no usable
// address fails the start: loopback, unspecified, multicast and link-local addresses (the
// cloud metadata service is link-local) would open the policy to what the pod must not reach.
func (p *Provider) resolveGateway(ctx context.Context) (gatewayAddr, error) {
	gw := p.gateway
	if gw.name == "" {
		return gw, nil
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	found, err := p.opts.Resolve(ctx, gw.name)
	if err != nil {
		return gatewayAddr{}, fmt.Errorf("resolve the gateway's name %q: %w", gw.name, err)
	}
	var addrs []netip.Addr
	for _, a := range found {
		a = a.Unmap().WithZone("")
		if !a.IsValid() || a.IsLoopback() || a.IsUnspecified() || a.IsMulticast() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() {
			return gatewayAddr{}, fmt.Errorf("the gateway's name %q resolves to %s, which a pod's policy must not admit", gw.name, a)
		}
		if !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	switch {
	case len(addrs) == 0:
		return gatewayAddr{}, fmt.Errorf("the gateway's name %q resolves to no address", gw.name)
	case len(addrs) > maxGatewayAddrs:
		return gatewayAddr{}, fmt.Errorf("the gateway's name %q resolves to %d addresses, more than %d", gw.name, len(addrs), maxGatewayAddrs)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	gw.addrs = addrs
	return gw, nil
}

// hostAliases is the pod's /etc/hosts entries for the gateway's name; none for an address.
func (gw gatewayAddr) hostAliases() []corev1.HostAlias {
	if gw.name == "" {
		return nil
	}
	out := make([]corev1.HostAlias, 0, len(gw.addrs))
	for _, a := range gw.addrs {
		out = append(out, corev1.HostAlias{IP: a.String(), Hostnames: []string{gw.name}})
	}
	return out
}

// lookupNetIP is the default [Options.Resolve]: the host's resolver.
func lookupNetIP(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}
