package kubernetes

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/agora-dev/agora/internal/compute"
)

// The identities of the pool tests across an upgrade (dispatch.k8sHomes): formerTestHome is
// what an older agora of testHome labelled its pools with; otherTestHome is another home in the
// same namespace.
const (
	formerTestHome = "k8sformertesthome"
	otherTestHome  = "k8sothertesthome"
)

// ensureTestPool makes home's pool of tag on p, deleted with its policy at the test's end.
func ensureTestPool(t *testing.T, p *Provider, tag, home string, replicas int32) *Pool {
	t.Helper()
	pl, err := p.EnsurePool(t.Context(), poolSpec(t, "TEMPLATE", tag), PoolOptions{Home: home, Replicas: replicas, Places: warmPlaces})
	if err != nil {
		t.Fatalf("EnsurePool of %s: %v", home, err)
	}
	t.Cleanup(func() { pl.Delete(context.Background()); p.deletePolicy(pl.Name, pl.npUID) })
	return pl
}

// A pool pod an older agora of this home made (its pool and pod labelled, its token's audience,
// with the former identity) enrols after the upgrade: the gateway's verifier takes the former
// audience for a pod and pool of the former identity. Attacks, each refused: the same pod's
// token without the former identity given (the gap this closes); the former pod with a token of
// the current audience (an audience is accepted only for pods of its own identity); a pod of
// another home with a token of its own audience, of this home's former audience, or of its
// current one.
func TestAgentSandboxPool_VerifierTakesFormerAudience(t *testing.T) {
	_, p, admin, cs := poolSetup(t)
	p.testOnlyPodMeta = failWith(0, "1h")
	former := ensureTestPool(t, p, "verify-former", formerTestHome, 1)
	other := ensureTestPool(t, p, "verify-other", otherTestHome, 1)
	fpod := readyPoolPods(t, admin, former.Name, 1, nil)[0]
	opod := readyPoolPods(t, admin, other.Name, 1, nil)[0]

	v := PoolVerifier{P: p, Pools: p.MadePools, Home: testHome, Former: []string{formerTestHome}}
	jwt := mintPodToken(t, cs, &fpod, PoolAudience(formerTestHome))
	id, err := v.VerifyPod(t.Context(), jwt)
	if err != nil || id.UID != string(fpod.UID) || id.Name != fpod.Name {
		t.Fatalf("the former identity's pool pod = %+v, %v; want pod %s accepted", id, err, fpod.Name)
	}
	if id, err := (PoolVerifier{P: p, Pools: p.MadePools, Home: testHome}).VerifyPod(t.Context(), jwt); err == nil {
		t.Errorf("without the former identity, the former pool's pod was accepted as %+v", id)
	}
	if id, err := v.VerifyPod(t.Context(), mintPodToken(t, cs, &fpod, PoolAudience(testHome))); err == nil {
		t.Errorf("the former identity's pod with a token of the current audience was accepted as %+v", id)
	}
	for _, aud := range []string{otherTestHome, formerTestHome, testHome} {
		if id, err := v.VerifyPod(t.Context(), mintPodToken(t, cs, &opod, PoolAudience(aud))); err == nil {
			t.Errorf("another home's pool pod with a token of %s's audience was accepted as %+v", aud, id)
		}
	}
	// The other home's own verifier still takes its pod: the refusals above are of the home.
	if _, err := (PoolVerifier{P: p, Pools: p.MadePools, Home: otherTestHome}).VerifyPod(t.Context(), mintPodToken(t, cs, &opod, PoolAudience(otherTestHome))); err != nil {
		t.Errorf("the other home's verifier refused its own pod: %v", err)
	}
	if _, err := (PoolVerifier{P: p, Pools: p.MadePools, Home: testHome, Former: []string{"Not/Valid"}}).VerifyPod(t.Context(), jwt); err == nil || !strings.Contains(err.Error(), "Not/Valid") {
		t.Errorf("a verifier with an invalid former identity: %v; want refused", err)
	}
}

