package sandboxcheck

import (
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// checkPodFixed is CheckPod's part for the fields a Job's pod fixes that the rules there do
// not read: a container's security context overrides the pod's (a container with runAsUser 0
// runs as root under a pod that says runAsNonRoot, an Unconfined seccomp profile there beats
// the pod's RuntimeDefault), and an editor of Sandboxes may also open a host port, keep the
// pod past its NetworkPolicy with a grace period, lift its deadline or limits, or choose its
// node. The rules are what agora builds (the kubernetes provider's job.go): no container-level
// user, group or profile of its own, no ports, no grace, the dispatch's deadline and
// resources, the target's node selector.
func checkPodFixed(r Pod, want map[string]Container, annotations map[string]string, pod *corev1.PodSpec, bad func(string, ...any)) {
	if sc := pod.SecurityContext; sc != nil {
		switch {
		case sc.RunAsGroup == nil || *sc.RunAsGroup == 0, sc.FSGroup == nil || *sc.FSGroup == 0, len(sc.SupplementalGroups) > 0:
			bad("the pod runs in the root group or in groups agora did not give it")
		case sc.AppArmorProfile != nil, sc.SELinuxOptions != nil, sc.WindowsOptions != nil, len(sc.Sysctls) > 0:
			bad("the pod sets its own AppArmor, SELinux, Windows options or sysctls")
		}
	}
	for k := range annotations {
		if strings.HasPrefix(k, "container.apparmor.security.beta.kubernetes.io/") || strings.HasPrefix(k, "seccomp.security.alpha.kubernetes.io/") {
			bad("the pod template's annotation %q sets a security profile", k)
		}
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g != 0 {
		bad("terminationGracePeriodSeconds is not 0: the pod would outlive its NetworkPolicy at cancel")
	}
	deadline := r.Deadline
	if (deadline == nil) != (pod.ActiveDeadlineSeconds == nil) || (deadline != nil && *deadline != *pod.ActiveDeadlineSeconds) {
		bad("activeDeadlineSeconds %v, want %v (the dispatch's timeout)", derefOr(pod.ActiveDeadlineSeconds, 0), derefOr(deadline, 0))
	}
	switch {
	case pod.NodeName != "", len(pod.Tolerations) > 0, pod.Affinity != nil, len(pod.TopologySpreadConstraints) > 0:
		bad("the pod chooses its node (nodeName, tolerations, affinity or spread)")
	case !maps.Equal(pod.NodeSelector, r.NodeSelector):
		bad("nodeSelector %v, want the target's %v", pod.NodeSelector, r.NodeSelector)
	}
	for _, c := range append(append([]corev1.Container(nil), pod.InitContainers...), pod.Containers...) {
		if len(c.Ports) > 0 {
			bad("container %q declares ports (a host port reaches the pod from outside)", c.Name)
		}
		// A container not among want's is refused by name already.
		if w, ok := want[c.Name]; ok && !equality.Semantic.DeepEqual(c.Resources, w.Resources) {
			bad("container %q's resources are not the dispatch's limits", c.Name)
		}
		if sc := c.SecurityContext; sc != nil && (sc.RunAsUser != nil || sc.RunAsGroup != nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
			sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
			sc.AppArmorProfile != nil || sc.SELinuxOptions != nil || sc.WindowsOptions != nil ||
			(sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount)) {
			bad("container %q overrides the pod's user, group or security profiles", c.Name)
		}
	}
}
