package config

import (
	"fmt"
	"strings"

	"github.com/agora-dev/agora/internal/strictyaml"
)

// MaxPullSecrets bounds a kubernetes target's image_pull_secrets: every pod agora makes for
// the target names each one (the provider's own bound, kubernetes.MaxPullSecrets, is the same).
const MaxPullSecrets = 16

// The image pull policies of a kubernetes target (Kubernetes' own names).
const (
	PullIfNotPresent = "IfNotPresent"
	PullAlways       = "Always"
	PullNever        = "Never"
)

// validatePull checks a kubernetes target's image_pull_secrets and image_pull_policy at p:
// each name a DNS-1123 subdomain (a Secret's name), none twice, none of agora's own Secrets'
// (agora-<id>: a dispatch's token and egress proxy password, not a registry credential), and
// at most MaxPullSecrets; the policy one of Kubernetes' three.
func (t *Target) validatePull(pos *strictyaml.Positions, p string) strictyaml.Errors {
	var errs strictyaml.Errors
	if n := len(t.ImagePullSecrets); n > MaxPullSecrets {
		// One error, not one per name: a list of thousands is refused whole.
		errs = append(errs, pos.Errorf(p+".image_pull_secrets", "%d names; at most %d (every pod agora makes for the target names each one)", n, MaxPullSecrets))
		return append(errs, t.validatePullPolicy(pos, p)...)
	}
	seen := map[string]bool{}
	for i, name := range t.ImagePullSecrets {
		at := fmt.Sprintf("%s.image_pull_secrets[%d]", p, i)
		switch {
		case !dnsSubdomain(name):
			errs = append(errs, pos.Errorf(at, "want the name of a Secret in the target's namespace (lowercase letters, digits, '-' and '.', at most 253), got %q", clipName(name)))
		case strings.HasPrefix(name, "agora-"):
			errs = append(errs, pos.Errorf(at, "%q: names starting agora- are agora's own Secrets (a dispatch's token and egress proxy password), not registry credentials", name))
		case seen[name]:
			errs = append(errs, pos.Errorf(at, "%q is listed twice", name))
		}
		seen[name] = true
	}
	return append(errs, t.validatePullPolicy(pos, p)...)
}

func (t *Target) validatePullPolicy(pos *strictyaml.Positions, p string) strictyaml.Errors {
	switch t.ImagePullPolicy {
	case "", PullIfNotPresent, PullAlways, PullNever:
		return nil
	}
	return strictyaml.Errors{pos.Errorf(p+".image_pull_policy", "want %s (the default), %s or %s, got %q",
		PullIfNotPresent, PullAlways, PullNever, clipName(t.ImagePullPolicy))}
}

// clipName shortens a value an error quotes back.
func clipName(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
