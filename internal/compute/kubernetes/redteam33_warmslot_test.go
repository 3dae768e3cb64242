package kubernetes

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/netgw"
)

// An attack on a slot being claimed: another holder of the same home sweeps it.
// The gateway removes the slot's directory as its worker takes the grant (the slot is spent:
// its token opens nothing), and the holder marks the Job claimed only after its bind returned.
// In between, the slot is neither live (the sweep's test: its gateway slot stands) nor claimed
// (the sweep's other test: the Job's annotation): a sweep of another holder of the same home
// (a second serve, or serve before each standby start while 50 dispatches claim) deleted the
// Job whose pod runs the dispatch, then its NetworkPolicy and Secret.
func TestRedTeam33_ClaimNeverSweptByTheSameHome(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	sl, gs := startSlot(t, p, g)
	token := podToken(t, p, sl)
	live := func(id string) bool {
		_, err := os.Lstat(filepath.Join(g.slots.Dir, id))
		return err == nil
	}
	id := clusterID("SWEPT")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got := workerClaims(ctx, g, gs.ID, token)
	var swept []string
	var sweepErr error
	h, err := sl.Run(ctx, warmSpec(t, id), func(ctx context.Context, dispatch, token string) error {
		if err := gs.Bind(ctx, dispatch, token); err != nil {
			return err
		}
		// The worker holds the grant; the other holder's sweep runs now, before Run returns.
		swept, sweepErr = p.SweepSlots(ctx, testHome, live)
		return nil
	})
	if err != nil {
		t.Fatalf("Run in the slot: %v", err)
	}
	defer func() { cancel(); waitTimeout(t, h, 3*time.Minute) }()
	if d := <-got; d != id {
		t.Fatalf("the slot's worker was handed %q, want %q", d, id)
	}
	if sweepErr != nil {
		t.Fatal(sweepErr)
	}
	if slices.Contains(swept, sl.ID) {
		t.Errorf("a sweep of the same home deleted slot %s while its dispatch %s was being claimed", sl.ID, id)
	}
	job, err := p.client.BatchV1().Jobs(p.ns).Get(t.Context(), sl.name, metav1.GetOptions{})
	if err != nil || job.UID != sl.job || job.DeletionTimestamp != nil {
		t.Errorf("the claimed slot's Job: %v (deleting %v)", err, job != nil && job.DeletionTimestamp != nil)
	}
	if np, err := p.findPolicy(t.Context(), sl.name); err != nil || np == nil || np.UID != sl.np || np.DeletionTimestamp != nil {
		t.Errorf("the claimed slot's NetworkPolicy is gone or going (%v) while its pod runs the dispatch", err)
	}
}

