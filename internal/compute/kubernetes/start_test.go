package kubernetes

import (
	"context"
	"errors"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/agora-dev/agora/internal/compute"
)

// These tests run Start against client-go's fake clientset (the API boundary); the same
// behaviour against a real API server is in cluster_test.go.

func TestStart_CreatesInOrder(t *testing.T) {
	exp := &fakeExporter{}
	p, cs := testProvider(t, exp)
	ctx, cancel := context.WithCancel(t.Context())
	s := testSpec("01JABCDEFGHJKMNPQRSTVWXYZ0")
	h, err := p.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range cs.Actions() {
		if a.GetVerb() == "create" || a.GetVerb() == "patch" {
			got = append(got, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	want := "create networkpolicies,create secrets,create jobs,patch secrets,patch networkpolicies"
	if strings.Join(got, ",") != want {
		t.Errorf("actions = %v, want %s", got, want)
	}
	if h.TaskID() != "k8s:agents/agora-01jabcdefghjkmnpqrstvwxyz0" {
		t.Errorf("task id = %q", h.TaskID())
	}
	sec, err := cs.CoreV1().Secrets("agents").Get(ctx, "agora-01jabcdefghjkmnpqrstvwxyz0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].Kind != "Job" || string(sec.Data[secretToken]) != exp.allTokens()[0] {
		t.Errorf("secret owners %+v, token stored %v", sec.OwnerReferences, string(sec.Data[secretToken]) == exp.allTokens()[0])
	}
	cancel()
	exit, err := h.Wait()
	if err != nil || !exit.Cancelled || exit.Lost {
		t.Errorf("Wait after the start context ended = %+v, %v; want Cancelled", exit, err)
	}
	if n := exp.openSessions(); n != 0 {
		t.Errorf("%d gateway sessions left open", n)
	}
	if _, err := cs.BatchV1().Jobs("agents").Get(t.Context(), "agora-01jabcdefghjkmnpqrstvwxyz0", metav1.GetOptions{}); err == nil {
		t.Error("the job survived its cancelled start context")
	}
}

func TestStart_AdoptsNeverTwice(t *testing.T) {
	exp := &fakeExporter{}
	p, cs := testProvider(t, exp)
	s := testSpec("01JADOPT")
	if _, err := p.Start(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	// A restarted supervisor starts the same dispatch again.
	h2, err := p.Start(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	creates := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "jobs" {
			creates++
		}
	}
	if creates != 1 || exp.exports != 1 {
		t.Errorf("%d job creates and %d exports, want 1 each (the second Start adopts; a second export would revoke the pod's token)", creates, exp.exports)
	}
	if h2.TaskID() != "k8s:agents/agora-01jadopt" {
		t.Errorf("adopted task id = %q", h2.TaskID())
	}
}

func TestStart_RefusesForeignJob(t *testing.T) {
	p, cs := testProvider(t, &fakeExporter{})
	foreign := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "agora-01jforeign", Namespace: "agents",
		Labels: map[string]string{labelManagedBy: managedBy, labelDispatch: "SOMEONE-ELSE"}}}
	if _, err := cs.BatchV1().Jobs("agents").Create(t.Context(), foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := p.Start(t.Context(), testSpec("01JFOREIGN"))
	if err == nil || !strings.Contains(err.Error(), "not agora's for this dispatch") {
		t.Errorf("Start over a foreign job = %v", err)
	}
}

func TestStart_FailedJobCreateCleansUp(t *testing.T) {
	exp := &fakeExporter{}
	p, cs := testProvider(t, exp)
	cs.PrependReactor("create", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("admission webhook said no")
	})
	_, err := p.Start(t.Context(), testSpec("01JFAIL"))
	if err == nil || !strings.Contains(err.Error(), "admission webhook said no") {
		t.Fatalf("Start = %v", err)
	}
	if n := exp.openSessions(); n != 0 {
		t.Errorf("%d sessions left open", n)
	}
	if l, _ := cs.CoreV1().Secrets("agents").List(t.Context(), metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("secret left behind")
	}
	if l, _ := cs.NetworkingV1().NetworkPolicies("agents").List(t.Context(), metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("network policy left behind")
	}
}

func TestStart_RefusesSpecs(t *testing.T) {
	p, _ := testProvider(t, &fakeExporter{})
	for _, c := range []struct {
		name string
		edit func(s *compute.Spec)
	}{
		{"sandbox none", func(s *compute.Spec) { s.Sandbox = "none" }},
		{"host network", func(s *compute.Spec) { s.Network = true }},
		{"bad id", func(s *compute.Spec) { s.ID = "a/b" }},
		{"empty argv", func(s *compute.Spec) { s.Argv = nil }},
		{"provider's env", func(s *compute.Spec) { s.Env = append(s.Env, "AGORA_GATEWAY_TOKEN=x") }},
	} {
		s := testSpec("01JREFUSE")
		c.edit(&s)
		if _, err := p.Start(t.Context(), s); err == nil {
			t.Errorf("%s: Start accepted", c.name)
		}
	}
}

func TestCancel_RefusesUnlabelled(t *testing.T) {
	p, cs := testProvider(t, &fakeExporter{})
	other := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "payroll", Namespace: "agents"}}
	if _, err := cs.BatchV1().Jobs("agents").Create(t.Context(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := p.Cancel(t.Context(), "k8s:agents/payroll"); err == nil {
		t.Error("Cancel deleted a job without agora's labels")
	}
	if _, err := cs.BatchV1().Jobs("agents").Get(t.Context(), "payroll", metav1.GetOptions{}); err != nil {
		t.Errorf("the foreign job is gone: %v", err)
	}
	if err := p.Cancel(t.Context(), "k8s:other/payroll"); err == nil {
		t.Error("Cancel accepted another namespace")
	}
	if err := p.Cancel(t.Context(), "k8s:agents/agora-gone"); err != nil {
		t.Errorf("Cancel of a job already gone = %v, want nil", err)
	}
}
