package netgw

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute/remote"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
)

// Attacks on the pool pods' enrolment by someone who did not build it.

// Attack: a pool pod that waits unclaimed past podMarkerAge (a quiet target keeps its warm
// pods for days) while its worker still holds its slot. Someone who may mint tokens of the
// pool's ServiceAccount (`serviceaccounts/token` in the namespace) mints one bound to that pod
// for the gateway's audience; the apiserver and the verifier accept it (the pod is live and
// unclaimed). The enrolment must still be refused: the pod enrolled, and its marker names a
// slot its worker holds. Were the old marker swept, the new enrolment would name the
// attacker's slot, and the next dispatch agora binds to that pod by uid would be handed, with
// its session token, to the attacker's claim instead of the pod's worker.
func TestPool_AttackAgedMarkerNotReEnrolled(t *testing.T) {
	g, f := withPool(t)
	jwt, id := f.pod(7)
	a, err := enroll(t, g, jwt)
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(g.slots().Dir, poolPodDir, id.UID)
	old := time.Now().Add(-podMarkerAge - time.Hour)
	if err := os.Chtimes(marker, old, old); err != nil {
		t.Fatal(err)
	}
	// The attacker's freshly minted token for the same pod (the fake apiserver names it so).
	minted := strings.Replace(jwt, "c2lnbmF0dXJl", "bWludGVkYWdh", 1)
	f.mu.Lock()
	f.pods[minted] = id
	f.mu.Unlock()
	stolen, err := enroll(t, g, minted)
	var se *workerremote.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusUnauthorized {
		t.Fatalf("a second enrolment of a pod whose slot is held, once its marker aged: %+v, %v; want 401", stolen.Slot, err)
	}
	// The pod's own worker still gets the dispatch bound to the pod.
	s := g.exportBare(t, "01AGEDPOD")
	bound := make(chan error, 1)
	go func() { bound <- g.slots().BindPod(context.Background(), id.UID, s.Dispatch, s.Token) }()
	c, err := workerremote.Claim(context.Background(), g.url, a.Slot, a.Token, g.ca, nil)
	if err != nil {
		t.Fatalf("the pod's own worker's claim: %v", err)
	}
	defer c.Close()
	if err := <-bound; err != nil {
		t.Fatalf("BindPod: %v", err)
	}
	if c.Dispatch() != "01AGEDPOD" {
		t.Fatalf("the pod's worker got %q", c.Dispatch())
	}
}

// A marker past podMarkerAge whose slot is gone (claimed, or revoked) is still swept: the
// markers do not grow for ever.
func TestPool_AgedMarkerOfSpentSlotSwept(t *testing.T) {
	g, f := withPool(t)
	jwt, id := f.pod(8)
	a, err := enroll(t, g, jwt)
	if err != nil {
		t.Fatal(err)
	}
	s := g.exportBare(t, "01SPENTPOD")
	bound := make(chan error, 1)
	go func() { bound <- g.slots().BindPod(context.Background(), id.UID, s.Dispatch, s.Token) }()
	c, err := workerremote.Claim(context.Background(), g.url, a.Slot, a.Token, g.ca, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := <-bound; err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(g.slots().Dir, poolPodDir, id.UID)
	old := time.Now().Add(-podMarkerAge - time.Hour)
	if err := os.Chtimes(marker, old, old); err != nil {
		t.Fatal(err)
	}
	jwt2, _ := f.pod(9)
	if _, err := enroll(t, g, jwt2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the aged marker of a spent slot was kept: %v", err)
	}
}

// Attack: the verifier's word names a pod uid that is a path ("../x", "/etc/x", a long or
// upper-case one): nothing is written anywhere, the enrolment is refused, and BindPod of such
// a uid reads nothing.
func TestPool_AttackUIDPathInjection(t *testing.T) {
	uids := []string{"../../../../tmp/agora-redpool", "/tmp/agora-redpool-abs", "..", ".", "",
		"00000000-0000-4000-8000-00000000000/", "00000000-0000-4000-8000-00000000000A",
		"00000000-0000-4000-8000-0000000000001", "00000000/0000-4000-8000-000000000001"}
	var uid string
	g := withSlots(t, func(s *Server) {
		s.Pods = verifyFunc(func(context.Context, string) (remote.PodIdentity, error) {
			return remote.PodIdentity{Namespace: "agents", Name: "p", UID: uid}, nil
		})
	})
	for _, uid = range uids {
		if code, body := g.do(t, http.MethodPost, remote.EnrollRoute, "eyJh.eyJw.c2ln", nil); code != http.StatusUnauthorized {
			t.Errorf("enrol as uid %q: %d %q, want 401", uid, code, body)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		if err := g.slots().BindPod(ctx, uid, "01INJECT", "agw_x"); err == nil || strings.Contains(err.Error(), "never enrolled") {
			t.Errorf("BindPod of uid %q: %v; want refused at once", uid, err)
		}
		cancel()
	}
	if ents, _ := os.ReadDir(filepath.Join(g.slots().Dir, poolPodDir)); len(ents) != 0 {
		t.Errorf("markers were written: %v", ents)
	}
	for _, p := range []string{"/tmp/agora-redpool", "/tmp/agora-redpool-abs"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
}

// Attack: JWT shape tricks never reach the verifier unless they are a JWT's shape within the
// cap: over MaxEnrollToken, two Authorization headers, a token with padding, spaces or a
// fourth part; an unsigned (alg none) token of the right shape reaches it and is the
// apiserver's to refuse (here: refused), with no panic and no marker.
func TestPool_AttackTokenShapes(t *testing.T) {
	g, f := withPool(t)
	huge := "eyJh." + strings.Repeat("A", remote.MaxEnrollToken) + ".c2ln"
	for _, tok := range []string{huge, "eyJh.eyJw.c2ln==", "eyJh.eyJw.c2l/", "eyJh.eyJw.", "..", "eyJh eyJw.c2ln.x"} {
		if code, _ := g.do(t, http.MethodPost, remote.EnrollRoute, tok, nil); code != http.StatusUnauthorized {
			t.Errorf("enrol with a %d-byte malformed token: %d, want 401", len(tok), code)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, g.url+remote.EnrollRoute, nil)
	req.Header.Add("Authorization", "Bearer a.b.c")
	req.Header.Add("Authorization", "Bearer d.e.f")
	resp, err := g.httpClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("two Authorization headers: %d, want 401", resp.StatusCode)
	}
	calls := f.calls.Load()
	// "..": empty parts have a JWT's dots; the verifier may see it, and refuses it.
	if calls > 2 {
		t.Errorf("the verifier was asked %d times for malformed tokens", calls)
	}
	// alg none: {"alg":"none"}.{"sub":"system:serviceaccount:agents:agora-pool"}.
	none := "eyJhbGciOiJub25lIn0.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6YWdlbnRzOmFnb3JhLXBvb2wifQ."
	if code, _ := g.do(t, http.MethodPost, remote.EnrollRoute, none, nil); code != http.StatusUnauthorized {
		t.Errorf("alg none: %d, want 401", code)
	}
	if ents, _ := os.ReadDir(filepath.Join(g.slots().Dir, poolPodDir)); len(ents) != 0 {
		t.Errorf("refused enrolments left markers: %v", ents)
	}
}
