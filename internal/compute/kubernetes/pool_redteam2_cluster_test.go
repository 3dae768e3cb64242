package kubernetes

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/compute"
)

// Attacks on the pool's enrolment and claim binding on the real control
// plane with agent-sandbox's real controller, by someone who did not build them.

// Attack: someone who may create pods in the namespace (not agora) makes a pod that looks like
// a pool pod: the pool's labels, its ServiceAccount, the gateway's projected token, and an
// ownerReference naming a Sandbox the pool holds as its controller (the apiserver checks no
// ownerReference of a pod made without blockOwnerDeletion). Its kubelet-minted token is bound
// to it, so the TokenReview names it. It must not enrol: it is not the pod of that Sandbox
// (agent-sandbox names a Sandbox's pod after it). Before the fix it enrolled, once per such pod:
// a slot, a marker and a held file of the gateway's each, as many as the attacker made pods.
// The pool's real pod still enrols afterwards.
func TestAgentSandboxPool_AttackLookalikePodNeverEnrols(t *testing.T) {
	g, p, admin, cs := poolSetup(t)
	p.testOnlyPodMeta = failWith(0, "1h")
	pl, err := p.EnsurePool(t.Context(), poolSpec(t, "TEMPLATE", "lookalike"), PoolOptions{Home: testHome, Replicas: 1, Places: warmPlaces})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.Delete(context.Background()) })
	real := readyPoolPods(t, admin, pl.Name, 1, nil)[0]
	fake := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: real.Name + "-lookalike", Namespace: real.Namespace,
		Labels: real.Labels, Annotations: real.Annotations, OwnerReferences: real.OwnerReferences,
	}, Spec: *real.Spec.DeepCopy()}
	for i := range fake.OwnerReferences {
		fake.OwnerReferences[i].BlockOwnerDeletion = nil
	}
	made, err := admin.client.CoreV1().Pods(real.Namespace).Create(t.Context(), fake, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("make the lookalike pod: %v", err)
	}
	t.Cleanup(func() {
		admin.client.CoreV1().Pods(made.Namespace).Delete(context.Background(), made.Name, metav1.DeleteOptions{})
	})
	if ref, ok := controllerRef(made.OwnerReferences); !ok || ref.Kind != "Sandbox" || ref.Name != real.Name {
		t.Fatalf("the lookalike pod's controller is %+v, want the pool pod's Sandbox", ref)
	}
	if code := enrolCode(t, g, mintPodToken(t, cs, made, PoolAudience(testHome))); code != 401 {
		t.Errorf("a lookalike pod whose controller is a Sandbox of the pool enrolled: %d, want 401", code)
	}
	if code := enrolCode(t, g, mintPodToken(t, cs, &real, PoolAudience(testHome))); code != 200 {
		t.Errorf("the pool's own pod, after the lookalike: %d, want 200", code)
	}
}

// Attack (the audit): the claimed pod is bound, and before the dispatch's handle first looks
// at its Sandbox's pod, that pod is deleted (an eviction, anyone who may delete pods) and the
// controller makes the Sandbox a new one of the same name. agora bound the dispatch to the
// first pod's uid; the new one never ran it (on a real node its init step is refused
// enrolment: its Sandbox is the claim's). The dispatch must end Lost ("its pod was
// replaced"), as a cold Sandbox's does, never with the new pod's end as if it had run the
// agent. Before the fix the handle pinned whichever pod of the name it saw first, and here
// reported the new pod's code 0.
func TestAgentSandboxPool_AttackPodReplacedAfterBindIsLost(t *testing.T) {
	g, p, admin, cs := poolSetup(t)
	// kwok ends every pod of the pool, and a replacement, with code 0 20 s after it runs.
	p.testOnlyPodMeta = failWith(0, "20s")
	pl, err := p.EnsurePool(t.Context(), poolSpec(t, "TEMPLATE", "replaced"), PoolOptions{Home: testHome, Replicas: 1, Places: warmPlaces})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.Delete(context.Background()) })
	pods := enrolPods(t, g, cs, readyPoolPods(t, admin, pl.Name, 1, nil))
	id := clusterID("POOLREPLACED")
	var replaced *corev1.Pod
	bind := func(ctx context.Context, uid, dispatch, token string) error {
		if err := g.slots.BindPod(ctx, uid, dispatch, token); err != nil {
			return err
		}
		var name string
		for _, pp := range pods {
			if string(pp.pod.UID) == uid {
				name = pp.pod.Name
			}
		}
		if name == "" {
			t.Errorf("bound to pod uid %s, no pod of the pool's", uid)
			return nil
		}
		if err := admin.client.CoreV1().Pods(p.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0))}); err != nil {
			t.Errorf("delete the bound pod: %v", err)
			return nil
		}
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			pod, err := admin.client.CoreV1().Pods(p.ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil && string(pod.UID) != uid && pod.Status.Phase == corev1.PodRunning {
				replaced = pod
				return nil
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Errorf("the controller made no new running pod %s for the Sandbox in 1m", name)
		return nil
	}
	h, err := pl.Claim(t.Context(), poolSpec(t, id, "replaced"), bind)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if replaced == nil {
		t.Fatal("the bound pod was not replaced: the attack did not happen")
	}
	type res struct {
		exit compute.Exit
		err  error
	}
	ch := make(chan res, 1)
	go func() { e, err := h.Wait(); ch <- res{e, err} }()
	var r res
	select {
	case r = <-ch:
	case <-time.After(3 * time.Minute):
		t.Fatal("Wait did not return in 3m")
	}
	if !r.exit.Lost || r.exit.Code == 0 || r.err == nil || !strings.Contains(r.err.Error(), "its pod was replaced") {
		t.Errorf("a pool dispatch whose bound pod was replaced before its handle looked ended %+v, %v; want Lost, its pod replaced (the new pod %s never ran it)", r.exit, r.err, replaced.UID)
	}
	waitGone(t, "the claim of the dispatch that was lost", func() error {
		_, err := admin.client.ExtensionsV1beta1().SandboxClaims(p.ns).Get(t.Context(), objectName(id), metav1.GetOptions{})
		return err
	})
}

