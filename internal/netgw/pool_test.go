package netgw

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute/remote"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
)

// fakePods stands for the apiserver's TokenReview (the true boundary: the kubernetes
// provider's verifier is tested against the real apiserver on kwok): a projected token is
// known or not, and names its pod.
type fakePods struct {
	mu    sync.Mutex
	pods  map[string]remote.PodIdentity // by token
	calls atomic.Int32
}

func (f *fakePods) VerifyPod(_ context.Context, token string) (remote.PodIdentity, error) {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.pods[token]
	if !ok {
		return remote.PodIdentity{}, errors.New("the apiserver did not authenticate the token for the gateway's audience")
	}
	return id, nil
}

// pod makes a pool pod: its projected token (a JWT by its shape) and identity.
func (f *fakePods) pod(i int) (string, remote.PodIdentity) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pods == nil {
		f.pods = map[string]remote.PodIdentity{}
	}
	tok := fmt.Sprintf("eyJhbGciOiJSUzI1NiJ9.eyJwb2QiOiIl%04d.c2lnbmF0dXJl%04d", i, i)
	id := remote.PodIdentity{Namespace: "agents", Name: fmt.Sprintf("agora-pool-%d", i), UID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i)}
	f.pods[tok] = id
	return tok, id
}

func withPool(t testing.TB) (*gw, *fakePods) {
	t.Helper()
	f := &fakePods{}
	return withSlots(t, func(s *Server) { s.Pods = f }), f
}

func enroll(t testing.TB, g *gw, jwt string) (remote.EnrollAnswer, error) {
	t.Helper()
	return workerremote.Enroll(context.Background(), g.url, g.ca, jwt, nil)
}

// A pool pod enrols with its projected token and is given a slot of its own; the host binds
// a dispatch by the pod's uid and the pod's worker, claiming with its slot token, gets exactly
// that dispatch, whose token opens its session. No token reaches the gateway's log.
func TestPool_EnrollThenBindPodClaims(t *testing.T) {
	g, f := withPool(t)
	jwt, id := f.pod(1)
	a, err := enroll(t, g, jwt)
	if err != nil {
		t.Fatalf("Enroll: %v", err)
	}
	s := g.exportBare(t, "01POOL")
	bound := make(chan error, 1)
	go func() { bound <- g.slots().BindPod(context.Background(), id.UID, s.Dispatch, s.Token) }()
	c, err := workerremote.Claim(context.Background(), g.url, a.Slot, a.Token, g.ca, nil)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	defer c.Close()
	if err := <-bound; err != nil {
		t.Fatalf("BindPod: %v", err)
	}
	if info, err := c.Info(context.Background()); err != nil || info.Dispatch != "01POOL" {
		t.Fatalf("the granted token does not open its session: %+v, %v", info, err)
	}
	for _, secret := range []string{jwt, a.Token, s.Token} {
		if strings.Contains(g.logs.String(), secret) {
			t.Fatal("a token reached the gateway's log")
		}
	}
	g.srv.pool.mu.Lock()
	held := len(g.srv.pool.held)
	g.srv.pool.mu.Unlock()
	if held != 0 {
		t.Fatalf("the gateway still holds %d pool slots after the claim", held)
	}
}

// Attack: a pod's projected token replayed (by another pod that copied it, or by the pod's
// own agent after its claim) is refused: one enrolment per pod uid, before or after the
// claim, and the replay neither gets a slot nor spends the pod's.
func TestPool_ReplayedTokenRefused(t *testing.T) {
	g, f := withPool(t)
	jwt, id := f.pod(2)
	a, err := enroll(t, g, jwt)
	if err != nil {
		t.Fatal(err)
	}
	var se *workerremote.StatusError
	if _, err := enroll(t, g, jwt); !errors.As(err, &se) || se.Code != http.StatusUnauthorized {
		t.Fatalf("the same pod's token enrolled twice: %v, want 401", err)
	}
	// The pod's slot is still its own: the dispatch reaches it.
	s := g.exportBare(t, "01REPLAYPOD")
	bound := make(chan error, 1)
	go func() { bound <- g.slots().BindPod(context.Background(), id.UID, s.Dispatch, s.Token) }()
	c, err := workerremote.Claim(context.Background(), g.url, a.Slot, a.Token, g.ca, nil)
	if err != nil {
		t.Fatalf("the pod's own claim after a replayed enrolment: %v", err)
	}
	c.Close()
	if err := <-bound; err != nil {
		t.Fatal(err)
	}
	// After the claim: the token (the agent could have read it) gets nothing.
	if code, body := g.do(t, http.MethodPost, remote.EnrollRoute, jwt, nil); code != http.StatusUnauthorized {
		t.Fatalf("a pod's token replayed after its claim: %d %q, want 401", code, body)
	}
	if code, _ := g.do(t, http.MethodPost, claimPath(a.Slot), a.Token, nil); code != http.StatusUnauthorized {
		t.Fatalf("the pod's slot token after its claim: %d, want 401", code)
	}
}

