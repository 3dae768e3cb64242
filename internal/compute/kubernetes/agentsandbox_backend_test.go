package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/k8stest"
)

// These tests run `backend: agent-sandbox` against agent-sandbox's real controller and CRDs in
// the shared control plane with kwok (which runs no process: exit codes come from its stages).

func sandboxProvider(t testing.TB, exp *fakeExporter) *Provider {
	t.Helper()
	c := k8stest.Shared(t, k8stest.Options{AgentSandbox: true})
	o := testOptions(t, exp)
	o.Kubeconfig, o.Namespace, o.Backend = c.Kubeconfig, c.Namespace, BackendAgentSandbox
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	nodeSchedulable(t, p)
	return p
}

// TestAgentSandboxBackend_RunsToCompletion: one dispatch, one Sandbox holding the Job's pod
// spec, no Job, no Service; the token in the Secret alone; the policy and Secret owned by the
// Sandbox; everything gone once Wait returns.
func TestAgentSandboxBackend_RunsToCompletion(t *testing.T) {
	exp := &fakeExporter{}
	p := sandboxProvider(t, exp)
	p.testOnlyPodMeta = failWith(0, "2s")
	id := clusterID("SB")
	name := objectName(id)
	h, err := p.Start(t.Context(), testSpec(id))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := p.client.AgentsV1beta1().Sandboxes(p.ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Spec.Service == nil || *sb.Spec.Service {
		t.Errorf("sandbox spec.service = %v, want false (nothing may reach the pod)", sb.Spec.Service)
	}
	want := p.jobObject(jobInput{name: name, id: id, spec: testSpec(id), mounts: testMounts(), gateway: p.gateway})
	if got := sb.Spec.PodTemplate.Spec; got.SecurityContext == nil || *got.SecurityContext.RunAsUser != *want.Spec.Template.Spec.SecurityContext.RunAsUser ||
		got.ActiveDeadlineSeconds == nil || *got.ActiveDeadlineSeconds != 90 {
		t.Errorf("sandbox pod spec is not the Job's: security %+v, deadline %v", got.SecurityContext, got.ActiveDeadlineSeconds)
	}
	np, err := p.findPolicy(t.Context(), name)
	if err != nil || np == nil || len(np.OwnerReferences) != 1 || np.OwnerReferences[0].UID != sb.UID || np.OwnerReferences[0].Kind != "Sandbox" {
		t.Errorf("network policy = %+v, %v; want one owned by the sandbox", np, err)
	}
	waitPodPhase(t, p, id, corev1.PodRunning)
	pod, err := p.client.CoreV1().Pods(p.ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the sandbox's pod is not named after it: %v", err)
	}
	if c := metav1.GetControllerOf(pod); c == nil || c.UID != sb.UID {
		t.Errorf("pod controller = %+v, want the sandbox %s", c, sb.UID)
	}
	for what, obj := range map[string]any{"sandbox": sb, "pod": pod} {
		b, _ := json.Marshal(obj)
		for _, secret := range append(exp.allTokens(), "proxy-password-xyz") {
			if strings.Contains(string(b), secret) {
				t.Errorf("the %s holds a secret value", what)
			}
		}
	}
	exit := waitTimeout(t, h, 3*time.Minute)
	if exit.Code != 0 || exit.Lost || exit.Cancelled || exit.TimedOut {
		t.Errorf("exit = %+v, want code 0", exit)
	}
	if exit.Isolation != "kubernetes+restricted+readonly+nonroot+netpol" {
		t.Errorf("isolation = %q, want the Job backend's", exit.Isolation)
	}
	if n := exp.openSessions(); n != 0 {
		t.Errorf("%d gateway sessions open after Wait", n)
	}
	if _, err := p.client.BatchV1().Jobs(p.ns).Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Job exists for an agent-sandbox dispatch: %v", err)
	}
	waitGone(t, "sandbox", func() error {
		_, err := p.client.AgentsV1beta1().Sandboxes(p.ns).Get(t.Context(), name, metav1.GetOptions{})
		return err
	})
	waitGone(t, "secret", func() error {
		_, err := p.client.CoreV1().Secrets(p.ns).Get(t.Context(), name, metav1.GetOptions{})
		return err
	})
	waitGone(t, "network policy", func() error {
		_, err := p.client.NetworkingV1().NetworkPolicies(p.ns).Get(t.Context(), name, metav1.GetOptions{})
		return err
	})
}