// Attack: someone who may delete and create pods in the namespace replaces a pool pod before
// it enrols: they delete it and, before the controller remakes it, make their own of the same
// name with the Sandbox as its controller, a copy of it but for an exec readiness probe (the
// kubelet runs the probe's command in the worker's container, beside the dispatch's session,
// every few seconds). The controller keeps it as the Sandbox's pod, it enrols (it is named after
// the Sandbox, its token is bound to it), and a claim is handed it. agora must refuse the claim
// (its containers are not its template's): before the fix it compared images, commands,
// environment, mounts, security and resources, but not probes, lifecycle hooks, working
// directory, envFrom or a container's restart policy, and bound the dispatch to it.
func TestAgentSandboxPool_AttackReplacedPodWithProbeNeverBound(t *testing.T) {
	g, p, admin, cs := poolSetup(t)
	p.testOnlyPodMeta = failWith(0, "1h")
	pl, err := p.EnsurePool(t.Context(), poolSpec(t, "TEMPLATE", "probe"), PoolOptions{Home: testHome, Replicas: 1, Places: warmPlaces})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.Delete(context.Background()) })
	real := readyPoolPods(t, admin, pl.Name, 1, nil)[0]
	pods := admin.client.CoreV1().Pods(real.Namespace)
	fake := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: real.Name, Namespace: real.Namespace,
		Labels: real.Labels, Annotations: real.Annotations, OwnerReferences: real.OwnerReferences}, Spec: *real.Spec.DeepCopy()}
	fake.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
		Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "cat /proc/*/environ >/dev/null"}}}}
	// The controller races the replacement: it may remake the pod first, or delete ours
	// before it runs (as under CI's load). The attack is only made once the controller keeps
	// ours running; a lost race is tried again, never counted as refused.
	var running *corev1.Pod
	for attempt := 0; attempt < 5 && running == nil; attempt++ {
		var ours *corev1.Pod
		for try := 0; try < 200 && ours == nil; try++ {
			cur, err := pods.Get(t.Context(), real.Name, metav1.GetOptions{})
			if err == nil {
				pods.Delete(t.Context(), real.Name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0)), Preconditions: &metav1.Preconditions{UID: &cur.UID}})
			}
			if made, err := pods.Create(t.Context(), fake.DeepCopy(), metav1.CreateOptions{}); err == nil {
				ours = made
			}
		}
		if ours == nil {
			continue
		}
		// Running as the Sandbox's pod (kwok runs it), for a while: the controller kept it.
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && running == nil; time.Sleep(50 * time.Millisecond) {
			pod, err := pods.Get(t.Context(), real.Name, metav1.GetOptions{})
			if err != nil || pod.UID != ours.UID {
				t.Logf("attempt %d: the controller did not keep the replacement pod (%v); again", attempt+1, err)
				break
			}
			if pod.Status.Phase == corev1.PodRunning {
				running = pod
			}
		}
	}
	if running == nil {
		t.Fatal("in 5 attempts the controller never kept a replacement pod running: the attack did not happen")
	}
	enrolled := enrolPods(t, g, cs, []corev1.Pod{*running})
	id := clusterID("POOLPROBE")
	h, err := pl.Claim(t.Context(), poolSpec(t, id, "probe"), g.slots.BindPod)
	if err == nil {
		p.Cancel(t.Context(), h.TaskID())
		select {
		case d := <-enrolled[string(running.UID)].got:
			t.Errorf("the replacement pod with an exec probe in the worker's container was handed dispatch %q", d)
		case <-time.After(5 * time.Second):
			t.Errorf("a claim of a pool whose only pod is a replacement with an exec probe was accepted")
		}
		return
	}
	if !strings.Contains(err.Error(), "containers are not its template's") {
		t.Errorf("the claim was refused, but not for the pod's containers: %v", err)
	}
}
