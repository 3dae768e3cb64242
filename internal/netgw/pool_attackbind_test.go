package netgw

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute/remote"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
)

// Attacks on the pod bind (Slots.BindPod), as two supervisors that each believe they hold one
// pool pod, and as a pod replaced under its name, would make them.

// bindWait bounds a bind the test expects to be refused: a bind that waits for a claim instead
// of refusing fails the test when it ends, not by a timed assertion.
const bindWait = 30 * time.Second

// replacePod is a pod of pod i's name with another uid (its Sandbox's controller remade it)
// and its own projected token.
func (f *fakePods) replacePod(i int) (string, remote.PodIdentity) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tok := fmt.Sprintf("eyJhbGciOiJSUzI1NiJ9.eyJwb2QiOiIl%04d.cmVwbGFjZWQ%04d", i, i)
	id := remote.PodIdentity{Namespace: "agents", Name: fmt.Sprintf("agora-pool-%d", i), UID: fmt.Sprintf("00000000-0000-4000-9000-%012d", i)}
	f.pods[tok] = id
	return tok, id
}

// Attack: two supervisors bind two dispatches to one pod uid (two claims that both believe
// they were handed it). The second bind, made while the first waits for the pod's worker, is
// refused at once: not left to wait out its bind for a claim that never comes, its dispatch
// held back from its cold start, and never taking the pod's socket from the first. The worker
// gets the first dispatch, and no bind of the uid after the claim reaches the pod.
func TestPool_AttackTwoBindsOfOnePod(t *testing.T) {
	g, f := withPool(t)
	jwt, id := f.pod(11)
	a, err := enroll(t, g, jwt)
	if err != nil {
		t.Fatal(err)
	}
	first, second := g.exportBare(t, "01TWOBINDA"), g.exportBare(t, "01TWOBINDB")
	bound := make(chan error, 1)
	go func() { bound <- g.slots().BindPod(context.Background(), id.UID, first.Dispatch, first.Token) }()
	agoratest.WaitFor(t, time.Minute, "the first bind to listen for the pod's worker", func() bool {
		_, err := os.Lstat(filepath.Join(g.slots().Dir, a.Slot, slotSocket))
		return err == nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), bindWait)
	defer cancel()
	if err := g.slots().BindPod(ctx, id.UID, second.Dispatch, second.Token); err == nil || ctx.Err() != nil {
		t.Errorf("a second bind of a bound pod: %v (context %v), want refused at once", err, ctx.Err())
	}
	c, err := workerremote.Claim(context.Background(), g.url, a.Slot, a.Token, g.ca, nil)
	if err != nil {
		t.Fatalf("the pod's worker's claim: %v", err)
	}
	got := c.Dispatch()
	c.Close()
	if err := <-bound; err != nil {
		t.Errorf("the first bind: %v", err)
	}
	if got != first.Dispatch {
		t.Errorf("the pod's worker got %q, want the first bind's %s", got, first.Dispatch)
	}
	// After the claim: another bind of the uid is refused, and the worker's slot token with it.
	third := g.exportBare(t, "01TWOBINDC")
	if err := g.slots().BindPod(ctx, id.UID, third.Dispatch, third.Token); err == nil || ctx.Err() != nil {
		t.Errorf("a bind of a claimed pod: %v (context %v), want refused at once", err, ctx.Err())
	}
	if code, _ := g.do(t, http.MethodPost, claimPath(a.Slot), a.Token, nil); code != http.StatusUnauthorized {
		t.Errorf("the claimed pod's slot token again: %d, want 401", code)
	}
}

// Attack: a pool pod is replaced under its name (deleted; its Sandbox's controller makes a new
// pod, another uid) after its first pod was bound and claimed. The new pod enrols as the new
// pod it is, with a slot of its own; a bind by the first pod's uid never reaches it (a
// supervisor that looked the pod up by name before the replacement binds the uid it checked),
// and only a bind by its own uid does.
func TestPool_AttackReplacedPodOfOneName(t *testing.T) {
	g, f := withPool(t)
	jwt, first := f.pod(12)
	a, err := enroll(t, g, jwt)
	if err != nil {
		t.Fatal(err)
	}
	s := g.exportBare(t, "01REPLACEDA")
	bound := make(chan error, 1)
	go func() { bound <- g.slots().BindPod(context.Background(), first.UID, s.Dispatch, s.Token) }()
	c, err := workerremote.Claim(context.Background(), g.url, a.Slot, a.Token, g.ca, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := <-bound; err != nil {
		t.Fatal(err)
	}

	jwt2, second := f.replacePod(12)
	if second.Name != first.Name || second.UID == first.UID {
		t.Fatalf("replacement %+v is not another pod of %s's name", second, first.Name)
	}
	b, err := enroll(t, g, jwt2)
	if err != nil {
		t.Fatalf("the replacement pod's enrolment: %v", err)
	}
	if b.Slot == a.Slot {
		t.Fatal("the replacement pod was given the first pod's slot")
	}
	got := make(chan string, 1)
	go func() {
		c, err := workerremote.Claim(context.Background(), g.url, b.Slot, b.Token, g.ca, nil)
		if err != nil {
			got <- "refused: " + err.Error()
			return
		}
		got <- c.Dispatch()
		c.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), bindWait)
	defer cancel()
	stale := g.exportBare(t, "01REPLACEDB")
	if err := g.slots().BindPod(ctx, first.UID, stale.Dispatch, stale.Token); err == nil || ctx.Err() != nil {
		t.Errorf("a bind by the replaced pod's uid: %v (context %v), want refused at once", err, ctx.Err())
	}
	own := g.exportBare(t, "01REPLACEDC")
	if err := g.slots().BindPod(ctx, second.UID, own.Dispatch, own.Token); err != nil {
		t.Fatalf("a bind by the replacement's own uid: %v", err)
	}
	if d := <-got; d != own.Dispatch {
		t.Errorf("the replacement pod's worker got %q, want %s", d, own.Dispatch)
	}
	var se *workerremote.StatusError
	if _, err := enroll(t, g, jwt); !errors.As(err, &se) || se.Code != http.StatusUnauthorized {
		t.Errorf("the first pod's token after its replacement enrolled: %v, want 401", err)
	}
}
