package kubernetes

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// TestCheckSandbox_WeakenedRefused: the Sandbox agora builds passes; each way an editor of
// Sandboxes could weaken it is refused, naming what is wrong. Start refuses to create such a
// Sandbox and to adopt one (TestAgentSandboxBackend_AdoptRefusesWeakened on the cluster).
func TestCheckSandbox_WeakenedRefused(t *testing.T) {
	p, err := newProvider(testOptions(t, &fakeExporter{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	id := "01HWEAKENED"
	build := func() *sandboxObject {
		return p.sandboxOf(jobInput{name: objectName(id), id: id, spec: testSpec(id), env: []envVar{{"HOME", "/tmp"}},
			mounts: testMounts(), gateway: p.gateway})
	}
	if err := p.checkSandbox(build(), testSpec(id)); err != nil {
		t.Fatalf("agora's own sandbox refused: %v", err)
	}
	worker := func(sb *sandboxObject) *corev1.Container { return &sb.Spec.PodTemplate.Spec.Containers[0] }
	attacks := map[string]struct {
		edit func(*sandboxObject)
		want string
	}{
		"service":       {func(sb *sandboxObject) { sb.Spec.Service = ptrTo(true) }, "spec.service"},
		"service unset": {func(sb *sandboxObject) { sb.Spec.Service = nil }, "spec.service"},
		"relabel":       {func(sb *sandboxObject) { sb.Spec.PodTemplate.Metadata.Labels[labelDispatch] = "other" }, "labels"},
		"host network":  {func(sb *sandboxObject) { sb.Spec.PodTemplate.Spec.HostNetwork = true }, "host namespace"},
		"host pid":      {func(sb *sandboxObject) { sb.Spec.PodTemplate.Spec.HostPID = true }, "host namespace"},
		"sa token":      {func(sb *sandboxObject) { sb.Spec.PodTemplate.Spec.AutomountServiceAccountToken = ptrTo(true) }, "service account token"},
		"restart":       {func(sb *sandboxObject) { sb.Spec.PodTemplate.Spec.RestartPolicy = corev1.RestartPolicyAlways }, "restartPolicy"},
		"runtime class": {func(sb *sandboxObject) { sb.Spec.PodTemplate.Spec.RuntimeClassName = ptrTo("runc") }, "runtimeClassName"},
		"root":          {func(sb *sandboxObject) { sb.Spec.PodTemplate.Spec.SecurityContext.RunAsUser = ptrTo(int64(0)) }, "non-root"},
		"no seccomp":    {func(sb *sandboxObject) { sb.Spec.PodTemplate.Spec.SecurityContext.SeccompProfile = nil }, "seccomp"},
		"privileged":    {func(sb *sandboxObject) { worker(sb).SecurityContext.Privileged = ptrTo(true) }, "not restricted"},
		"escalation":    {func(sb *sandboxObject) { worker(sb).SecurityContext.AllowPrivilegeEscalation = ptrTo(true) }, "not restricted"},
		"writable root": {func(sb *sandboxObject) { worker(sb).SecurityContext.ReadOnlyRootFilesystem = nil }, "not restricted"},
		"cap add": {func(sb *sandboxObject) {
			worker(sb).SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
		}, "not restricted"},
		"other image": {func(sb *sandboxObject) { worker(sb).Image = "evil@sha256:" + strings.Repeat("0", 64) }, "runs image"},
		"sidecar": {func(sb *sandboxObject) {
			sb.Spec.PodTemplate.Spec.Containers = append(sb.Spec.PodTemplate.Spec.Containers, corev1.Container{Name: "x"})
		}, "exactly"},
		"redirect token": {func(sb *sandboxObject) { setEnv(worker(sb), remote.GatewayURLEnv, "https://203.0.113.9:443") }, "sends its token"},
		"other secret": {func(sb *sandboxObject) {
			worker(sb).Env = append(worker(sb).Env, secretRef("X", "someone-elses", "k"))
		}, "outside the dispatch's Secret"},
		"host path": {func(sb *sandboxObject) {
			sb.Spec.PodTemplate.Spec.Volumes = append(sb.Spec.PodTemplate.Spec.Volumes, corev1.Volume{Name: "h",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
		}, "not an emptyDir"},
		"env from": {func(sb *sandboxObject) {
			worker(sb).EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}}}}
		}, "envFrom"},
	}
	for name, a := range attacks {
		sb := build()
		a.edit(sb)
		err := p.checkSandbox(sb, testSpec(id))
		if err == nil || !strings.Contains(err.Error(), a.want) {
			t.Errorf("%s: checkSandbox = %v, want a refusal naming %q", name, err, a.want)
		}
	}
}

func setEnv(c *corev1.Container, name, value string) {
	for i := range c.Env {
		if c.Env[i].Name == name {
			c.Env[i].Value = value
		}
	}
}