// A pool an older agora of this home left (its holder killed with -9, its identity the former
// one) is deleted by DeleteFormerPools: its template, warm pool and unclaimed pods go, and
// SweepPools then takes its policy. Another home's pool in the namespace stands, its pods too,
// and so does this home's current pool of the same shape; an invalid identity is refused.
func TestAgentSandboxPool_DeleteFormerPoolsOnlyTheHomes(t *testing.T) {
	_, p, admin, _ := poolSetup(t)
	p.testOnlyPodMeta = failWith(0, "1h")
	ctx := t.Context()
	former := ensureTestPool(t, p, "delete-former", formerTestHome, 1)
	other := ensureTestPool(t, p, "delete-former", otherTestHome, 1)
	current := ensureTestPool(t, p, "delete-former", testHome, 0)
	readyPoolPods(t, admin, former.Name, 1, nil)
	readyPoolPods(t, admin, other.Name, 1, nil)

	if _, err := p.DeleteFormerPools(ctx, "Not/Valid"); err == nil {
		t.Error("DeleteFormerPools of an invalid identity: nil error")
	}
	gone, err := p.DeleteFormerPools(ctx, formerTestHome)
	if err != nil {
		t.Fatalf("DeleteFormerPools: %v", err)
	}
	if !slices.Contains(gone, former.Name) || slices.Contains(gone, other.Name) || slices.Contains(gone, current.Name) {
		t.Fatalf("DeleteFormerPools deleted %v; want the former pool %s and neither %s (another home's) nor %s (the current one)", gone, former.Name, other.Name, current.Name)
	}
	waitPoolParts(t, admin, former.Name, 0)
	swept, err := p.SweepPools(ctx, formerTestHome, func(string) bool { return false })
	if err != nil || !slices.Contains(swept, former.Name) {
		t.Errorf("SweepPools of the former identity after its pool went = %v, %v; want its policy %s taken", swept, err, former.Name)
	}
	for _, pl := range []*Pool{other, current} {
		if _, err := admin.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Get(ctx, pl.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("pool %s's template after the former identity's pools were deleted: %v", pl.Name, err)
		}
	}
	// The other home's pod still stands, its pool still holding it.
	readyPoolPods(t, admin, other.Name, 1, nil)
	if again, err := p.DeleteFormerPools(ctx, formerTestHome); err != nil || len(again) != 0 {
		t.Errorf("DeleteFormerPools again = %v, %v; want nothing left to delete", again, err)
	}
}

// preUpgrade is a pooled dispatch of an older agora: claimed and bound under the former
// identity's pool, its supervisor killed with -9, then the upgrade: this home's current pool
// of the same shape made, and the former pool deleted by the sweep (DeleteFormerPools).
type preUpgrade struct {
	g               *slotGW
	p, admin        *Provider
	cs              *kubernetes.Clientset
	tmpl            compute.Spec
	opts            func(home string) PoolOptions
	former, current *Pool
	bound           *poolPod // the pod the claimer bound the dispatch to
	id              string
}

// preUpgradePooled makes a preUpgrade of a pool of replicas pods, named by shape and id.
func preUpgradePooled(t *testing.T, shape, idName string, replicas int32) preUpgrade {
	t.Helper()
	g, p, admin, cs := poolSetup(t)
	g.pods.mu.Lock()
	g.pods.v = PoolVerifier{P: p, Pools: p.MadePools, Home: testHome, Former: []string{formerTestHome}}
	g.pods.mu.Unlock()
	p.testOnlyPodMeta = failWith(0, "60s")
	tmpl := poolSpec(t, "TEMPLATE", shape)
	tmpl.Limits.Timeout = 5 * time.Minute
	opts := func(home string) PoolOptions { return PoolOptions{Home: home, Replicas: replicas, Places: warmPlaces} }
	former, err := p.EnsurePool(t.Context(), tmpl, opts(formerTestHome))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { former.Delete(context.Background()); p.deletePolicy(former.Name, former.npUID) })
	pods := enrolPodsAs(t, g, cs, readyPoolPods(t, admin, former.Name, int(replicas), nil), formerTestHome)

	id := clusterID(idName)
	cmd, boundUID := startClaimer(t, poolClaimer{Opts: claimerOptsOf(p), Sessions: g.reg.Dir, Slots: g.slots.Dir, Spec: tmpl, Dispatch: id, Bound: true, PodEnd: "60s", Home: formerTestHome})
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

	// The upgrade: the current identity's pool of the shape, and the sweep of the former one.
	current, err := p.EnsurePool(t.Context(), tmpl, PoolOptions{Home: testHome, Replicas: 0, Places: warmPlaces})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { current.Delete(context.Background()); p.deletePolicy(current.Name, current.npUID) })
	if gone, err := p.DeleteFormerPools(t.Context(), formerTestHome); err != nil || !slices.Contains(gone, former.Name) {
		t.Fatalf("DeleteFormerPools = %v, %v; want the former pool %s", gone, err, former.Name)
	}
	return preUpgrade{g: g, p: p, admin: admin, cs: cs, tmpl: tmpl, opts: opts, former: former, current: current, bound: bound, id: id}
}

