package kubernetes

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agora-dev/agora/internal/compute"
)

// A supervisor killed with -9 after it bound its dispatch to a pool pod: the pool, opened by
// another process, adopts the dispatch through its claim (no Job or Sandbox is named for it),
// follows the pod it was bound to with the gateway session taken back, ends with the pod's
// end (not lost), and deletes the claim. A dispatch with no claim is not adopted (nil), nor
// one whose Sandbox's pod is not the pod it was bound to.
func TestAgentSandboxPool_AdoptAfterSupervisorKilled(t *testing.T) {
	t.Parallel() // waits a minute on kwok: see "Parallel tests" in cluster_test.go
	g, p, admin, cs := poolSetup(t)
	p.testOnlyPodMeta = failWith(0, "60s")
	tmpl := poolSpec(t, "TEMPLATE", "adopt")
	// The pods end 60-120 s after they run, inside the dispatch's timeout, which an adopted
	// dispatch keeps counting from its claim.
	tmpl.Limits.Timeout = 5 * time.Minute
	pl, err := p.EnsurePool(t.Context(), tmpl, PoolOptions{Home: testHome, Replicas: 2, Places: warmPlaces})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.Delete(context.Background()) })
	pods := enrolPods(t, g, cs, readyPoolPods(t, admin, pl.Name, 2, nil))

	id := clusterID("POOLADOPT")
	cmd, boundUID := startClaimer(t, poolClaimer{Opts: claimerOptsOf(p), Sessions: g.reg.Dir, Slots: g.slots.Dir, Spec: tmpl, Dispatch: id, Bound: true, PodEnd: "60s"})
	bound, ok := pods[boundUID]
	if !ok {
		t.Fatalf("the claimer bound pod %s, not one the test enrolled", boundUID)
	}
	if got := handedTo(t, pods, id); got != bound {
		t.Fatalf("dispatch %s was handed to pod %s, the claimer bound %s", id, got.pod.Name, bound.pod.Name)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	// The adopter: this process's provider, the pool opened afresh as a claim opens it.
	s := tmpl
	s.ID = id
	s.Env = append(slotEnv(s.Env), "AGORA_DISPATCH_ID="+id)
	opened, err := p.OpenPool(t.Context(), s, PoolOptions{Home: testHome, Replicas: 2, Places: warmPlaces})
	if err != nil {
		t.Fatalf("OpenPool: %v", err)
	}
	if h, err := opened.Adopt(t.Context(), withID(s, clusterID("POOLNOCLAIM"))); h != nil || err != nil {
		t.Errorf("Adopt of a dispatch with no claim = %v, %v; want nil, nil", h, err)
	}
	// The pod the Sandbox has is not the one the dispatch was bound to (the controller made a
	// replacement, or someone rewrote the mark): refused, nothing followed.
	sbs := admin.client.AgentsV1beta1().Sandboxes(p.ns)
	mark := func(uid string) {
		t.Helper()
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, annotationBoundPod, uid)
		if _, err := sbs.Patch(t.Context(), bound.pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mark("00000000-0000-0000-0000-000000000000")
	if h, err := opened.Adopt(t.Context(), s); h != nil || err == nil || !strings.Contains(err.Error(), "a replacement") {
		t.Errorf("Adopt of a Sandbox whose pod is not the bound one = %v, %v; want refused as a replacement", h, err)
	}
	mark(string(bound.pod.UID))
	h, err := opened.Adopt(t.Context(), s)
	if err != nil || h == nil {
		t.Fatalf("Adopt = %v, %v; want the bound pod followed", h, err)
	}
	if h.TaskID() != formatTaskID(p.ns, bound.pod.Name) {
		t.Errorf("adopted task id %q, want the bound pod's Sandbox %q", h.TaskID(), formatTaskID(p.ns, bound.pod.Name))
	}
	exit := waitTimeout(t, h, 4*time.Minute)
	if exit.Code != 0 || exit.Lost || exit.Cancelled || exit.TimedOut {
		t.Errorf("adopted exit = %+v, want the pod's end, code 0", exit)
	}
	waitGone(t, "adopted dispatch's claim", func() error {
		_, err := admin.client.ExtensionsV1beta1().SandboxClaims(p.ns).Get(t.Context(), objectName(id), metav1.GetOptions{})
		return err
	})
}

// withID is s with another dispatch id.
func withID(s compute.Spec, id string) compute.Spec {
	s.ID = id
	return s
}
