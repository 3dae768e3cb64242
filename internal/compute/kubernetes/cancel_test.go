package kubernetes

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"
)

// TestCancel_PolicyOutlivesThePod: the NetworkPolicy is the Job's dependent, so a foreground
// deletion would remove it with the pod, before the pod has stopped. Cancel takes the policy
// out of the Job's dependents before it deletes the
// Job, and deletes the policy itself only once the Job (pods first) is gone.
func TestCancel_PolicyOutlivesThePod(t *testing.T) {
	p, cs := testProvider(t, &fakeExporter{})
	name := objectName("01JCANCELPOL")
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "agents", UID: "job-uid",
		Labels: map[string]string{labelManagedBy: managedBy, labelDispatch: "01JCANCELPOL"}}}
	if _, err := cs.BatchV1().Jobs("agents").Create(t.Context(), job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "agents", UID: "np-uid",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: "job-uid"}}}}
	if _, err := cs.NetworkingV1().NetworkPolicies("agents").Create(t.Context(), np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cs.ClearActions()
	if err := p.Cancel(t.Context(), "k8s:agents/"+name); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	orphaned, jobDeleted, policyDeleted := -1, -1, -1
	for i, a := range cs.Actions() {
		switch {
		case a.GetVerb() == "patch" && a.GetResource().Resource == "networkpolicies":
			orphaned = i
		case a.GetVerb() == "delete" && a.GetResource().Resource == "jobs":
			jobDeleted = i
		case a.GetVerb() == "delete" && a.GetResource().Resource == "networkpolicies":
			policyDeleted = i
			if d, ok := a.(k8stesting.DeleteActionImpl); ok && (d.DeleteOptions.Preconditions == nil || *d.DeleteOptions.Preconditions.UID != "np-uid") {
				t.Errorf("the policy was deleted without its uid as precondition: %+v", d.DeleteOptions)
			}
		}
	}
	if orphaned < 0 || jobDeleted < 0 || policyDeleted < 0 || orphaned > jobDeleted || policyDeleted < jobDeleted {
		t.Fatalf("actions: orphan policy at %d, delete job at %d, delete policy at %d; want orphan < job < policy", orphaned, jobDeleted, policyDeleted)
	}
	if _, err := cs.NetworkingV1().NetworkPolicies("agents").Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the policy is still there after the Job is gone: %v", err)
	}
}
