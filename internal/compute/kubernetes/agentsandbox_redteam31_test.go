package kubernetes

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agora-dev/agora/internal/compute"
)

// TestRedTeam31_CheckSandboxContainerOverrides is an attack on checkSandbox: someone
// who may patch Sandboxes (the threat checkSandbox names) weakens the dispatch's pod through
// fields the check did not read. A container's security context overrides the pod's, so the
// pod-level runAsNonRoot/runAsUser/seccomp checks alone let a container run as root or
// unconfined; the other edits loosen what the Job's pod has (a host port, a grace period that
// outlives the NetworkPolicy at cancel, no deadline, no limits, a node of the editor's choosing).
// Each must be refused before a Sandbox is made or adopted.
func TestRedTeam31_CheckSandboxContainerOverrides(t *testing.T) {
	p, err := newProvider(testOptions(t, &fakeExporter{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	id := "01HREDTEAM31"
	spec := testSpec(id)
	spec.Limits.Memory = 256 << 20
	build := func() *sandboxObject {
		return p.sandboxOf(jobInput{name: objectName(id), id: id, spec: spec, env: []envVar{{"HOME", "/tmp"}},
			mounts: testMounts(), gateway: p.gateway})
	}
	if err := p.checkSandbox(build(), spec); err != nil {
		t.Fatalf("agora's own sandbox refused: %v", err)
	}
	pod := func(sb *sandboxObject) *corev1.PodSpec { return &sb.Spec.PodTemplate.Spec }
	worker := func(sb *sandboxObject) *corev1.Container { return &sb.Spec.PodTemplate.Spec.Containers[0] }
	fetch := func(sb *sandboxObject) *corev1.Container { return &sb.Spec.PodTemplate.Spec.InitContainers[0] }
	attacks := map[string]func(*sandboxObject){
		"container runs as root": func(sb *sandboxObject) {
			worker(sb).SecurityContext.RunAsNonRoot = ptrTo(false)
			worker(sb).SecurityContext.RunAsUser = ptrTo(int64(0))
		},
		"init container runs as root": func(sb *sandboxObject) {
			fetch(sb).SecurityContext.RunAsNonRoot = ptrTo(false)
			fetch(sb).SecurityContext.RunAsUser = ptrTo(int64(0))
		},
		"container root group": func(sb *sandboxObject) { worker(sb).SecurityContext.RunAsGroup = ptrTo(int64(0)) },
		"pod root group":       func(sb *sandboxObject) { pod(sb).SecurityContext.RunAsGroup = ptrTo(int64(0)) },
		"container seccomp unconfined": func(sb *sandboxObject) {
			worker(sb).SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		},
		"container apparmor unconfined": func(sb *sandboxObject) {
			worker(sb).SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		},
		"pod apparmor unconfined": func(sb *sandboxObject) {
			pod(sb).SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		},
		"apparmor annotation": func(sb *sandboxObject) {
			sb.Spec.PodTemplate.Metadata.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/" + workerContainer: "unconfined"}
		},
		"selinux spc_t": func(sb *sandboxObject) {
			worker(sb).SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Type: "spc_t"}
		},
		"proc unmasked": func(sb *sandboxObject) {
			worker(sb).SecurityContext.ProcMount = ptrTo(corev1.UnmaskedProcMount)
		},
		"host port": func(sb *sandboxObject) {
			worker(sb).Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 8080}}
		},
		"unsafe sysctl": func(sb *sandboxObject) {
			pod(sb).SecurityContext.Sysctls = []corev1.Sysctl{{Name: "kernel.msgmax", Value: "1"}}
		},
		"grace period": func(sb *sandboxObject) { pod(sb).TerminationGracePeriodSeconds = ptrTo(int64(3600)) },
		"no deadline":  func(sb *sandboxObject) { pod(sb).ActiveDeadlineSeconds = nil },
		"no limits":    func(sb *sandboxObject) { worker(sb).Resources = corev1.ResourceRequirements{} },
		"more memory": func(sb *sandboxObject) {
			worker(sb).Resources.Limits[corev1.ResourceMemory] = resource.MustParse("64Gi")
		},
		"node chosen": func(sb *sandboxObject) { pod(sb).NodeName = "control-plane-1" },
		"node selector": func(sb *sandboxObject) {
			pod(sb).NodeSelector = map[string]string{"node-role.kubernetes.io/control-plane": ""}
		},
		"tolerate all": func(sb *sandboxObject) {
			pod(sb).Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		},
	}
	for name, edit := range attacks {
		sb := build()
		edit(sb)
		if err := p.checkSandbox(sb, spec); err == nil || !strings.Contains(err.Error(), "would weaken") {
			t.Errorf("%s: checkSandbox = %v, want a refusal", name, err)
		}
	}
}