// Attack: a token the apiserver does not authenticate (another audience, an expired one, a
// pod that is gone, a gateway token, nothing) enrols nothing and leaves no mark.
func TestPool_UnverifiedTokenRefused(t *testing.T) {
	g, f := withPool(t)
	for _, tok := range []string{"eyJh.eyJw.c2ln", "", "agw_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG", "a.b", "a.b.c.d", "a.b.c d"} {
		if code, body := g.do(t, http.MethodPost, remote.EnrollRoute, tok, nil); code != http.StatusUnauthorized {
			t.Errorf("enrol with %q: %d %q, want 401", tok, code, body)
		}
	}
	if n := f.calls.Load(); n != 1 {
		t.Errorf("the verifier was asked %d times; only the one token of a JWT's shape reaches it", n)
	}
	if ents, _ := os.ReadDir(filepath.Join(g.slots().Dir, poolPodDir)); len(ents) != 0 {
		t.Errorf("refused enrolments left markers: %v", ents)
	}
	if code, _ := g.do(t, http.MethodGet, remote.EnrollRoute, "x.y.z", nil); code != http.StatusMethodNotAllowed {
		t.Errorf("GET enroll: %d, want 405", code)
	}
}

// A gateway with no verifier serves no enrolment route.
func TestPool_NoVerifierNoRoute(t *testing.T) {
	g := withSlots(t, nil)
	if code, _ := g.do(t, http.MethodPost, remote.EnrollRoute, "x.y.z", nil); code != http.StatusNotFound {
		t.Fatalf("enrol without a verifier: %d, want 404", code)
	}
}

