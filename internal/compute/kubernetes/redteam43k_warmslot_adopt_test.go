package kubernetes

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/agora-dev/agora/internal/agoratest"
)

// Provider.AdoptSlot (a warm slot's dispatch adopted after its supervisor died)
// attacked where TestWarmSlot_AdoptAfterSupervisorKilled does not.

// poll asks f (an apiserver's answer) until it says done, or fails the test after d.
func poll(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	agoratest.Eventually(t, d, what, func() error {
		if !f() {
			return errors.New("not yet")
		}
		return nil
	})
}

// jobFailed reports whether the Job has a true Failed condition, and its reason.
func jobFailed(job *batchv1.Job) (string, bool) {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return c.Reason, true
		}
	}
	return "", false
}

// The attack: after the adoption checked the claimed pod, the Job is given a backoffLimit
// (anyone who may patch Jobs may) and its claimed pod is deleted: the Job controller makes
// another pod from the slot's template, which never took the dispatch's grant (the slot's
// token died with the claim) and ends with code 0. The adopted handle must not read that
// pod's end as the dispatch's: the dispatch's own pod is gone, so it is lost, never a success.
func TestRedTeam43K_AdoptedSlotNeverReadsAReplacementPod(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	const timeout = 5 * time.Minute
	id := clusterID("RT43KREPL")
	started := time.Now()
	// kwok ends every pod of the slot's template with code 0, 20-40 s after it runs.
	slot := killedSlotClaimer(t, p, g, id, "20s", timeout)
	name := objectName(slot)
	t.Cleanup(func() { dropJob(p, name) })
	jobs := p.client.BatchV1().Jobs(p.ns)
	job, err := jobs.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claimedPod := types.UID(job.Annotations[annotationClaimedPod])

	s := warmSpec(t, id)
	s.Limits.Timeout = timeout
	h, err := p.AdoptSlot(t.Context(), s, SlotAdoption{TaskID: formatTaskID(p.ns, name), Home: testHome, Started: started})
	if err != nil || h == nil {
		t.Fatalf("AdoptSlot = %v, %v; want the slot's Job followed", h, err)
	}
	// Now, past AdoptSlot's checks: the Job may make another pod, and the claimed one goes.
	if _, err := jobs.Patch(t.Context(), name, types.MergePatchType, []byte(`{"spec":{"backoffLimit":3}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("raise the slot Job's backoffLimit: %v", err)
	}
	pods := p.client.CoreV1().Pods(p.ns)
	l, err := pods.List(t.Context(), metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + string(job.UID)})
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range l.Items {
		if pod.UID == claimedPod {
			if err := pods.Delete(t.Context(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptrTo(int64(0))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The Job's controller makes a replacement, unless the adopted handle, which saw its
	// claimed pod go, deletes the Job first: either way the handle must not read
	// a replacement's end.
	poll(t, 90*time.Second, "a replacement pod of the slot's Job, or the Job deleted", func() bool {
		if j, err := jobs.Get(t.Context(), name, metav1.GetOptions{}); apierrors.IsNotFound(err) || err == nil && j.DeletionTimestamp != nil {
			return true
		}
		l, err := pods.List(t.Context(), metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + string(job.UID)})
		if err != nil {
			return false
		}
		for _, pod := range l.Items {
			if pod.UID != claimedPod {
				return true
			}
		}
		return false
	})
	exit := waitTimeout(t, h, 4*time.Minute)
	if !exit.Lost || exit.Code == 0 {
		t.Errorf("adopted exit = %+v after the claimed pod was replaced; want lost (the replacement never ran the dispatch)", exit)
	}
}

// An adoption after the slot's Job ended: the recorded outcome is the Job's own (the pod's
// code 3; a deadline passed: timed out), never lost nor a success by default. Once the session
// is revoked (the adopter's handle closed it; a Reap would), a later adoption is refused: the
// gateway session is never handed back for a pod that no longer holds it.
func TestRedTeam43K_AdoptAfterSlotJobEnded(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	jobs := p.client.BatchV1().Jobs(p.ns)

	const timeout = 3 * time.Minute
	failedID := clusterID("RT43KFAIL")
	failedStart := time.Now()
	failedSlot := killedSlotClaimerCode(t, p, g, failedID, "10s", 3, timeout)
	failedName := objectName(failedSlot)
	t.Cleanup(func() { dropJob(p, failedName) })

	const short = 15 * time.Second
	lateID := clusterID("RT43KLATE")
	lateStart := time.Now()
	lateSlot := killedSlotClaimer(t, p, g, lateID, "1h", short)
	lateName := objectName(lateSlot)
	t.Cleanup(func() { dropJob(p, lateName) })

	for _, n := range []string{failedName, lateName} {
		poll(t, 3*time.Minute, "job "+n+" failed", func() bool {
			job, err := jobs.Get(t.Context(), n, metav1.GetOptions{})
			_, failed := jobFailed(job)
			return err == nil && failed
		})
	}

	s := warmSpec(t, failedID)
	s.Limits.Timeout = timeout
	a := SlotAdoption{TaskID: formatTaskID(p.ns, failedName), Home: testHome, Started: failedStart}
	h, err := p.AdoptSlot(t.Context(), s, a)
	if err != nil || h == nil {
		t.Fatalf("AdoptSlot of an ended slot Job = %v, %v; want it followed to its recorded end", h, err)
	}
	if exit := waitTimeout(t, h, time.Minute); exit.Code != 3 || exit.Lost || exit.TimedOut {
		t.Errorf("adopted exit of a slot Job whose pod ended 3 = %+v, want code 3", exit)
	}
	// The session is gone now (the adopted handle closed it): revoked, as a Reap revokes it.
	if err := g.reg.Revoke(t.Context(), failedID); err != nil {
		t.Fatal(err)
	}
	h, err = p.AdoptSlot(t.Context(), s, a)
	refused(t, "a slot whose dispatch's session was revoked", h, err, "re-attach")

	sl := warmSpec(t, lateID)
	sl.Limits.Timeout = short
	h, err = p.AdoptSlot(t.Context(), sl, SlotAdoption{TaskID: formatTaskID(p.ns, lateName), Home: testHome, Started: lateStart})
	if err != nil || h == nil {
		t.Fatalf("AdoptSlot of a slot Job past its deadline = %v, %v; want it followed to its recorded end", h, err)
	}
	if exit := waitTimeout(t, h, time.Minute); !exit.TimedOut || exit.Code == 0 || exit.Lost {
		t.Errorf("adopted exit of a slot Job past its deadline = %+v, want timed out", exit)
	}
}

// Cancelling an adopted slot's dispatch deletes that slot's Job and Secret only: another
// slot of the home stands. Before the cancel, a sweep of the home (the adopted slot no longer
// live at the gateway) leaves the adopted, claimed Job: it is never swept nor claimed again.
func TestRedTeam43K_CancelAdoptedSlotDeletesOnlyItsJob(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	const timeout = 3 * time.Minute
	id := clusterID("RT43KCANCEL")
	started := time.Now()
	slot := killedSlotClaimer(t, p, g, id, "1h", timeout)
	name := objectName(slot)
	t.Cleanup(func() { dropJob(p, name) })
	idle, _ := startSlot(t, p, g)
	jobs := p.client.BatchV1().Jobs(p.ns)
	job, err := jobs.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	s := warmSpec(t, id)
	s.Limits.Timeout = timeout
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	h, err := p.AdoptSlot(ctx, s, SlotAdoption{TaskID: formatTaskID(p.ns, name), Home: testHome, Started: started})
	if err != nil || h == nil {
		t.Fatalf("AdoptSlot = %v, %v", h, err)
	}
	swept, err := p.SweepSlots(t.Context(), testHome, func(id string) bool { return id == idle.ID })
	if err != nil {
		t.Fatal(err)
	}
	for _, sw := range swept {
		if sw == slot || sw == idle.ID {
			t.Errorf("a sweep deleted slot %s (adopted %s, live %s)", sw, slot, idle.ID)
		}
	}
	cancel()
	exit := waitTimeout(t, h, 3*time.Minute)
	if !exit.Cancelled || exit.Code == 0 {
		t.Errorf("cancelled adopted exit = %+v, want cancelled", exit)
	}
	if j, err := jobs.Get(t.Context(), name, metav1.GetOptions{}); err == nil && j.UID == job.UID {
		t.Errorf("the cancelled adopted slot's Job stands")
	}
	if _, err := p.client.CoreV1().Secrets(p.ns).Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the cancelled adopted slot's Secret stands: %v", err)
	}
	if _, err := jobs.Get(t.Context(), idle.name, metav1.GetOptions{}); err != nil {
		t.Errorf("another slot's Job went with the cancel: %v", err)
	}
	if _, err := p.client.CoreV1().Secrets(p.ns).Get(t.Context(), idle.name, metav1.GetOptions{}); err != nil {
		t.Errorf("another slot's Secret went with the cancel: %v", err)
	}
	if err := idle.Check(t.Context()); err != nil {
		t.Errorf("another slot no longer checks after the cancel: %v", err)
	}
}

// Task ids that are not a slot Job of the target's namespace: odd characters, huge, path
// tricks naming another namespace or a subresource. Each is refused (or nil, nil) without a
// single request to the API server.
func TestRedTeam43K_AdoptSlotOddTaskIDs(t *testing.T) {
	cs := fake.NewClientset()
	var calls []string
	cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls = append(calls, a.GetVerb()+" "+a.GetResource().Resource+" "+a.GetNamespace())
		return true, nil, errors.New("no request expected")
	})
	p, err := newProvider(testOptions(t, &fakeExporter{}), clientsetAPI(cs))
	if err != nil {
		t.Fatal(err)
	}
	slot := "s" + strings.Repeat("ab", 16)
	name := objectName(slot)
	s := testSpec("01JRT43KODD")
	for _, tid := range []string{
		"",
		"k8s:",
		"k8s:agents/",
		"k8s:/" + name,
		"k8s:agents/" + name + "/status",
		"k8s:agents/../kube-system/" + name,
		"k8s:kube-system/" + name,
		"k8s:agents/" + strings.ToUpper(name),
		"k8s:agents/" + name + "\x00",
		"k8s:agents/" + name + "\n",
		"k8s:agents/agora-s" + strings.Repeat("a", 1<<20),
		"k8s:agents/agora-" + strings.Repeat("é", 16),
		"k8s:agents/" + name + "?labelSelector=x",
		"k8s:agents/" + name + "%2f..",
		"k8s:agents/agora-s" + strings.Repeat("g", 32), // not hex: no slot id
		"k8s:agents/agora-" + strings.Repeat("ab", 16), // no "s"
		"local:" + name,
		" k8s:agents/" + name,
	} {
		h, err := p.AdoptSlot(t.Context(), s, SlotAdoption{TaskID: tid, Home: testHome})
		if h != nil {
			go h.Wait()
			t.Errorf("AdoptSlot of task id %.80q followed something", tid)
		}
		_ = err
	}
	if len(calls) != 0 {
		t.Errorf("odd task ids reached the API server: %v", calls)
	}
}