// TestRedTeam31_SandboxRelabelEndsDispatch is an attack on the NetworkPolicy's
// coverage of an agent-sandbox pod: the controller (v0.5.6, real, on kwok) propagates the
// Sandbox's pod-template labels to the running pod and removes the ones taken out of the
// template. Someone who may patch Sandboxes, not pods, relabels a running dispatch's template:
// the pod loses the labels its NetworkPolicy selects (the policy stops confining it), or gains
// one another policy of the namespace selects (policies add up: that one's egress is the
// pod's too). The dispatch must end (lost) and its Sandbox go, never run on.
func TestRedTeam31_SandboxRelabelEndsDispatch(t *testing.T) {
	for name, label := range map[string]string{
		"dispatch label changed": `"` + labelDispatch + `":"someone-else"`,
		"label added":            `"allow-egress":"all"`,
	} {
		t.Run(name, func(t *testing.T) { relabelAttack(t, label) })
	}
}

func relabelAttack(t *testing.T, label string) {
	p := sandboxProvider(t, &fakeExporter{})
	p.testOnlyPodMeta = failWith(1, "1h")
	id := clusterID("SBRELABEL")
	name := objectName(id)
	h, err := p.Start(t.Context(), testSpec(id))
	if err != nil {
		t.Fatal(err)
	}
	waitPodPhase(t, p, id, corev1.PodRunning)
	before, err := p.client.CoreV1().Pods(p.ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.client.AgentsV1beta1().Sandboxes(p.ns).Patch(t.Context(), name, types.MergePatchType,
		[]byte(`{"spec":{"podTemplate":{"metadata":{"labels":{`+label+`}}}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The precondition: the controller relabels the running pod.
	relabelled := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && !relabelled; time.Sleep(50 * time.Millisecond) {
		pod, err := p.client.CoreV1().Pods(p.ns).Get(t.Context(), name, metav1.GetOptions{})
		relabelled = err == nil && len(pod.Labels) != len(before.Labels) || err == nil && pod.Labels[labelDispatch] != id
		if apierrors.IsNotFound(err) {
			break // agora ended it already
		}
	}
	t.Logf("pod relabelled by the controller: %v", relabelled)
	type result struct {
		exit compute.Exit
		err  error
	}
	ch := make(chan result, 1)
	go func() { e, err := h.Wait(); ch <- result{e, err} }()
	select {
	case r := <-ch:
		if !r.exit.Lost {
			t.Errorf("exit = %+v (%v), want lost: the pod was relabelled", r.exit, r.err)
		}
		t.Logf("ended: %+v %v", r.exit, r.err)
	case <-time.After(20 * time.Second):
		t.Fatal("the dispatch runs on 20 s after its pod was relabelled")
	}
	waitGone(t, "sandbox", func() error {
		_, err := p.client.AgentsV1beta1().Sandboxes(p.ns).Get(t.Context(), name, metav1.GetOptions{})
		return err
	})
}

// TestRedTeam31_SandboxServiceTurnedOnEndsDispatch: someone who may patch Sandboxes turns
// spec.service on for a running dispatch; the controller makes a Service selecting its pod (a
// stable name that reaches it wherever the NetworkPolicy is not enforced). The dispatch must
// end (lost) at the handle's next read of its Sandbox, never run on behind a Service.
func TestRedTeam31_SandboxServiceTurnedOnEndsDispatch(t *testing.T) {
	p := sandboxProvider(t, &fakeExporter{})
	p.testOnlyPodMeta = failWith(1, "1h")
	id := clusterID("SBSVC")
	name := objectName(id)
	h, err := p.Start(t.Context(), testSpec(id))
	if err != nil {
		t.Fatal(err)
	}
	waitPodPhase(t, p, id, corev1.PodRunning)
	if _, err := p.client.AgentsV1beta1().Sandboxes(p.ns).Patch(t.Context(), name, types.MergePatchType,
		[]byte(`{"spec":{"service":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	type result struct {
		exit compute.Exit
		err  error
	}
	ch := make(chan result, 1)
	go func() { e, err := h.Wait(); ch <- result{e, err} }()
	select {
	case r := <-ch:
		if !r.exit.Lost {
			t.Errorf("exit = %+v (%v), want lost: the Sandbox asked for a Service", r.exit, r.err)
		}
		t.Logf("ended: %+v %v", r.exit, r.err)
	case <-time.After(2*sandboxRecheck + 5*time.Second):
		t.Fatalf("the dispatch runs on %v after its Sandbox's service was turned on", 2*sandboxRecheck+5*time.Second)
	}
}
