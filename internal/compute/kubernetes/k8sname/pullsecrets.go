package k8sname

import (
	"fmt"
	"strings"
)

// MaxPullSecrets bounds a target's image_pull_secrets: a pod spec names each one, and every
// pod agora makes carries the list, so a config of thousands would bloat each object towards
// etcd's size limit and make every kubelet look each one up.
const MaxPullSecrets = 16

// OwnNamePrefix starts the name of every object agora makes in the namespace ([ObjectName]:
// agora-<id>; a slot's agora-<slot>). A pull secret of that name would be one of agora's own
// Secrets (a dispatch's token, CA and egress proxy password), never a registry credential.
const OwnNamePrefix = "agora-"

// CheckPullSecrets validates image_pull_secrets: at most [MaxPullSecrets] names, each a
// DNS-1123 subdomain (a Secret's name: no '/', no control character, nothing a path could
// be made of), none twice and none of agora's own Secrets' names.
func CheckPullSecrets(names []string) error {
	if len(names) > MaxPullSecrets {
		return fmt.Errorf("%d names; at most %d (each pod agora makes names every one)", len(names), MaxPullSecrets)
	}
	seen := make(map[string]bool, len(names))
	for i, n := range names {
		switch {
		case !IsDNSSubdomain(n):
			return fmt.Errorf("name %d, %q: not a Secret name (lowercase letters, digits, '-' and '.', at most 253)", i+1, clip(n))
		case strings.HasPrefix(n, OwnNamePrefix):
			return fmt.Errorf("name %q: names starting %q are agora's own Secrets (a dispatch's token and proxy password), not registry credentials", n, OwnNamePrefix)
		case seen[n]:
			return fmt.Errorf("name %q is listed twice", n)
		}
		seen[n] = true
	}
	return nil
}

// clip shortens what an error quotes back: a name of 10,000 bytes is not worth repeating.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
