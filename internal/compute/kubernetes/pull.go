package kubernetes

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/agora-dev/agora/internal/compute/kubernetes/k8sname"
)

// Image pull settings: images published to a private registry are pulled with
// docker-registry Secrets the cluster's operator made in the target's namespace. agora only
// names them in the pod spec; it never reads, writes or prints them.

// MaxPullSecrets bounds a target's image_pull_secrets (see [k8sname.MaxPullSecrets]).
const MaxPullSecrets = k8sname.MaxPullSecrets

// The image pull policies a target may set ([Options.PullPolicy]).
const (
	PullIfNotPresent = string(corev1.PullIfNotPresent)
	PullAlways       = string(corev1.PullAlways)
	PullNever        = string(corev1.PullNever)
)

// CheckPullSecrets validates image_pull_secrets: at most [MaxPullSecrets] names, each a
// DNS-1123 subdomain (a Secret's name: no '/', no control character, nothing a path could
// be made of), none twice and none of agora's own Secrets' names ([k8sname.CheckPullSecrets]).
func CheckPullSecrets(names []string) error { return k8sname.CheckPullSecrets(names) }

// CheckPullPolicy validates image_pull_policy: "" (IfNotPresent, the default), IfNotPresent,
// Always or Never.
func CheckPullPolicy(p string) error {
	switch p {
	case "", PullIfNotPresent, PullAlways, PullNever:
		return nil
	}
	return fmt.Errorf("%q: want %s (the default), %s or %s", clip(p), PullIfNotPresent, PullAlways, PullNever)
}

// clip shortens what an error quotes back: a name of 10,000 bytes is not worth repeating.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// pullPolicy is the policy every container of the target's pods gets.
func (p *Provider) pullPolicy() corev1.PullPolicy {
	if p.opts.PullPolicy == "" {
		return corev1.PullIfNotPresent
	}
	return corev1.PullPolicy(p.opts.PullPolicy)
}

// pullSecrets is the pod spec's imagePullSecrets: nil when the target names none, so a pod
// without them is byte for byte what it was before the setting existed.
func (p *Provider) pullSecrets() []corev1.LocalObjectReference {
	if len(p.opts.PullSecrets) == 0 {
		return nil
	}
	out := make([]corev1.LocalObjectReference, len(p.opts.PullSecrets))
	for i, n := range p.opts.PullSecrets {
		out[i] = corev1.LocalObjectReference{Name: n}
	}
	return out
}

// pullString names the target's pull settings for a message: the policy and the Secrets'
// names (never their content, which agora does not read).
func (p *Provider) pullString() string {
	s := "imagePullPolicy " + string(p.pullPolicy())
	if len(p.opts.PullSecrets) > 0 {
		s += ", imagePullSecrets " + strings.Join(p.opts.PullSecrets, ",")
	}
	return s
}
