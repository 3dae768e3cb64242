package kubernetes

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
)

// gatedExporter is a fakeExporter whose Export waits for gate: the window between a Start
// holding the claim and its Job existing, held open for as long as a test needs. It counts
// Reattach calls (an in-process loser must make none).
type gatedExporter struct {
	fakeExporter
	gate      chan struct{}
	reattachN atomic.Int32
}

func (g *gatedExporter) Export(ctx context.Context, spec compute.Spec) (*remote.Session, error) {
	if g.gate != nil {
		<-g.gate
	}
	return g.fakeExporter.Export(ctx, spec)
}

func (g *gatedExporter) Reattach(ctx context.Context, spec compute.Spec) (*remote.Session, error) {
	g.reattachN.Add(1)
	return &remote.Session{Dispatch: spec.ID, Mounts: testMounts()}, nil
}

// policyWatch fails the test on any deletion of a NetworkPolicy and closes contended at the
// first create refused because the policy exists (a second Start reached the claim).
func policyWatch(t *testing.T, cs *fake.Clientset) (contended chan struct{}) {
	contended = make(chan struct{})
	var once sync.Once
	cs.PrependReactor("delete", "networkpolicies", func(a k8stesting.Action) (bool, runtime.Object, error) {
		t.Errorf("a network policy was deleted while its dispatch's Start held it: %v", a)
		return false, nil, nil
	})
	cs.PrependReactor("create", "networkpolicies", func(a k8stesting.Action) (bool, runtime.Object, error) {
		np := a.(k8stesting.CreateAction).GetObject().(*networkingv1.NetworkPolicy)
		if _, err := cs.Tracker().Get(a.GetResource(), np.Namespace, np.Name); err == nil {
			once.Do(func() { close(contended) })
		}
		return false, nil, nil
	})
	return contended
}

func jobCreates(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "jobs" {
			n++
		}
	}
	return n
}

// TestStart_ConcurrentStartNeverDeletesLivePolicy is an attack on the claim: two processes (two
// providers over one API server) start one dispatch; the second reaches the claim while the
// first has exported but not yet made its Job. The second must neither export (a second
// export revokes the first's token), nor delete the policy, nor make a Job; it adopts.
func TestStart_ConcurrentStartNeverDeletesLivePolicy(t *testing.T) {
	cs := fake.NewClientset()
	contended := policyWatch(t, cs)
	expA := &gatedExporter{gate: make(chan struct{})}
	expB := &gatedExporter{}
	pa, err := newProvider(testOptions(t, expA), clientsetAPI(cs))
	if err != nil {
		t.Fatal(err)
	}
	pb, err := newProvider(testOptions(t, expB), clientsetAPI(cs))
	if err != nil {
		t.Fatal(err)
	}
	s := testSpec("01JRACE")
	name := objectName(s.ID)
	ctx, cancel := context.WithCancel(t.Context())

	var ha compute.Handle
	var errA error
	aDone := make(chan struct{})
	go func() { defer close(aDone); ha, errA = pa.Start(ctx, s) }()
	// A holds the policy and waits in Export. B, with a context that ends while it waits,
	// must give up without touching A's objects.
	agoratest.WaitFor(t, 10*time.Second, "one policy", func() bool { return len(policies(t, cs)) == 1 })
	bctx, bcancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	_, err = pb.Start(bctx, s)
	bcancel()
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a Start that gave up waiting = %v, want the deadline", err)
	}
	<-contended
	// Now B again, with time: it waits for A's Job and adopts it.
	var hb compute.Handle
	var errB error
	bDone := make(chan struct{})
	go func() { defer close(bDone); hb, errB = pb.Start(ctx, s) }()
	time.Sleep(3 * claimPoll)
	close(expA.gate)
	<-aDone
	<-bDone
	if errA != nil || errB != nil {
		t.Fatalf("Start A = %v, Start B = %v", errA, errB)
	}
	if ha.TaskID() != hb.TaskID() {
		t.Errorf("task ids %q and %q: B follows another Job", ha.TaskID(), hb.TaskID())
	}
	if n := jobCreates(cs); n != 1 {
		t.Errorf("%d job creates, want 1", n)
	}
	if expA.exports != 1 || expB.exports != 0 {
		t.Errorf("exports A=%d B=%d, want 1 and 0 (B's export would revoke A's token)", expA.exports, expB.exports)
	}
	if expA.openSessions() != 1 {
		t.Errorf("A's gateway session closed while its Job runs")
	}
	if got := policies(t, cs); len(got) != 1 || len(got[0].OwnerReferences) != 1 || got[0].Name != name {
		t.Errorf("network policies %+v, want %s owned by its Job", got, name)
	}
	cancel()
	ha.Wait()
	hb.Wait()
}