// Twenty dispatches race for four slots while another holder of the home sweeps in a loop (a
// second serve whose standbys keep starting): each slot runs exactly one dispatch, handed to
// its worker, and every claimed slot keeps its Job and NetworkPolicy; no sweep takes a slot
// being claimed or claimed.
func TestRedTeam33_ConcurrentClaimsUnderSweeps(t *testing.T) {
	const home, slots, claims = "redteam33sweephome", 4, 20
	g := startSlotGW(t)
	p := slotProvider(t, g)
	live := func(id string) bool {
		_, err := os.Lstat(filepath.Join(g.slots.Dir, id))
		return err == nil
	}
	var all []*Slot
	gws := map[string]*netgw.Slot{}
	for range slots {
		gs, err := g.slots.Create(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { gs.Close() })
		sl, err := p.StartSlot(t.Context(), warmSpec(t, "TEMPLATE"), SlotOptions{ID: gs.ID, Token: gs.Token, Home: home, Places: warmPlaces})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(sl.Discard)
		all = append(all, sl)
		gws[sl.ID] = gs
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	handed := map[string]<-chan string{}
	for _, sl := range all {
		handed[sl.ID] = workerClaims(ctx, g, sl.ID, podToken(t, p, sl))
	}
	sweeping, stopSweeps := context.WithCancel(ctx)
	var swept []string
	sweeps := make(chan struct{})
	go func() {
		defer close(sweeps)
		for sweeping.Err() == nil {
			gone, _ := p.SweepSlots(sweeping, home, live)
			swept = append(swept, gone...)
		}
	}()
	var (
		mu  sync.Mutex
		ran = map[string][]string{}
		hs  []compute.Handle
		wg  sync.WaitGroup
	)
	for i := range claims {
		wg.Go(func() {
			sl := all[i%slots]
			id := fmt.Sprintf("SWEEP%d%02d", time.Now().UnixNano()%1e6, i)
			h, err := sl.Run(ctx, warmSpec(t, id), gws[sl.ID].Bind)
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			ran[sl.ID] = append(ran[sl.ID], id)
			hs = append(hs, h)
		})
	}
	wg.Wait()
	stopSweeps()
	<-sweeps
	defer func() {
		cancel()
		for _, h := range hs {
			waitTimeout(t, h, 3*time.Minute)
		}
	}()
	if len(swept) != 0 {
		t.Errorf("the sweeps deleted slots %v while they were claimed", swept)
	}
	for _, sl := range all {
		if len(ran[sl.ID]) != 1 {
			t.Errorf("slot %s ran %v, want exactly one dispatch", sl.ID, ran[sl.ID])
			continue
		}
		if d := <-handed[sl.ID]; d != ran[sl.ID][0] {
			t.Errorf("slot %s's worker was handed %q, its Run was for %q", sl.ID, d, ran[sl.ID][0])
		}
		job, err := p.client.BatchV1().Jobs(p.ns).Get(t.Context(), sl.name, metav1.GetOptions{})
		if err != nil || job.UID != sl.job || job.DeletionTimestamp != nil || job.Annotations[annotationClaimed] != ran[sl.ID][0] {
			t.Errorf("claimed slot %s's Job: %v", sl.ID, err)
		}
		if np, err := p.findPolicy(t.Context(), sl.name); err != nil || np == nil || np.UID != sl.np || np.DeletionTimestamp != nil {
			t.Errorf("claimed slot %s's NetworkPolicy is gone or going (%v)", sl.ID, err)
		}
	}
}

// The holder is killed with -9 after it marked the slot's Job claimed and before its bind (the
// window 9f87286 made): the Job stays, claimed, with a deadline of the dispatch's timeout plus
// claimSlack, so it ends even if nothing else ends it; the gateway refuses the slot's waiting
// worker (401) as soon as it sees the hold free, so the worker exits and the pod ends long
// before; and the sweep leaves the claimed Job to that end.
func TestRedTeam33_HolderKilledBetweenMarkAndBind(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), slotHolderEnv+"="+g.slots.Dir)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	slotID, token, _ := strings.Cut(strings.TrimSpace(line), " ")
	sl, err := p.StartSlot(t.Context(), warmSpec(t, "TEMPLATE"), SlotOptions{ID: slotID, Token: token, Home: testHome, Places: warmPlaces})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sl.Discard)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	worker := workerClaims(ctx, g, slotID, token)
	live := func(id string) bool {
		_, err := os.Lstat(filepath.Join(g.slots.Dir, id))
		return err == nil
	}
	spec := warmSpec(t, clusterID("KILLED"))
	_, err = sl.Run(ctx, spec, func(ctx context.Context, dispatch, token string) error {
		// The holder dies here: what it left must end by itself.
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		job, err := p.client.BatchV1().Jobs(p.ns).Get(ctx, sl.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if job.Annotations[annotationClaimed] != spec.ID || job.Spec.ActiveDeadlineSeconds == nil ||
			*job.Spec.ActiveDeadlineSeconds < int64((spec.Limits.Timeout+claimSlack)/time.Second) {
			t.Errorf("the Job before the bind: claimed %q, deadline %v; want claimed by %s with the timeout plus %v", job.Annotations[annotationClaimed], job.Spec.ActiveDeadlineSeconds, spec.ID, claimSlack)
		}
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		defer wcancel()
		select {
		case d := <-worker:
			if !strings.HasPrefix(d, "refused: ") || !strings.Contains(d, "401") {
				t.Errorf("the dead holder's waiting worker was answered %q, want refused with 401", d)
			}
		case <-wctx.Done():
			t.Error("the dead holder's waiting worker is still waiting after 30 s")
		}
		if _, err := g.slots.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		swept, err := p.SweepSlots(ctx, testHome, live)
		if err != nil || slices.Contains(swept, sl.ID) {
			t.Errorf("the sweep took the claimed Job (swept %v, %v)", swept, err)
		}
		return errors.New("the holder is dead")
	})
	if err == nil {
		t.Fatal("Run succeeded with a bind that failed")
	}
}

