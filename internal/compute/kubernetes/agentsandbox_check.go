package kubernetes

import (
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
)

// checkSandbox refuses a Sandbox whose settings would weaken what a Job dispatch's pod has:
// it runs before agora creates one (a bug in the builder fails closed) and before agora adopts
// one it finds (whoever may patch Sandboxes in the namespace could have edited its pod
// template: host namespaces, a privileged container, a hostPath volume, a Service, another
// image). It checks rules, not equality: an adopted Sandbox's mounts are not known again.
func (p *Provider) checkSandbox(sb *sandboxObject, s compute.Spec) error {
	id := s.ID
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if sb.Spec.Service == nil || *sb.Spec.Service {
		bad("spec.service is not false: the controller would make a Service reaching the pod")
	}
	if !ownedBy(sb.Spec.PodTemplate.Metadata.Labels, id) {
		bad("the pod template does not carry the labels the dispatch's NetworkPolicy selects")
	} else if want := p.templateLabels(id); !maps.Equal(sb.Spec.PodTemplate.Metadata.Labels, want) {
		// Another NetworkPolicy of the namespace may select an extra label: policies add up.
		bad("the pod template's labels %v are not the dispatch's %v", sb.Spec.PodTemplate.Metadata.Labels, want)
	}
	pod := &sb.Spec.PodTemplate.Spec
	switch {
	case pod.HostNetwork, pod.HostPID, pod.HostIPC, pod.HostUsers != nil && *pod.HostUsers:
		bad("the pod shares a host namespace")
	case pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken:
		bad("the pod mounts a service account token")
	case pod.ServiceAccountName != "" && pod.ServiceAccountName != "default":
		bad("the pod runs as service account %q", pod.ServiceAccountName)
	case pod.RestartPolicy != corev1.RestartPolicyNever:
		bad("restartPolicy %q: a dispatch's worker runs once", pod.RestartPolicy)
	}
	if want := p.opts.RuntimeClass; (pod.RuntimeClassName == nil) != (want == "") || (want != "" && *pod.RuntimeClassName != want) {
		bad("runtimeClassName %v, want %q", derefOr(pod.RuntimeClassName, ""), want)
	}
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		bad("the pod's security context is not non-root with seccomp RuntimeDefault")
	}
	for _, v := range pod.Volumes {
		if v.EmptyDir == nil {
			bad("volume %q is not an emptyDir", v.Name)
		}
	}
	images := map[string]string{fetchContainer: p.opts.WorkerImage, workerContainer: p.opts.Image}
	check := func(kind string, cs []corev1.Container, want string) {
		if len(cs) != 1 || cs[0].Name != want {
			bad("%s: want exactly %q", kind, want)
			return
		}
		c := cs[0]
		if c.Image != images[want] {
			bad("container %q runs image %q, want %q", c.Name, c.Image, images[want])
		}
		s := c.SecurityContext
		if s == nil || (s.Privileged != nil && *s.Privileged) || s.AllowPrivilegeEscalation == nil || *s.AllowPrivilegeEscalation ||
			s.ReadOnlyRootFilesystem == nil || !*s.ReadOnlyRootFilesystem || s.Capabilities == nil || len(s.Capabilities.Add) > 0 ||
			len(s.Capabilities.Drop) != 1 || s.Capabilities.Drop[0] != "ALL" {
			bad("container %q is not restricted (privileged, escalation, writable root or capabilities)", c.Name)
		}
		if len(c.EnvFrom) > 0 {
			bad("container %q takes its environment from elsewhere (envFrom)", c.Name)
		}
		for _, e := range c.Env {
			switch {
			case e.Name == remote.GatewayURLEnv && (e.Value != p.opts.GatewayURL || e.ValueFrom != nil):
				bad("container %q sends its token to %q, not the gateway %q", c.Name, e.Value, p.opts.GatewayURL)
			case e.ValueFrom != nil && (e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != sb.Name):
				bad("container %q reads %s from outside the dispatch's Secret", c.Name, e.Name)
			}
		}
	}
	check("initContainers", pod.InitContainers, fetchContainer)
	check("containers", pod.Containers, workerContainer)
	p.checkSandboxPod(sb, s, bad)
	if len(pod.EphemeralContainers) > 0 {
		bad("the pod has ephemeral containers")
	}
	if len(errs) > 0 {
		return fmt.Errorf("sandbox %q would weaken the dispatch's isolation: %w", sb.Name, errors.Join(errs...))
	}
	return nil
}

func derefOr[T any](p *T, zero T) T {
	if p == nil {
		return zero
	}
	return *p
}

// templateLabels are the labels agora gives a dispatch's pod template (job.go).
func (p *Provider) templateLabels(id string) map[string]string {
	m := metav1.ObjectMeta{Labels: labels(id)}
	if p.testOnlyPodMeta != nil {
		p.testOnlyPodMeta(&m)
	}
	return m.Labels
}
