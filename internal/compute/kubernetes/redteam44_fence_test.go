package kubernetes

import (
	"errors"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/fence"
)

// closedFence sets this process's leader fence shut (a supervisor, standby or serve whose
// leader lost its lease) for the rest of the test; the returned function opens it again.
func closedFence(t *testing.T) (fenceErr error, open func()) {
	t.Helper()
	fenceErr = errors.New("leader fence /home/leader.fence: closed: leadership ended; refusing to commit")
	restore := fence.Set(func() error { return fenceErr })
	var done bool
	open = func() {
		if !done {
			done = true
			restore()
		}
	}
	t.Cleanup(open)
	return fenceErr, open
}

// A terminal dispatch's leftovers (Sweep, at a serve's start) and a stale policy are not
// deleted by a fenced process either, nor is a task cancelled: Cancel's cancelled mark alone
// would turn the end of a dispatch the new leader adopted into a cancel. Without the fence,
// Cancel marks and deletes the Job, Sweep deletes the policy and Secret, deletePolicy and
// deleteParts delete theirs.
func TestRedTeam44_FencedCancelAndSweepDeleteNothing(t *testing.T) {
	p, cs := testProvider(t, &fakeExporter{})
	ctx := t.Context()
	const id = "01JABCDEFGHJKMNPQRSTVWXYZ0"
	name := objectName(id)
	job, err := cs.BatchV1().Jobs(p.ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns, Labels: labels(id)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	np, err := cs.NetworkingV1().NetworkPolicies(p.ns).Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns, Labels: labels(id)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec, err := cs.CoreV1().Secrets(p.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns, Labels: labels(id)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fenceErr, _ := closedFence(t)

	if err := p.Cancel(ctx, taskIDPrefix+p.ns+"/"+name); !errors.Is(err, fenceErr) {
		t.Errorf("a fenced Cancel: %v, want the fence's refusal", err)
	}
	if _, err := p.Sweep(ctx, func(string) bool { return true }); !errors.Is(err, fenceErr) {
		t.Errorf("a fenced Sweep: %v, want the fence's refusal", err)
	}
	p.deletePolicy(name, np.UID)
	if err := p.deleteParts(name, np.UID, sec.UID); !errors.Is(err, fenceErr) {
		t.Errorf("fenced deleteParts: %v, want the fence's refusal", err)
	}
	got, err := cs.BatchV1().Jobs(p.ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err != nil:
		t.Errorf("the Job went to a fenced process: %v", err)
	case got.UID != job.UID || got.Annotations[annotationCancelled] != "":
		t.Errorf("the Job was marked cancelled by a fenced process: %v", got.Annotations)
	}
	if _, err := cs.NetworkingV1().NetworkPolicies(p.ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("the NetworkPolicy went to a fenced process: %v", err)
	}
	if _, err := cs.CoreV1().Secrets(p.ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Errorf("the Secret went to a fenced process: %v", err)
	}
}

// A warm pool's name hashes the home (PoolName), which is the same on every replica, so the
// new leader runs the very pool (template, warm pool, policy) the old leader made; the old
// serve's close (PoolKeeper.Close -> Pool.Delete) would delete it under the new leader. The
// agent-sandbox deletes (a Sandbox at its end, a pool pod's claim) are the adopted
// dispatch's own. Under a closed fence each refuses before it asks the cluster (the fake
// knows no agent-sandbox CRDs: without the fence Pool.Delete reaches a nil client, and the
// Sandbox and claim deletes answer nil on the fake's 404).
func TestRedTeam44_FencedPoolAndSandboxDeletesRefused(t *testing.T) {
	p, _ := testProvider(t, &fakeExporter{})
	fenceErr, _ := closedFence(t)
	pl := &Pool{p: p, Name: poolPrefix + "0123456789abcdef", tmplUID: "uid-pool"}
	if err := pl.Delete(t.Context()); !errors.Is(err, fenceErr) {
		t.Errorf("a fenced pool close: %v, want the fence's refusal", err)
	}
	if err := p.deleteSandboxAs("agora-x", "uid-x", metav1.DeletePropagationForeground); !errors.Is(err, fenceErr) {
		t.Errorf("a fenced Sandbox delete: %v, want the fence's refusal", err)
	}
	if err := p.deleteClaimAs("agora-x", "uid-x", metav1.DeletePropagationForeground); !errors.Is(err, fenceErr) {
		t.Errorf("a fenced claim delete: %v, want the fence's refusal", err)
	}
	if swept, err := p.sweepPoolPolicy(t.Context(), &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: pl.Name, UID: "uid-np"}}); swept || !errors.Is(err, fenceErr) {
		t.Errorf("a fenced pool policy sweep: swept %v, %v; want the fence's refusal", swept, err)
	}
}