// listedSlot starts a slot of testHome and returns it with its Job as a sweep would list it.
func listedSlot(t *testing.T, g *slotGW, p *Provider) (*Slot, *batchv1.Job) {
	t.Helper()
	gs, err := g.slots.Create(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gs.Close() })
	sl, err := p.StartSlot(t.Context(), warmSpec(t, "TEMPLATE"), SlotOptions{ID: gs.ID, Token: gs.Token, Home: testHome, Places: warmPlaces})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sl.Discard)
	listed, err := p.client.BatchV1().Jobs(p.ns).Get(t.Context(), sl.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sl, listed
}

// The sweep's race made deterministic: the sweep listed the slot's Job
// unclaimed, then its holder marked it claimed and bound it, and the slot's directory went. A
// delete of the Job as listed must fail, and the claimed Job stand.
func TestRedTeam33_SweepOfAStaleListingLeavesTheClaimedJob(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	sl, listed := listedSlot(t, g, p)
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"STALE01"}}}`, annotationClaimed)
	if _, err := p.client.BatchV1().Jobs(p.ns).Patch(t.Context(), sl.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	dead := func(string) bool { return false } // the slot's directory went with the claim
	swept, err := p.sweepJob(listed, testHome, dead)
	if err != nil || swept {
		t.Fatalf("sweep of the stale listing: swept %v, %v; want neither", swept, err)
	}
	job, err := p.client.BatchV1().Jobs(p.ns).Get(t.Context(), sl.name, metav1.GetOptions{})
	if err != nil || job.UID != sl.job || job.DeletionTimestamp != nil {
		t.Fatalf("the claimed Job after the sweep: %v (deleting %v)", err, job != nil && job.DeletionTimestamp != nil)
	}
}

// A dead slot's Job that changed between the sweep's listing and its delete by something other
// than a claim (the Job controller's status updates of a slot just started, here a label) is
// still swept: the conflict reads it again, finds it dead and deletes it as read.
func TestRedTeam33_SweepOfAListingChangedByNoClaimDeletesTheJob(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	sl, listed := listedSlot(t, g, p)
	patch := []byte(`{"metadata":{"labels":{"example.com/touched":"yes"}}}`)
	if _, err := p.client.BatchV1().Jobs(p.ns).Patch(t.Context(), sl.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	swept, err := p.sweepJob(listed, testHome, func(string) bool { return false })
	if err != nil || !swept {
		t.Fatalf("sweep of a listing only a label changed: swept %v, %v; want the Job deleted", swept, err)
	}
	job, err := p.client.BatchV1().Jobs(p.ns).Get(t.Context(), sl.name, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) && (err != nil || job.DeletionTimestamp == nil) {
		t.Fatalf("the dead slot's Job after the sweep: %v; want it deleted", err)
	}
	// And one whose slot stands again at the gateway when read again is kept.
	sl2, listed2 := listedSlot(t, g, p)
	if _, err := p.client.BatchV1().Jobs(p.ns).Patch(t.Context(), sl2.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	reads := 0
	swept, err = p.sweepJob(listed2, testHome, func(string) bool { reads++; return true })
	if err != nil || swept || reads != 1 {
		t.Fatalf("sweep of a listing whose slot stands when read again: swept %v, %v, %d live checks; want kept after one", swept, err, reads)
	}
}