// A supervisor of an older agora (pools under the former identity) killed with -9 after it
// bound its dispatch to a pool pod; after the upgrade this home's current pool of the same
// shape stands, and the sweep deleted the former pool (DeleteFormerPools). AdoptPooled given
// the former identity adopts the dispatch through its claim and follows the bound pod to its
// end. Refused or not adopted: the same without the former identity (the gap this closes), and
// another home's adopter.
func TestAgentSandboxPool_AdoptFormerIdentity(t *testing.T) {
	t.Parallel() // waits a minute on kwok: see "Parallel tests" in cluster_test.go
	u := preUpgradePooled(t, "adopt-former", "POOLFORMER", 2)
	p, admin, tmpl, opts, former, bound, id := u.p, u.admin, u.tmpl, u.opts, u.former, u.bound, u.id
	waitGone(t, "the former pool's template", func() error {
		_, err := admin.client.ExtensionsV1beta1().SandboxTemplates(p.ns).Get(t.Context(), former.Name, metav1.GetOptions{})
		return err
	})
	if swept, err := p.SweepPools(t.Context(), formerTestHome, func(string) bool { return false }); err != nil || slices.Contains(swept, former.Name) {
		t.Fatalf("SweepPools = %v, %v; the policy of a pool whose claimed pod runs must stand", swept, err)
	}

	s := tmpl
	s.ID = id
	s.Env = append(slotEnv(s.Env), "AGORA_DISPATCH_ID="+id)
	if h, err := p.AdoptPooled(t.Context(), s, opts(testHome), nil); h != nil || err == nil {
		t.Errorf("AdoptPooled without the former identity = %v, %v; want refused (the claim is of another pool)", h, err)
	}
	if h, err := p.AdoptPooled(t.Context(), s, opts(otherTestHome), []string{"k8sotherformer"}); h != nil {
		t.Errorf("another home's AdoptPooled adopted the dispatch (err %v)", err)
	}
	if h, err := p.AdoptPooled(t.Context(), withID(s, clusterID("POOLFORMERNONE")), opts(testHome), []string{formerTestHome}); h != nil || err != nil {
		t.Errorf("AdoptPooled of a dispatch with no claim = %v, %v; want nil, nil", h, err)
	}
	h, err := p.AdoptPooled(t.Context(), s, opts(testHome), []string{formerTestHome})
	if err != nil || h == nil {
		t.Fatalf("AdoptPooled with the former identity = %v, %v; want the bound pod followed", h, err)
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

// A former pool whose template changes between the sweep's read and its delete (the
// controller updates a template it reconciles) is read again and deleted: a delete refused
// for the change is not the last word on a pool nothing of this agora renews.
func TestAgentSandboxPool_DeleteFormerPoolChangedMeanwhile(t *testing.T) {
	_, p, admin, _ := poolSetup(t)
	ctx := t.Context()
	former := ensureTestPool(t, p, "former-changed", formerTestHome, 0)
	templates := admin.client.ExtensionsV1beta1().SandboxTemplates(p.ns)
	changed := 0
	p.testOnlyPoolLapsing = func(name string) {
		if name != former.Name || changed > 0 {
			return
		}
		changed++
		patch := []byte(`{"metadata":{"annotations":{"test.agora.dev/touched":"1"}}}`)
		if _, err := templates.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Errorf("change the template between the read and the delete: %v", err)
		}
	}
	gone, err := p.DeleteFormerPools(ctx, formerTestHome)
	if err != nil || !slices.Contains(gone, former.Name) || changed != 1 {
		t.Fatalf("DeleteFormerPools after its template changed = %v, %v (changed %d times); want pool %s deleted", gone, err, changed, former.Name)
	}
}
