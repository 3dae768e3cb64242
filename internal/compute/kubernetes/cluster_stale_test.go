package kubernetes

import (
	"bytes"
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
)

// TestCluster_StaleStartDeletesNothingOfTheWinner is an attack on a stale claim:
// Start A holds the dispatch's claim (its NetworkPolicy) and stalls before its Secret (its
// export hangs); Start B, in another process, judges the claim stale after claimWait,
// replaces the policy and makes its own Secret and Job. When A wakes, it must delete and
// replace nothing of B's: every delete carries the UID of an object A made itself. B's
// Secret (B's token, owned by B's Job) and B's policy stay, and A follows B's Job.
func TestCluster_StaleStartDeletesNothingOfTheWinner(t *testing.T) {
	defer func(d time.Duration) { claimWait = d }(claimWait)
	claimWait = time.Second
	expA := &gatedExporter{gate: make(chan struct{})}
	pa, _ := clusterProvider(t, &expA.fakeExporter)
	pa.opts.Exporter = expA
	pa.testOnlyPodMeta = failWith(0, "1h")
	expB := &fakeExporter{}
	ob := pa.opts
	ob.Exporter = expB
	pb, err := New(ob)
	if err != nil {
		t.Fatal(err)
	}
	pb.testOnlyPodMeta = pa.testOnlyPodMeta
	id := clusterID("STALE")
	s := testSpec(id)
	name := objectName(s.ID)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var ha compute.Handle
	var errA error
	aDone := make(chan struct{})
	go func() { defer close(aDone); ha, errA = pa.Start(ctx, s) }()
	agoratest.WaitFor(t, 10*time.Second, "A's policy", func() bool {
		l, err := pa.findPolicy(t.Context(), name)
		return err == nil && l != nil
	})
	hb, err := pb.Start(ctx, s)
	if err != nil {
		t.Fatalf("Start B (stale claim in the way): %v", err)
	}
	job, err := pb.client.BatchV1().Jobs(pb.ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	npB, err := pb.findPolicy(t.Context(), name)
	if err != nil || npB == nil {
		t.Fatalf("B's policy: %v", err)
	}
	close(expA.gate) // A wakes up, stale
	<-aDone
	if errA == nil && ha.TaskID() != hb.TaskID() {
		t.Errorf("A follows %q, B made %q", ha.TaskID(), hb.TaskID())
	}
	t.Logf("stale Start A ended: %v", errA)

	np, err := pb.findPolicy(t.Context(), name)
	if err != nil || np == nil || np.UID != npB.UID {
		t.Errorf("B's network policy after A woke: %+v, %v; want B's (uid %s) untouched", np, err, npB.UID)
	}
	sec, err := pa.client.CoreV1().Secrets(pa.ns).Get(t.Context(), name, metav1.GetOptions{}) // the admin's client
	if err != nil {
		t.Fatalf("the dispatch's Secret after A woke: %v", err)
	}
	tokens := expB.allTokens()
	if len(tokens) != 1 || !bytes.Equal(sec.Data[secretToken], []byte(tokens[0])) {
		t.Errorf("the Secret holds another token than B's: A replaced it")
	}
	if len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].UID != job.UID {
		t.Errorf("the Secret's owners %+v, want B's Job (uid %s)", sec.OwnerReferences, job.UID)
	}
	if n := expA.openSessions(); n != 0 {
		t.Errorf("A left %d sessions open", n)
	}
	cancel()
	waitTimeout(t, hb, 3*time.Minute)
}

// TestCluster_CrashedStartsSecretGoesWithItsClaim: a start that crashed after its Secret left
// the policy (its claim) and the Secret it owns. The next Start replaces the stale claim
// after claimWait; the garbage collector takes the old Secret with it, and the new Start makes
// its own, deleting nothing by name.
func TestCluster_CrashedStartsSecretGoesWithItsClaim(t *testing.T) {
	defer func(d time.Duration) { claimWait = d }(claimWait)
	claimWait = time.Second
	exp := &fakeExporter{}
	p, _ := clusterProvider(t, exp)
	p.testOnlyPodMeta = failWith(0, "1h")
	id := clusterID("CRASHED")
	name := objectName(id)
	np, err := p.client.NetworkingV1().NetworkPolicies(p.ns).Create(t.Context(), networkPolicyObject(p.ns, name, id, p.gateway), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := secretObject(p.ns, name, id, "crashed-start-token", p.opts.GatewayCA, nil)
	old.OwnerReferences = []metav1.OwnerReference{{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy", Name: name, UID: np.UID}}
	if _, err := p.client.CoreV1().Secrets(p.ns).Create(t.Context(), old, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := p.Start(ctx, testSpec(id))
	if err != nil {
		t.Fatalf("Start after a crashed start: %v", err)
	}
	sec, err := p.client.CoreV1().Secrets(p.ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tokens := exp.allTokens(); len(tokens) != 1 || string(sec.Data[secretToken]) != tokens[0] {
		t.Errorf("the Secret is not the new start's")
	}
	cancel()
	waitTimeout(t, h, 3*time.Minute)
}

// TestCluster_GatewayUnreachableExit: a pod whose worker (or fetch step) exits
// remote.ExitGatewayUnreachable, its report that the gateway did not answer across its
// retries, ends with Exit.GatewayUnreachable; another failure does not.
func TestCluster_GatewayUnreachableExit(t *testing.T) {
	p, _ := clusterProvider(t, &fakeExporter{})
	for code, want := range map[int]bool{remote.ExitGatewayUnreachable: true, 1: false} {
		p.testOnlyPodMeta = failWith(code, "1s")
		h, err := p.Start(t.Context(), testSpec(clusterID("UNREACH")))
		if err != nil {
			t.Fatal(err)
		}
		if exit := waitTimeout(t, h, 3*time.Minute); exit.Code != code || exit.GatewayUnreachable != want {
			t.Errorf("exit %d: %+v, want GatewayUnreachable %v", code, exit, want)
		}
	}
}
