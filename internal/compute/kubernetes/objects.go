package kubernetes

import (
	"cmp"
	"fmt"
	"net/netip"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/kubernetes/podenv"
	"github.com/agora-dev/agora/internal/compute/remote"
)

// Keys of the dispatch's Secret. Every environment value of the pod comes from it, so the Job
// object holds names only: the token, and whatever else the spec's environment carries (the
// egress proxy's password), is readable only by who may read Secrets.
const (
	secretToken = "token"
	secretCA    = "ca.crt"
	// secretEnvPrefix prefixes the key of each of the spec's environment variables.
	secretEnvPrefix = "env."
)

// secretObject is the dispatch's Secret: the session's token, the gateway's CA and the spec's
// environment. Immutable, so nothing edits a running pod's credentials in place.
func secretObject(ns, name, id, token string, ca []byte, env []envVar) *corev1.Secret {
	data := map[string][]byte{secretToken: []byte(token), secretCA: ca}
	for _, e := range env {
		data[secretEnvPrefix+e.name] = []byte(e.value)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels(id)},
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptrTo(true),
		Data:       data,
	}
}

// networkPolicyObject admits no ingress to the dispatch's pod and egress only to the gateway's
// addresses (one, or a name's, resolved) and port over TCP, and to serve's pods on that port
// when the target names them (gateway_peer): no DNS, no other pod, no metadata service. It binds only where the cluster's network plugin enforces NetworkPolicy (the docs
// say so).
func networkPolicyObject(ns, name, id string, gw gatewayAddr) *networkingv1.NetworkPolicy {
	port := intstr.FromInt32(int32(gw.port))
	tcp := corev1.ProtocolTCP
	peers := make([]networkingv1.NetworkPolicyPeer, 0, len(gw.addrs))
	for _, a := range gw.addrs {
		peers = append(peers, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: netip.PrefixFrom(a, a.BitLen()).String()}})
	}
	if gw.peer != nil {
		peers = append(peers, gw.peer.policyPeer())
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels(id)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: labels(id)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    peers,
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		},
	}
}

// envVar is one variable of the spec's environment.
type envVar struct{ name, value string }

// splitEnv parses the spec's "NAME=value" list ([podenv.Split]).
func splitEnv(env []string) ([]envVar, error) {
	vars, err := podenv.Split(env)
	if err != nil {
		return nil, err
	}
	out := make([]envVar, len(vars))
	for i, v := range vars {
		out[i] = envVar{v.Name, v.Value}
	}
	return out, nil
}

// checkMounts validates a session's mounts before any of them names a volume or a path: names
// [a-z0-9-] of at most 40 bytes, unique and not the provider's own; destinations absolute,
// clean and clear of the paths the provider mounts itself.
func checkMounts(ms []remote.Mount) error {
	names := map[string]bool{}
	for _, m := range ms {
		if m.Name == "" || len(m.Name) > 40 || !isDNSLabel(m.Name) {
			return fmt.Errorf("mount %q: want a name of [a-z0-9-], at most 40 bytes", m.Name)
		}
		if m.Name == binVolume || names[m.Name] {
			return fmt.Errorf("mount %q: name reserved or used twice", m.Name)
		}
		names[m.Name] = true
		if !path.IsAbs(m.Dst) || path.Clean(m.Dst) != m.Dst || m.Dst == "/" || strings.ContainsAny(m.Dst, "\x00\n") {
			return fmt.Errorf("mount %q: destination %q must be a clean absolute path other than /", m.Name, m.Dst)
		}
		for _, own := range []string{binDir, tmpDir, stageDir} {
			if m.Dst == own || strings.HasPrefix(m.Dst, own+"/") || strings.HasPrefix(own, m.Dst+"/") {
				return fmt.Errorf("mount %q: destination %q overlaps the provider's %s", m.Name, m.Dst, own)
			}
		}
		if m.File && len(m.Sockets) > 0 {
			return fmt.Errorf("mount %q: a file mount cannot hold sockets", m.Name)
		}
	}
	return nil
}

// podUser is the uid and gid the dispatch's pod runs as: the spec's RunAs (a root agora's
// leased uid), else the dispatch's own uid of the target's range. RLIMIT_NPROC, and the
// kernel's other per-uid counters, are kept per uid on the node whatever the pod: with one uid
// for every pod, one agent forking to its limit would keep every other pod of that uid on
// the node from forking.
func (p *Provider) podUser(s compute.Spec) (uid, gid int64) {
	if ra := s.RunAs; ra != nil {
		return int64(ra.UID), int64(ra.GID)
	}
	first := cmp.Or(p.opts.SandboxUID, DefaultSandboxUID)
	u := int64(compute.SandboxUIDFor(first, s.ID))
	return u, u
}

// rlimitsEnv hands the worker the limits a pod has no setting for; it applies them to itself
// before the agent runs (internal/worker/remote/rlimit.go). Not a secret: it is a value in
// the Job.
func rlimitsEnv(l compute.Limits) corev1.EnvVar {
	r := remote.Rlimits{Nofile: remote.DefaultNofile}
	if l.MaxProcs > 0 {
		r.Nproc = uint64(l.MaxProcs)
	}
	if l.FileSize > 0 {
		r.Fsize = uint64(l.FileSize)
	}
	return corev1.EnvVar{Name: remote.RlimitsEnv, Value: r.WithDefaults().String()}
}

func ptrTo[T any](v T) *T { return &v }