// waitGone waits up to a minute for get to answer NotFound (the garbage collector takes
// dependents a moment after their owner).
func waitGone(t *testing.T, what string, get func() error) {
	t.Helper()
	if err := agoratest.Await(time.Minute, func() error {
		if err := get(); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	}); err != nil {
		t.Errorf("the dispatch's %s outlived its end: %v", what, err)
	}
}

func TestAgentSandboxBackend_ExitCode(t *testing.T) {
	p := sandboxProvider(t, &fakeExporter{})
	p.testOnlyPodMeta = failWith(3, "0s")
	h, err := p.Start(t.Context(), testSpec(clusterID("SBFAIL")))
	if err != nil {
		t.Fatal(err)
	}
	if exit := waitTimeout(t, h, 3*time.Minute); exit.Code != 3 || exit.Lost {
		t.Errorf("exit = %+v, want code 3", exit)
	}
}

// TestAgentSandboxBackend_CancelAndAdopt: a restarted supervisor adopts the Sandbox (one
// Sandbox, one pod), another process cancels it: both handles report Cancelled and nothing
// of the dispatch is left.
func TestAgentSandboxBackend_CancelAndAdopt(t *testing.T) {
	exp := &fakeExporter{}
	p := sandboxProvider(t, exp)
	p.testOnlyPodMeta = failWith(1, "1h")
	id := clusterID("SBCANCEL")
	h, err := p.Start(t.Context(), testSpec(id))
	if err != nil {
		t.Fatal(err)
	}
	waitPodPhase(t, p, id, corev1.PodRunning)
	other, err := New(p.opts)
	if err != nil {
		t.Fatal(err)
	}
	other.testOnlyPodMeta = p.testOnlyPodMeta // the same target's settings (checkSandbox wants its labels)
	h2, err := other.Start(t.Context(), testSpec(id))
	if err != nil {
		t.Fatal(err)
	}
	if h2.TaskID() != h.TaskID() || exp.exports != 1 {
		t.Errorf("adopting start: task %q (want %q), %d exports (want 1)", h2.TaskID(), h.TaskID(), exp.exports)
	}
	if err := other.Cancel(t.Context(), h.TaskID()); err != nil {
		t.Fatal(err)
	}
	if exit := waitTimeout(t, h, 3*time.Minute); !exit.Cancelled || exit.Lost {
		t.Errorf("exit = %+v, want Cancelled", exit)
	}
	if exit := waitTimeout(t, h2, 3*time.Minute); !exit.Cancelled || exit.Lost {
		t.Errorf("adopted exit = %+v, want Cancelled", exit)
	}
	pods, _ := p.client.CoreV1().Pods(p.ns).List(t.Context(), metav1.ListOptions{LabelSelector: labelDispatch + "=" + id})
	if len(pods.Items) != 0 {
		t.Errorf("%d pods left after a foreground cancel", len(pods.Items))
	}
	waitGone(t, "network policy", func() error {
		_, err := p.client.NetworkingV1().NetworkPolicies(p.ns).Get(t.Context(), objectName(id), metav1.GetOptions{})
		return err
	})
}

// TestAgentSandboxBackend_PodDeletedRunsNeverTwice is the attack on a Sandbox's one
// difference from a Job: its controller makes a new pod when the pod goes. A dispatch whose
// pod was deleted ends lost, and its Sandbox is deleted, so no second worker runs with the
// dispatch's token.
func TestAgentSandboxBackend_PodDeletedRunsNeverTwice(t *testing.T) {
	p := sandboxProvider(t, &fakeExporter{})
	p.testOnlyPodMeta = failWith(1, "1h")
	id := clusterID("SBDEL")
	name := objectName(id)
	h, err := p.Start(t.Context(), testSpec(id))
	if err != nil {
		t.Fatal(err)
	}
	// Deleted the moment it exists, before the handle can have looked at it: the
	// replacement must not pass for the first pod (under -race and load it did: the handle
	// pinned the replacement and followed it for the hour).
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		err := p.client.CoreV1().Pods(p.ns).Delete(t.Context(), name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0))})
		if err == nil {
			break
		}
		if !apierrors.IsNotFound(err) || time.Now().After(deadline) {
			t.Fatalf("delete the sandbox's pod: %v", err)
		}
	}
	if exit := waitTimeout(t, h, 3*time.Minute); !exit.Lost || exit.Cancelled || exit.Code == 0 {
		t.Errorf("exit = %+v, want Lost", exit)
	}
	waitGone(t, "sandbox", func() error {
		_, err := p.client.AgentsV1beta1().Sandboxes(p.ns).Get(t.Context(), name, metav1.GetOptions{})
		return err
	})
	waitGone(t, "replacement pod", func() error {
		_, err := p.client.CoreV1().Pods(p.ns).Get(t.Context(), name, metav1.GetOptions{})
		return err
	})
}