// TestStart_ConcurrentInProcessOneWinner starts one dispatch from many goroutines of one
// process (run it with -race): one Job, one export, and the losers adopt without
// re-attaching to the session the winner holds.
func TestStart_ConcurrentInProcessOneWinner(t *testing.T) {
	exp := &gatedExporter{}
	p, cs := testProvider(t, exp)
	s := testSpec("01JRACEINPROC")
	const n = 8
	var wg sync.WaitGroup
	ids := make([]string, n)
	for i := range n {
		wg.Go(func() {
			h, err := p.Start(t.Context(), s)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = h.TaskID()
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("task ids %v differ", ids)
		}
	}
	if jobCreates(cs) != 1 || exp.exports != 1 || exp.reattachN.Load() != 0 {
		t.Errorf("%d job creates, %d exports, %d reattaches; want 1, 1, 0", jobCreates(cs), exp.exports, exp.reattachN.Load())
	}
}

// TestStart_StaleClaimReplaced: a policy left by a start that crashed before its Job (no
// owner) is replaced after claimWait; one whose Job is gone (an owner) at once. "At once" is
// told by the clock the test holds, not a window: with claimWait an hour, a start that waited
// on the owned policy would end at the test's deadline, an error.
func TestStart_StaleClaimReplaced(t *testing.T) {
	old := claimWait
	t.Cleanup(func() { claimWait = old })
	for _, owned := range []bool{true, false} {
		claimWait = 300 * time.Millisecond
		if owned {
			claimWait = time.Hour
		}
		exp := &fakeExporter{}
		p, cs := testProvider(t, exp)
		s := testSpec("01JSTALE")
		np := networkPolicyObject("agents", objectName(s.ID), s.ID, p.gateway)
		if owned {
			np.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: np.Name, UID: "gone"}}
		}
		if _, err := cs.NetworkingV1().NetworkPolicies("agents").Create(t.Context(), np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		_, err := p.Start(ctx, s)
		cancel()
		if err != nil {
			t.Fatalf("owned=%v: %v", owned, err)
		}
		took := time.Since(begin)
		if !owned && took < claimWait {
			t.Errorf("an ownerless policy was replaced after %v, before claimWait", took)
		}
		if jobCreates(cs) != 1 || exp.exports != 1 {
			t.Errorf("owned=%v: %d job creates, %d exports", owned, jobCreates(cs), exp.exports)
		}
	}
}

func policies(t *testing.T, cs *fake.Clientset) []networkingv1.NetworkPolicy {
	l, err := cs.NetworkingV1().NetworkPolicies("agents").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// TestStart_ClaimSeesOwnerBeforeJob pins the order of the loser's two reads: the winner's Job
// and the policy's owner appear between them. Read the other way round, the loser took the
// winner's fresh owner for a dead Job and deleted the live policy (the 200-dispatch benchmark
// found it: 11 of 200 exported twice).
func TestStart_ClaimSeesOwnerBeforeJob(t *testing.T) {
	cs := fake.NewClientset()
	policyWatch(t, cs)
	exp := &fakeExporter{}
	p, err := newProvider(testOptions(t, exp), clientsetAPI(cs))
	if err != nil {
		t.Fatal(err)
	}
	s := testSpec("01JORDER")
	name := objectName(s.ID)
	np := networkPolicyObject("agents", name, s.ID, p.gateway) // the winner's claim
	if _, err := cs.NetworkingV1().NetworkPolicies("agents").Create(t.Context(), np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	cs.PrependReactor("list", "networkpolicies", func(a k8stesting.Action) (bool, runtime.Object, error) {
		once.Do(func() {
			// The winner's Job is made and owns its policy just as the loser reads.
			env, _ := splitEnv(s.Env)
			job := p.jobObject(jobInput{name: name, id: s.ID, spec: s, env: env, mounts: testMounts()})
			job.UID = "winner"
			if err := cs.Tracker().Add(job); err != nil {
				t.Error(err)
			}
			owned := np.DeepCopy()
			owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: "winner"}}
			if err := cs.Tracker().Update(a.GetResource(), owned, "agents"); err != nil {
				t.Error(err)
			}
		})
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	h, err := p.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if exp.exports != 0 || jobCreates(cs) != 0 {
		t.Errorf("%d exports, %d job creates; want the loser to adopt", exp.exports, jobCreates(cs))
	}
	cancel()
	h.Wait()
}
