package kubernetes

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/k8stest"
)

// warmSandboxProviders are two providers of one `backend: agent-sandbox` target on the shared
// cluster with agent-sandbox's real controller, exporting to g's registry: as agora's
// ServiceAccount under the documented Role (examples/kubernetes/rbac.yaml), and as the admin
// (for what the test itself reads: the slot's Secret, as its pod's secretKeyRef does).
func warmSandboxProviders(t testing.TB, g *slotGW) (role, admin *Provider) {
	t.Helper()
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
	o := testOptions(t, g.reg)
	o.Namespace, o.Backend = c.Namespace, BackendAgentSandbox
	o.Kubeconfig = c.Kubeconfig
	if admin, err = New(o); err != nil {
		t.Fatal(err)
	}
	o.Kubeconfig = kubeconfig
	if role, err = New(o); err != nil {
		t.Fatal(err)
	}
	nodeSchedulable(t, admin)
	return role, admin
}

// sandboxesOf lists the namespace's Sandboxes that are agora's for any of ids (named
// agora-<id> or labelled agora.dispatch=<id>).
func sandboxesOf(t *testing.T, p *Provider, ids ...string) []string {
	t.Helper()
	l, err := p.client.AgentsV1beta1().Sandboxes(p.ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, sb := range l.Items {
		for _, id := range ids {
			if sb.Name == objectName(id) || sb.Labels[labelDispatch] == id {
				out = append(out, sb.Name)
			}
		}
	}
	return out
}

// TestAgentSandboxBackend_WarmSlot is `warm: N` on a `backend: agent-sandbox` target,
// on the real control plane with kwok and agent-sandbox's real controller, every provider
// action as agora's ServiceAccount under the documented Role. As providers-k8s.md says: the
// target's cold dispatch runs in a Sandbox (no Job); its warm slot is a Job of the Job backend
// (no Sandbox, no SandboxWarmPool); a dispatch claims the slot over the real gateway (the
// test plays the slot pod's worker with the token its Secret holds), its task id names the
// slot's Job, describe through the agent-sandbox provider finds that Job, it ends as the cold
// one did (code 0, the same isolation) and no Sandbox is ever made for it; the slot is used
// once (a second Run is refused, the slot token replayed is refused); a second claimed slot is
// cancelled through a fresh agent-sandbox provider (another supervisor), which finds its Job
// although the backend's kind is the Sandbox.
func TestAgentSandboxBackend_WarmSlot(t *testing.T) {
	g := startSlotGW(t)
	p, admin := warmSandboxProviders(t, g)
	// kwok ends the pods with code 0 after 10 s of running: the cold one's, and the slot's
	// (10 s from its start, time for the claim: the slot stage yields to kwok's chaos label).
	p.testOnlyPodMeta = failWith(0, "10s")

	coldID := clusterID("SBWCOLD")
	cold, err := p.Start(t.Context(), warmSpec(t, coldID))
	if err != nil {
		t.Fatalf("cold start: %v", err)
	}
	if got := sandboxesOf(t, admin, coldID); len(got) != 1 {
		t.Errorf("the cold dispatch's Sandboxes: %v, want its one", got)
	}
	if _, err := admin.client.BatchV1().Jobs(p.ns).Get(t.Context(), objectName(coldID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Job exists for the cold agent-sandbox dispatch: %v", err)
	}
	coldExit := make(chan compute.Exit, 1)
	go func() { coldExit <- waitTimeout(t, cold, 3*time.Minute) }()

	sl, gs := startSlot(t, p, g)
	if got := sandboxesOf(t, admin, sl.ID); len(got) != 0 {
		t.Errorf("the warm slot made Sandboxes %v; it is a Job of the Job backend", got)
	}
	job, err := admin.client.BatchV1().Jobs(p.ns).Get(t.Context(), sl.name, metav1.GetOptions{})
	if err != nil || job.Labels[labelSlot] != sl.ID {
		t.Fatalf("the warm slot's Job %s: %v, labels %v", sl.name, err, job.Labels)
	}

	warmID := clusterID("SBWARM")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got := workerClaims(ctx, g, gs.ID, podToken(t, admin, sl))
	h, err := sl.Run(ctx, warmSpec(t, warmID), gs.Bind)
	if err != nil {
		t.Fatalf("Run in the slot of an agent-sandbox target: %v", err)
	}
	if d := <-got; d != warmID {
		t.Fatalf("the slot's worker was handed %q, want %q", d, warmID)
	}
	if h.TaskID() != formatTaskID(p.ns, sl.name) {
		t.Errorf("warm task id %q, want the slot's Job %q", h.TaskID(), formatTaskID(p.ns, sl.name))
	}
	if job, err = admin.client.BatchV1().Jobs(p.ns).Get(t.Context(), sl.name, metav1.GetOptions{}); err != nil || job.Annotations[annotationClaimed] != warmID {
		t.Errorf("the slot's Job after the claim: %v, annotations %v", err, job.Annotations)
	}
	if d, err := p.Describe(t.Context(), h.TaskID()); err != nil || d.Gone || d.Object != sl.name {
		t.Errorf("describe of the warm dispatch through the agent-sandbox provider = %+v, %v; want its slot's Job", d, err)
	}
	// Used once: the slot's token replayed opens nothing; a second Run is refused untouched.
	rctx, rcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer rcancel()
	if d := <-workerClaims(rctx, g, gs.ID, gs.Token); !strings.HasPrefix(d, "refused: ") {
		t.Errorf("the slot's token replayed after its claim was handed %q", d)
	}
	if _, err := sl.Run(ctx, warmSpec(t, clusterID("SBWAGAIN")), gs.Bind); !errors.Is(err, ErrSlotChanged) {
		t.Errorf("a second Run of the slot = %v, want ErrSlotChanged", err)
	}

	warm, cexit := waitTimeout(t, h, 3*time.Minute), <-coldExit
	if cexit.Code != 0 || cexit.Lost || cexit.Cancelled || cexit.TimedOut {
		t.Errorf("cold exit = %+v, want code 0", cexit)
	}
	if warm.Code != 0 || warm.Lost || warm.Cancelled || warm.TimedOut {
		t.Errorf("warm exit = %+v, want code 0", warm)
	}
	if warm.Isolation != cexit.Isolation || warm.Isolation != "kubernetes+restricted+readonly+nonroot+netpol" {
		t.Errorf("isolation: cold %q, warm %q", cexit.Isolation, warm.Isolation)
	}
	if got := sandboxesOf(t, admin, warmID, sl.ID); len(got) != 0 {
		t.Errorf("Sandboxes made for the warm dispatch: %v", got)
	}

	// A second slot, claimed, cancelled by another supervisor's agent-sandbox provider.
	p.testOnlyPodMeta = failWith(1, "1h")
	sl2, gs2 := startSlot(t, p, g)
	id2 := clusterID("SBWCANCEL")
	got2 := workerClaims(ctx, g, gs2.ID, podToken(t, admin, sl2))
	h2, err := sl2.Run(ctx, warmSpec(t, id2), gs2.Bind)
	if err != nil {
		t.Fatal(err)
	}
	<-got2
	other, err := New(p.opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Cancel(t.Context(), h2.TaskID()); err != nil {
		t.Fatalf("cancel of a warm dispatch through an agent-sandbox provider: %v", err)
	}
	if exit := waitTimeout(t, h2, 3*time.Minute); !exit.Cancelled {
		t.Errorf("cancelled warm exit = %+v, want Cancelled", exit)
	}
	waitGone(t, "slot job", func() error {
		_, err := admin.client.BatchV1().Jobs(p.ns).Get(t.Context(), sl2.name, metav1.GetOptions{})
		return err
	})
	if got := sandboxesOf(t, admin, id2, sl2.ID); len(got) != 0 {
		t.Errorf("Sandboxes made for the cancelled warm dispatch: %v", got)
	}
}
