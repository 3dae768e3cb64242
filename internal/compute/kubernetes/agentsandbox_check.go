package kubernetes

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/kubernetes/sandboxcheck"
)

// checkSandbox refuses a Sandbox whose settings would weaken what a Job dispatch's pod has
// (sandboxcheck.Check says which), against what this target builds for spec s.
func (p *Provider) checkSandbox(sb *sandboxObject, s compute.Spec) error {
	var deadline *int64
	if t := s.Limits.Timeout; t > 0 {
		deadline = ptrTo(int64((t + time.Second - 1) / time.Second))
	}
	return sandboxcheck.Check(sb, sandboxcheck.Want{Selected: labels(s.ID), Labels: p.templateLabels(s.ID),
		Pod: p.podWant(podRules{secret: sb.Name, deadline: deadline}, s)})
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

// podWant is r with what this target builds for spec s: its images, runtime class, gateway,
// node selector, and the containers' names and resources.
func (p *Provider) podWant(r podRules, s compute.Spec) sandboxcheck.Pod {
	res := p.resources(s.Limits)
	w := sandboxcheck.Pod{Secret: r.secret, Deadline: r.deadline, ServiceAccount: r.sa, Audience: r.audience,
		TokenVolume: poolTokenVolume, RuntimeClass: p.opts.RuntimeClass, GatewayURL: p.opts.GatewayURL, NodeSelector: p.opts.NodeSelector,
		Init:       []sandboxcheck.Container{{Name: fetchContainer, Image: p.opts.WorkerImage, Resources: res}},
		Containers: []sandboxcheck.Container{{Name: workerContainer, Image: p.opts.Image, Resources: res}}}
	if r.fill {
		w.Containers = append(w.Containers, sandboxcheck.Container{Name: fillContainer, Image: p.opts.WorkerImage, Resources: fillResources(res)})
	}
	return w
}

// checkPodRules is checkSandbox's rules for a pod (spec) of either kind.
func (p *Provider) checkPodRules(r podRules, annotations map[string]string, pod *corev1.PodSpec, s compute.Spec, bad func(string, ...any)) {
	sandboxcheck.CheckPod(p.podWant(r, s), annotations, pod, bad)
}
