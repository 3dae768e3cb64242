package sandboxcheck

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// Pod is what a pod agora checks must be, beyond the rules every such pod obeys: a cold
// Sandbox's (its Secret named for it, its dispatch's deadline) or a pool's pod (the pool's
// Secret, the pool's ServiceAccount with one projected token for the gateway's audience, the
// filler, no deadline until the claim); and the target's settings the pod carries.
type Pod struct {
	Secret   string // the Secret every secretKeyRef must name
	Deadline *int64 // activeDeadlineSeconds, nil for none
	// A pool's pod: its ServiceAccount and the audience of its projected token volume
	// (TokenVolume), which only the init step mounts.
	ServiceAccount, Audience string
	TokenVolume              string
	RuntimeClass             string            // the target's runtimeClassName, "" for none
	GatewayURL               string            // the only gateway a container may name
	NodeSelector             map[string]string // the target's
	// Init and Containers are the pod's containers, exactly these names in this order.
	Init, Containers []Container
}

// Container is what one of the pod's containers must run with.
type Container struct {
	Name, Image string
	Resources   corev1.ResourceRequirements
}

// CheckPod reports through bad every way pod breaks Check's rules for a pod (spec) of either
// kind: the dispatch's, or a warm pool's.
func CheckPod(r Pod, annotations map[string]string, pod *corev1.PodSpec, bad func(string, ...any)) {
	var checkContainer func(c corev1.Container, init bool)
	switch {
	case pod.HostNetwork, pod.HostPID, pod.HostIPC, pod.HostUsers != nil && *pod.HostUsers:
		bad("the pod shares a host namespace")
	case pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken:
		bad("the pod mounts a service account token")
	case r.ServiceAccount == "" && pod.ServiceAccountName != "" && pod.ServiceAccountName != "default",
		r.ServiceAccount != "" && pod.ServiceAccountName != r.ServiceAccount:
		bad("the pod runs as service account %q", pod.ServiceAccountName)
	case pod.RestartPolicy != corev1.RestartPolicyNever:
		bad("restartPolicy %q: a dispatch's worker runs once", pod.RestartPolicy)
	}
	if want := r.RuntimeClass; (pod.RuntimeClassName == nil) != (want == "") || (want != "" && *pod.RuntimeClassName != want) {
		bad("runtimeClassName %v, want %q", derefOr(pod.RuntimeClassName, ""), want)
	}
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		bad("the pod's security context is not non-root with seccomp RuntimeDefault")
	}
	for _, v := range pod.Volumes {
		if v.EmptyDir == nil && !(r.Audience != "" && v.Name == r.TokenVolume && TokenSource(v, r.Audience)) {
			bad("volume %q is not an emptyDir", v.Name)
		}
	}
	want := map[string]Container{}
	for _, c := range append(append([]Container(nil), r.Init...), r.Containers...) {
		want[c.Name] = c
	}
	check := func(kind string, cs []corev1.Container, ws []Container) {
		names := make([]string, len(ws))
		for i, w := range ws {
			names[i] = w.Name
		}
		if len(cs) != len(ws) {
			bad("%s: want exactly %q", kind, names)
			return
		}
		for i, c := range cs {
			if c.Name != names[i] {
				bad("%s: want exactly %q", kind, names)
				return
			}
			checkContainer(c, kind == "initContainers")
		}
	}
	checkContainer = func(c corev1.Container, init bool) {
		if w := want[c.Name].Image; c.Image != w {
			bad("container %q runs image %q, want %q", c.Name, c.Image, w)
		}
		for _, m := range c.VolumeMounts {
			if m.Name == r.TokenVolume && (!init || !m.ReadOnly) {
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
			case e.Name == remote.GatewayURLEnv && (e.Value != r.GatewayURL || e.ValueFrom != nil):
				bad("container %q sends its token to %q, not the gateway %q", c.Name, e.Value, r.GatewayURL)
			case e.ValueFrom != nil && (e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != r.Secret):
				bad("container %q reads %s from outside the dispatch's Secret", c.Name, e.Name)
			}
		}
	}
	check("initContainers", pod.InitContainers, r.Init)
	check("containers", pod.Containers, r.Containers)
	checkPodFixed(r, want, annotations, pod, bad)
	if len(pod.EphemeralContainers) > 0 {
		bad("the pod has ephemeral containers")
	}
}

// TokenSource reports whether v is exactly the pool pod's projected token: one
// ServiceAccount token for audience, living at most an hour, and nothing else (no Secret, no
// ConfigMap, no downward API, no cluster trust bundle).
func TokenSource(v corev1.Volume, audience string) bool {
	pr := v.Projected
	if pr == nil || v.EmptyDir != nil || len(pr.Sources) != 1 {
		return false
	}
	src := pr.Sources[0]
	t := src.ServiceAccountToken
	return t != nil && src.Secret == nil && src.ConfigMap == nil && src.DownwardAPI == nil && src.ClusterTrustBundle == nil &&
		src.PodCertificate == nil && t.Audience == audience && t.ExpirationSeconds != nil && *t.ExpirationSeconds <= 3600 &&
		t.Path == "token" && (pr.DefaultMode == nil || *pr.DefaultMode&0o007 == 0)
}
