package config

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/strictyaml"
)

// Leader makes `agora orch serve` one of several replicas of which only the holder of a
// Kubernetes Lease (coordination.k8s.io/v1) serves (internal/lease):
//
//	leader: {lease: agora-leader, namespace: agora, kubeconfig: "", identity: agora-0, duration: 10s}
//
// A serve that does not hold the lease waits as a standby; the leader renews it, and fences
// every commit and replica upload with it: past its last renew + 4/5 of duration, nothing
// more is written, and serve exits saying it lost the lease. Absent (the default), serve
// leads alone and no Kubernetes client is made.
type Leader struct {
	// Lease is the Lease object's name (a DNS-1123 subdomain).
	Lease string `yaml:"lease"`
	// Namespace holds the Lease (a DNS-1123 label).
	Namespace string `yaml:"namespace"`
	// Kubeconfig is a kubeconfig file (absolute path); empty means in-cluster (the pod's service account).
	Kubeconfig string `yaml:"kubeconfig"`
	// Identity names this replica in the Lease's holderIdentity; default the host name (a
	// StatefulSet pod's name).
	Identity string `yaml:"identity"`
	// Duration is the lease duration (default 10s, 2s to 5m): a standby takes over at most
	// about duration + duration/5 after the leader's last renew.
	Duration time.Duration `yaml:"duration"`
}

// DefaultLeaseDuration is leader.duration when the config names none.
const DefaultLeaseDuration = 10 * time.Second

// Set reports whether agora.yaml asks for leader election.
func (l Leader) Set() bool { return l.Lease != "" || l.Namespace != "" }

// DurationOrDefault is Duration, or [DefaultLeaseDuration] when unset.
func (l Leader) DurationOrDefault() time.Duration {
	return cmp.Or(l.Duration, DefaultLeaseDuration)
}

// IdentityOrDefault is Identity, or the host name when unset.
func (l Leader) IdentityOrDefault() (string, error) {
	if l.Identity != "" {
		return l.Identity, nil
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "", fmt.Errorf("leader.identity is unset and the host name is unknown (%v): set leader.identity", err)
	}
	return h, nil
}

// dnsLabel reports whether s is a DNS-1123 label: lowercase letters, digits and '-', at most
// 63, starting and ending with a letter or digit.
func dnsLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// dnsSubdomain reports whether s is a DNS-1123 subdomain: labels joined by '.', at most 253.
func dnsSubdomain(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !dnsLabel(l) {
			return false
		}
	}
	return true
}

// leaseIdentity reports whether s may be a holderIdentity: 1 to 128 letters, digits and
// . _ : @ / -, starting with a letter or digit (no spaces, quotes or controls).
func leaseIdentity(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i, c := range s {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("._:@/-", c)) {
			return false
		}
	}
	return true
}

func validateLeader(pos *strictyaml.Positions, l Leader) strictyaml.Errors {
	if !l.Set() {
		if l.Kubeconfig != "" || l.Identity != "" || l.Duration != 0 {
			return strictyaml.Errors{pos.Errorf("leader", "lease and namespace are required")}
		}
		return nil
	}
	var errs strictyaml.Errors
	if !dnsSubdomain(l.Lease) {
		errs = append(errs, pos.Errorf("leader.lease", "%q is not a Lease name: want a DNS-1123 subdomain such as agora-leader", l.Lease))
	}
	if !dnsLabel(l.Namespace) {
		errs = append(errs, pos.Errorf("leader.namespace", "%q is not a namespace: want a DNS-1123 label such as agora", l.Namespace))
	}
	if l.Kubeconfig != "" && !filepath.IsAbs(l.Kubeconfig) {
		errs = append(errs, pos.Errorf("leader.kubeconfig", "%q: want an absolute path (or empty for in-cluster)", l.Kubeconfig))
	}
	if l.Identity != "" && !leaseIdentity(l.Identity) {
		errs = append(errs, pos.Errorf("leader.identity", "%q: want 1 to 128 letters, digits and . _ : @ / -", l.Identity))
	}
	if l.Duration != 0 && (l.Duration < 2*time.Second || l.Duration > 5*time.Minute) {
		errs = append(errs, pos.Errorf("leader.duration", "want 2s to 5m, got %s", l.Duration))
	}
	return errs
}