// TestAgentSandboxBackend_AdoptRefusesWeakened: someone who may patch Sandboxes turns on the
// controller's Service for a running dispatch; a restarted supervisor's Start refuses to
// adopt that Sandbox, saying why, rather than follow it as agora's.
func TestAgentSandboxBackend_AdoptRefusesWeakened(t *testing.T) {
	p := sandboxProvider(t, &fakeExporter{})
	p.testOnlyPodMeta = failWith(1, "1h")
	id := clusterID("SBWEAK")
	name := objectName(id)
	ctx, cancel := context.WithCancel(t.Context())
	h, err := p.Start(ctx, testSpec(id))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.client.AgentsV1beta1().Sandboxes(p.ns).Patch(t.Context(), name, types.MergePatchType,
		[]byte(`{"spec":{"service":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	other, err := New(p.opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Start(t.Context(), testSpec(id)); err == nil || !strings.Contains(err.Error(), "would weaken") {
		t.Errorf("Start of a weakened sandbox = %v, want a refusal to adopt", err)
	}
	cancel()
	// The first handle may end first on its own: it watches the Sandbox and stops a dispatch
	// whose Service was turned on, which under load can come before cancel (a whole-package
	// -race run at a load of 9-11 sees it). Either end is right.
	done := make(chan struct{})
	var exit compute.Exit
	var werr error
	go func() { exit, werr = h.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		t.Fatal("Wait did not return in 3m")
	}
	switch {
	case werr != nil && !strings.Contains(werr.Error(), "spec.service was turned on"):
		t.Errorf("Wait: %v, want Cancelled or stopped for the Service", werr)
	case werr == nil && !exit.Cancelled:
		t.Errorf("exit = %+v, want Cancelled", exit)
	}
}

// TestProbeAgentSandbox: the shared cluster without agent-sandbox answers ErrNoSandboxCRD
// (doctor names the CRD); the one with it answers how many of agora's Sandboxes are there.
func TestProbeAgentSandbox(t *testing.T) {
	plain := k8stest.Shared(t, k8stest.Options{})
	if _, err := ProbeAgentSandbox(t.Context(), plain.Kubeconfig, "", plain.Namespace); !errors.Is(err, ErrNoSandboxCRD) || !strings.Contains(err.Error(), SandboxCRD) {
		t.Errorf("probe without the CRDs = %v, want ErrNoSandboxCRD naming %s", err, SandboxCRD)
	}
	as := k8stest.Shared(t, k8stest.Options{AgentSandbox: true})
	if n, err := ProbeAgentSandbox(t.Context(), as.Kubeconfig, "", as.Namespace); err != nil || n < 0 {
		t.Errorf("probe with the CRDs = %d, %v", n, err)
	}
}

// TestAgentSandboxBackend_SwitchedBackendAdoptsNotReplaces is the attack of an operator's
// edit: a target's backend changes from jobs to agent-sandbox (and back) while dispatches run,
// and serve restarts. The restarted Start must adopt the running dispatch's object of the old
// kind, never judge its NetworkPolicy stale (it is owned, and the new kind's object is not
// there), delete it while the pod runs and start the dispatch a second time; a cancel through
// the new backend must stop the old kind's pod.
func TestAgentSandboxBackend_SwitchedBackendAdoptsNotReplaces(t *testing.T) {
	for _, from := range []string{BackendJobs, BackendAgentSandbox} {
		t.Run("from "+from, func(t *testing.T) {
			exp := &fakeExporter{}
			p := sandboxProvider(t, exp)
			p.opts.Backend = from
			p.testOnlyPodMeta = failWith(1, "1h")
			id := clusterID("SBSW")
			name := objectName(id)
			h, err := p.Start(t.Context(), testSpec(id))
			if err != nil {
				t.Fatal(err)
			}
			waitPodPhase(t, p, id, corev1.PodRunning)
			np, err := p.findPolicy(t.Context(), name)
			if err != nil || np == nil {
				t.Fatalf("policy: %v, %v", np, err)
			}
			o := p.opts
			o.Backend = map[string]string{BackendJobs: BackendAgentSandbox, BackendAgentSandbox: BackendJobs}[from]
			switched, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			switched.testOnlyPodMeta = p.testOnlyPodMeta // the same target's settings (checkSandbox wants its labels)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			h2, err := switched.Start(ctx, testSpec(id))
			if err != nil {
				t.Fatalf("restarted start with the backend switched: %v", err)
			}
			if exp.exports != 1 {
				t.Errorf("%d exports: the dispatch was started again", exp.exports)
			}
			if again, err := p.findPolicy(t.Context(), name); err != nil || again == nil || again.UID != np.UID {
				t.Errorf("the running pod's network policy was replaced or deleted: %+v, %v", again, err)
			}
			pods, _ := p.client.CoreV1().Pods(p.ns).List(t.Context(), metav1.ListOptions{LabelSelector: labelDispatch + "=" + id})
			if len(pods.Items) != 1 {
				t.Errorf("%d pods of the dispatch, want its one", len(pods.Items))
			}
			if err := switched.Cancel(t.Context(), h2.TaskID()); err != nil {
				t.Fatal(err)
			}
			for i, h := range []compute.Handle{h, h2} {
				if exit := waitTimeout(t, h, 3*time.Minute); !exit.Cancelled {
					t.Errorf("handle %d: exit = %+v, want Cancelled", i, exit)
				}
			}
		})
	}
}

// TestAgentSandboxBackend_DocumentedRole: every action of the agent-sandbox backend (start,
// describe, adopt by a second provider, cancel, sweep) runs as agora's ServiceAccount under the
// Role docs/providers-k8s.md shows (examples/kubernetes/rbac.yaml), applied as people are told
// to, and nothing else.
func TestAgentSandboxBackend_DocumentedRole(t *testing.T) {
	c := k8stest.Shared(t, k8stest.Options{AgentSandbox: true})
	docs, err := os.ReadFile("../../../examples/kubernetes/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyYAML(t.Context(), []byte(strings.ReplaceAll(string(docs), "namespace: agents", "namespace: "+c.Namespace))); err != nil && !alreadyApplied(err) {
		// Another test of the shared cluster applied it (TestAgentSandboxBackend_*).
		t.Fatalf("apply the documented Role: %v", err)
	}
	kubeconfig, err := c.ServiceAccountKubeconfig(t.Context(), "agora")
	if err != nil {
		t.Fatal(err)
	}
	admin := sandboxProvider(t, &fakeExporter{})
	o := admin.opts
	o.Kubeconfig = kubeconfig
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	p.testOnlyPodMeta = failWith(1, "1h")
	id := clusterID("SBROLE")
	h, err := p.Start(t.Context(), testSpec(id))
	if err != nil {
		t.Fatalf("start under the documented Role: %v", err)
	}
	waitPodPhase(t, admin, id, corev1.PodRunning)
	if d, err := p.Describe(t.Context(), h.TaskID()); err != nil || d.Gone || d.Phase != string(corev1.PodRunning) {
		t.Errorf("describe under the documented Role = %+v, %v", d, err)
	}
	again, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	again.testOnlyPodMeta = p.testOnlyPodMeta // the same target's settings (checkSandbox wants its labels)
	h2, err := again.Start(t.Context(), testSpec(id))
	if err != nil {
		t.Fatalf("adopt under the documented Role: %v", err)
	}
	if err := again.Cancel(t.Context(), h2.TaskID()); err != nil {
		t.Fatalf("cancel under the documented Role: %v", err)
	}
	for _, h := range []compute.Handle{h, h2} {
		if exit := waitTimeout(t, h, 3*time.Minute); !exit.Cancelled {
			t.Errorf("exit = %+v, want Cancelled", exit)
		}
	}
	if _, err := p.Sweep(t.Context(), func(string) bool { return true }); err != nil {
		t.Errorf("sweep under the documented Role: %v", err)
	}
}
