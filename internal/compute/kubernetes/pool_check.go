package kubernetes

import (
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"

	"github.com/agora-dev/agora/internal/compute"
)

// checkPoolPod holds a pool's pod (its template's, a Sandbox's pod template, or the running
// pod as the apiserver stores it) to checkSandbox's rules, with what a pool's pod is instead of
// a cold one's: the pool's labels exactly (but the controller's own, agents.x-k8s.io/), the
// pool's Secret, the pool's ServiceAccount with one projected token for home's gateway audience
// mounted by the init step alone, the worker and its filler, no deadline (the handle and the
// claim's shutdownTime time a claimed pod).
func (p *Provider) checkPoolPod(lbl, annotations map[string]string, pod *corev1.PodSpec, s compute.Spec, name, home string) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	want, _ := p.poolPodLabels(name, home)
	if own := podOwnLabels(lbl); !maps.Equal(own, want) {
		// Another NetworkPolicy of the namespace may select an extra label: policies add up.
		bad("the pod's labels %v are not the pool's %v", own, want)
	}
	p.checkPodRules(podRules{secret: name, sa: PoolServiceAccount, audience: PoolAudience(home), fill: true}, annotations, pod, s, bad)
	n := 0
	for _, v := range pod.Volumes {
		if v.Name == poolTokenVolume {
			n++
		}
	}
	if n != 1 {
		bad("the pod has %d projected token volumes, want the one of the init step", n)
	}
	if len(errs) > 0 {
		return fmt.Errorf("pool %s's pod would weaken a dispatch's isolation: %w", name, errors.Join(errs...))
	}
	return nil
}