// Two dispatches never share a pod: 40 pods enrol, 40 dispatches are bound by uid at once
// while every pod's worker claims; each worker gets exactly the dispatch bound to its pod, and
// every dispatch reaches exactly one worker.
func TestPool_ConcurrentBindsNeverShare(t *testing.T) {
	g, f := withPool(t)
	const n = 40
	slots := make([]remote.EnrollAnswer, n)
	uids := make([]string, n)
	for i := range n {
		jwt, id := f.pod(100 + i)
		a, err := enroll(t, g, jwt)
		if err != nil {
			t.Fatal(err)
		}
		slots[i], uids[i] = a, id.UID
	}
	got := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		s := g.exportBare(t, fmt.Sprintf("01SHARE%02d", i))
		wg.Go(func() {
			if err := g.slots().BindPod(context.Background(), uids[i], s.Dispatch, s.Token); err != nil {
				errs <- err
			}
		})
		wg.Go(func() {
			c, err := workerremote.Claim(context.Background(), g.url, slots[i].Slot, slots[i].Token, g.ca, nil)
			if err != nil {
				errs <- err
				return
			}
			got[i] = c.Dispatch()
			c.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, d := range got {
		if want := fmt.Sprintf("01SHARE%02d", i); d != want {
			t.Errorf("pod %d's worker got %q, want %q", i, d, want)
		}
	}
}

// A binder whose pod's worker never claims gives up, and the pod's slot is revoked: the pod
// never runs a dispatch. A pod that never enrolled is never bound.
func TestPool_UnclaimedBindPodRevokes(t *testing.T) {
	g, f := withPool(t)
	jwt, id := f.pod(3)
	a, err := enroll(t, g, jwt)
	if err != nil {
		t.Fatal(err)
	}
	s := g.exportBare(t, "01POOLGIVEUP")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := g.slots().BindPod(ctx, id.UID, s.Dispatch, s.Token); err == nil {
		t.Fatal("BindPod with nobody claiming returned no error")
	}
	if code, _ := g.do(t, http.MethodPost, claimPath(a.Slot), a.Token, nil); code != http.StatusUnauthorized {
		t.Fatalf("claim after the binder gave up: %d, want 401", code)
	}
	_, other := f.pod(4)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	if err := g.slots().BindPod(ctx2, other.UID, s.Dispatch, s.Token); err == nil || !strings.Contains(err.Error(), "never enrolled") {
		t.Fatalf("BindPod of a pod that never enrolled: %v", err)
	}
}

// The gateway holds its enrolled pods' slots: stopped (or killed), their slots are revoked and
// a restarted gateway neither hands them a dispatch nor enrols the pods again.
func TestPool_GatewayStopRevokesEnrolledSlots(t *testing.T) {
	g, f := withPool(t)
	jwt, id := f.pod(5)
	a, err := enroll(t, g, jwt)
	if err != nil {
		t.Fatal(err)
	}
	g.close()
	g.restart(t)
	s := g.exportBare(t, "01POOLRESTART")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := g.slots().BindPod(ctx, id.UID, s.Dispatch, s.Token); err == nil {
		t.Fatal("BindPod after the enrolling gateway stopped returned no error")
	}
	if code, _ := g.do(t, http.MethodPost, claimPath(a.Slot), a.Token, nil); code != http.StatusUnauthorized {
		t.Fatalf("the pod's claim after the gateway restarted: %d, want 401", code)
	}
	if code, _ := g.do(t, http.MethodPost, remote.EnrollRoute, jwt, nil); code != http.StatusUnauthorized {
		t.Fatalf("the pod enrolled again after a restart: %d, want 401", code)
	}
}

// Attack: enrolments flood the verifier; past MaxEnrolling at once the next is refused
// without asking the apiserver.
func TestPool_EnrolmentsCapped(t *testing.T) {
	block := make(chan struct{})
	var inflight atomic.Int32
	g := withSlots(t, func(s *Server) {
		s.Pods = verifyFunc(func(ctx context.Context, _ string) (remote.PodIdentity, error) {
			inflight.Add(1)
			select {
			case <-block:
			case <-ctx.Done():
			}
			return remote.PodIdentity{}, errors.New("refused")
		})
	})
	var wg sync.WaitGroup
	for range MaxEnrolling {
		wg.Go(func() { g.do(t, http.MethodPost, remote.EnrollRoute, "x.y.z", nil) })
	}
	deadline := time.Now().Add(10 * time.Second)
	for inflight.Load() < MaxEnrolling && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if code, _ := g.do(t, http.MethodPost, remote.EnrollRoute, "x.y.z", nil); code != http.StatusTooManyRequests {
		t.Errorf("enrolment over the cap: %d, want 429", code)
	}
	close(block)
	wg.Wait()
	if n := inflight.Load(); n != MaxEnrolling {
		t.Errorf("the verifier was asked %d times, want %d", n, MaxEnrolling)
	}
}

type verifyFunc func(context.Context, string) (remote.PodIdentity, error)

func (f verifyFunc) VerifyPod(ctx context.Context, t string) (remote.PodIdentity, error) {
	return f(ctx, t)
}

func FuzzEnrollBearer(f *testing.F) {
	for _, s := range []string{"Bearer a.b.c", "Bearer agw_x", "Bearer ", "Basic a.b.c", "Bearer a.b.c.d", "Bearer eyJ.eyJ.sig-_"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		r, _ := http.NewRequest(http.MethodPost, "https://x/", nil)
		r.Header.Set("Authorization", h)
		tok, ok := enrollBearer(r)
		if !ok {
			return
		}
		if len(tok) > remote.MaxEnrollToken || strings.Count(tok, ".") != 2 || strings.ContainsAny(tok, " \t\r\n/+=") {
			t.Fatalf("accepted %q", tok)
		}
	})
}
