package kubernetes

import (
	"errors"
	"fmt"
	"maps"
	"time"

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
	var deadline *int64
	if t := s.Limits.Timeout; t > 0 {
		deadline = ptrTo(int64((t + time.Second - 1) / time.Second))
	}
	p.checkPodRules(podRules{secret: sb.Name, deadline: deadline}, sb.Spec.PodTemplate.Metadata.Annotations, &sb.Spec.PodTemplate.Spec, s, bad)
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

// podRules are what a pod agora checks must be, beyond the rules every such pod obeys: a cold
// Sandbox's (its Secret named for it, its dispatch's deadline) or a pool's pod (the pool's
// Secret, the pool's ServiceAccount with one projected token for the gateway's audience, the
// filler, no deadline until the claim).
type podRules struct {
	secret   string // the Secret every secretKeyRef must name
	deadline *int64 // activeDeadlineSeconds, nil for none
	// A pool's pod: its ServiceAccount and the audience of its one projected token volume,
	// which only the init step mounts; fill says a worker and a filler run.
	sa, audience string
	fill         bool
}

// checkPodRules is checkSandbox's rules for a pod (spec) of either kind.
func (p *Provider) checkPodRules(r podRules, annotations map[string]string, pod *corev1.PodSpec, s compute.Spec, bad func(string, ...any)) {
	var checkContainer func(c corev1.Container)
	switch {
	case pod.HostNetwork, pod.HostPID, pod.HostIPC, pod.HostUsers != nil && *pod.HostUsers:
		bad("the pod shares a host namespace")
	case pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken:
		bad("the pod mounts a service account token")
	case r.sa == "" && pod.ServiceAccountName != "" && pod.ServiceAccountName != "default",
		r.sa != "" && pod.ServiceAccountName != r.sa:
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
		if v.EmptyDir == nil && !(r.audience != "" && v.Name == poolTokenVolume && poolTokenSource(v, r.audience)) {
			bad("volume %q is not an emptyDir", v.Name)
		}
	}
	images := map[string]string{fetchContainer: p.opts.WorkerImage, workerContainer: p.opts.Image, fillContainer: p.opts.WorkerImage}
	check := func(kind string, cs []corev1.Container, want ...string) {
		if len(cs) != len(want) {
			bad("%s: want exactly %q", kind, want)
			return
		}
		for i, c := range cs {
			if c.Name != want[i] {
				bad("%s: want exactly %q", kind, want)
				return
			}
			checkContainer(c)
		}
	}
	checkContainer = func(c corev1.Container) {
		if c.Image != images[c.Name] {
			bad("container %q runs image %q, want %q", c.Name, c.Image, images[c.Name])
		}
		for _, m := range c.VolumeMounts {
			if m.Name == poolTokenVolume && (c.Name != fetchContainer || !m.ReadOnly) {
				// The agent runs in the worker's container: the pod's projected token must
				// never be there (nor in the filler's), only in the init step's, read-only.
				bad("container %q mounts the pod's projected token", c.Name)
			}
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
			case e.ValueFrom != nil && (e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != r.secret):
				bad("container %q reads %s from outside the dispatch's Secret", c.Name, e.Name)
			}
		}
	}
	check("initContainers", pod.InitContainers, fetchContainer)
	if r.fill {
		check("containers", pod.Containers, workerContainer, fillContainer)
	} else {
		check("containers", pod.Containers, workerContainer)
	}
	p.checkSandboxPod(annotations, pod, s, r, bad)
	if len(pod.EphemeralContainers) > 0 {
		bad("the pod has ephemeral containers")
	}
}
