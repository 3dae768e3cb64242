package kubernetes

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/netgw"
)

// Attacks on the Kubernetes provider with the real network gateway.

// stallRequests is a transport that holds the first request matching match: before sending
// it (hold "before"), or after its answer came (hold "after"), until gate closes. It stands
// for a supervisor process that froze there (a stopped process, a swapped-out host).
type stallRequests struct {
	rt    http.RoundTripper
	match func(*http.Request) bool
	after bool
	gate  chan struct{}
	held  chan struct{} // closed once the request is held
	once  sync.Once
}

func (s *stallRequests) RoundTrip(r *http.Request) (*http.Response, error) {
	hold := false
	if s.match(r) {
		s.once.Do(func() { hold = true })
	}
	if hold && !s.after {
		close(s.held)
		<-s.gate
	}
	resp, err := s.rt.RoundTrip(r)
	if hold && s.after {
		close(s.held)
		<-s.gate
	}
	return resp, err
}

// stalledProvider is a provider over c whose first request matching match stalls.
func stalledProvider(t *testing.T, c kubeconfigOf, exp remote.Exporter, match func(*http.Request) bool, after bool) (*Provider, *stallRequests) {
	t.Helper()
	cfg, err := restConfig(c.Kubeconfig, "")
	if err != nil {
		t.Fatal(err)
	}
	st := &stallRequests{match: match, after: after, gate: make(chan struct{}), held: make(chan struct{})}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { st.rt = rt; return st }
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions(t, exp)
	o.Kubeconfig, o.Namespace = c.Kubeconfig, c.Namespace
	p, err := newProvider(o, clientsetAPI(cs))
	if err != nil {
		t.Fatal(err)
	}
	return p, st
}

type kubeconfigOf struct{ Kubeconfig, Namespace string }

// gatewayOver serves reg's sessions on loopback TLS and returns a GET of a dispatch's session
// with a token: what a pod's first request is.
func gatewayOver(t *testing.T, reg *netgw.Registry) func(id, token string) int {
	t.Helper()
	certs, err := netgw.LoadOrCreateCA(filepath.Join(t.TempDir(), "keys"), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); (&netgw.Server{Registry: reg}).Serve(ctx, ln, certs.Server) }()
	t.Cleanup(func() { cancel(); <-done })
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certs.CAPEM)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
	return func(id, token string) int {
		req, _ := http.NewRequest("GET", "https://"+ln.Addr().String()+remote.RoutePrefix+id+"/session", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET session: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
}

// exportableSpec is testSpec with binds that exist, as the real gateway registry requires.
func exportableSpec(t *testing.T, id string) compute.Spec {
	t.Helper()
	s := testSpec(id)
	dir := t.TempDir()
	for i, b := range s.Binds {
		if b.Dst == s.Argv[0] {
			continue
		}
		src := filepath.Join(dir, filepath.Base(b.Dst))
		if err := os.Mkdir(src, 0o700); err != nil {
			t.Fatal(err)
		}
		s.Binds[i].Src = src
	}
	return s
}

// TestRedTeam4_StaleStartLeavesTheWinnersGatewaySession is the stale-start attack of
// TestCluster_StaleStartDeletesNothingOfTheWinner with the real gateway registry the two
// supervisors share (AGORA_HOME/gateway/sessions) instead of a fake exporter per provider.
// Start A holds the dispatch's claim and freezes; Start B (another process) judges the claim
// stale after claimWait, replaces it, exports the dispatch's session and makes its Secret and
// Job. When A wakes it must leave B's session alone. Were its export not bound to its claim,
// it would not, either way it froze:
//
//   - frozen before its export: A would export anyway, which replaces B's session (B's pod's
//     token answers 403), then find its claim lost and close its own session, leaving none;
//   - frozen after its export (B's export replaced A's, as it should): A would find its claim
//     lost and close "its" session, by path: B's session.json and sockets.
//
// Either way B's pod, running, could no longer reach the gateway.
func TestRedTeam4_StaleStartLeavesTheWinnersGatewaySession(t *testing.T) {
	defer func(d time.Duration) { claimWait = d }(claimWait)
	claimWait = time.Second
	_, cluster := clusterProvider(t, &fakeExporter{})
	kc := kubeconfigOf{cluster.Kubeconfig, cluster.Namespace}
	for _, tc := range []struct {
		name  string
		after bool
		match func(*http.Request) bool
	}{
		// The claim's create is answered only when A wakes: A then goes on to export.
		{"frozen before its export", true, func(r *http.Request) bool {
			return r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/networkpolicies")
		}},
		// A exported; its Secret's create is sent only when A wakes.
		{"frozen after its export", false, func(r *http.Request) bool {
			return r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/secrets")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := &netgw.Registry{Dir: filepath.Join(t.TempDir(), "sessions")}
			sessionOK := gatewayOver(t, reg)
			pa, stall := stalledProvider(t, kc, reg, tc.match, tc.after)
			pa.testOnlyPodMeta = failWith(0, "1h")
			pb, _ := stalledProvider(t, kc, reg, func(*http.Request) bool { return false }, false)
			pb.testOnlyPodMeta = pa.testOnlyPodMeta
			id := clusterID("RT4STALE")
			s := exportableSpec(t, id)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()

			aDone := make(chan error, 1)
			// A's handle is followed to its end inside the test: left running, it wrote into the
			// test's directories while they were being removed (a flake under load).
			aEnded := make(chan struct{})
			go func() {
				defer close(aEnded)
				h, err := pa.Start(ctx, s)
				aDone <- err
				if err == nil {
					h.Wait()
				}
			}()
			<-stall.held
			hb, err := pb.Start(ctx, s)
			if err != nil {
				t.Fatalf("Start B (the stale claim in the way): %v", err)
			}
			sec, err := pb.client.CoreV1().Secrets(pb.ns).Get(t.Context(), objectName(id), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tokenB := string(sec.Data[secretToken])
			if code := sessionOK(id, tokenB); code != 200 {
				t.Fatalf("B's pod's token before A wakes: %d, want 200", code)
			}
			close(stall.gate) // A wakes, stale
			t.Logf("stale Start A ended: %v", <-aDone)
			if code := sessionOK(id, tokenB); code != 200 {
				t.Errorf("B's pod's token after the stale Start A woke: %d, want 200 (A replaced or closed B's session)", code)
			}
			cancel()
			waitTimeout(t, hb, 3*time.Minute)
			if code := sessionOK(id, tokenB); code != 401 {
				t.Errorf("B's token after B's Job ended: %d, want 401", code)
			}
			select {
			case <-aEnded:
			case <-time.After(3 * time.Minute):
				t.Error("the stale Start A's handle did not end after the dispatch's context was cancelled")
			}
		})
	}
}

// TestRedTeam4_StaleStartDoesNotAdoptTheWinnersSecret: finding C's rule is that a Start
// changes only objects it made, by uid. Its owner patch of the Secret carried none: Start A
// (its claim replaced while it was frozen before creating its Job) woke, created its Job,
// and patched the Secret of the dispatch's name, by then Start B's, to be owned by A's Job;
// A's policy patch then failed (A's claim is gone), A deleted its Job, and the garbage
// collector deleted B's Secret with it: B's pod lost its token before it started.
func TestRedTeam4_StaleStartDoesNotAdoptTheWinnersSecret(t *testing.T) {
	defer func(d time.Duration) { claimWait = d }(claimWait)
	claimWait = time.Second
	_, cluster := clusterProvider(t, &fakeExporter{})
	kc := kubeconfigOf{cluster.Kubeconfig, cluster.Namespace}
	createsJob := func(r *http.Request) bool { return r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/jobs") }
	pa, stallA := stalledProvider(t, kc, &fakeExporter{}, createsJob, false)
	pb, stallB := stalledProvider(t, kc, &fakeExporter{}, createsJob, false)
	pa.testOnlyPodMeta = failWith(0, "1h")
	pb.testOnlyPodMeta = pa.testOnlyPodMeta
	id := clusterID("RT4SECRET")
	name := objectName(id)
	s := testSpec(id)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	aDone := make(chan error, 1)
	go func() {
		h, err := pa.Start(ctx, s)
		if err == nil {
			go h.Wait()
		}
		aDone <- err
	}()
	<-stallA.held // A has its claim and its Secret, and froze before its Job
	bDone := make(chan error, 1)
	var hb compute.Handle
	go func() {
		var err error
		hb, err = pb.Start(ctx, s)
		bDone <- err
	}()
	<-stallB.held // B replaced A's claim, made its own Secret, and is about to make its Job
	secB, err := pb.client.CoreV1().Secrets(pb.ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	close(stallA.gate)
	t.Logf("stale Start A ended: %v", <-aDone)
	// A's Job, if it made one, is deleted in the foreground: its dependents go before it.
	agoratest.WaitFor(t, 10*time.Second, "A's Job to be gone", func() bool {
		_, err := pa.client.BatchV1().Jobs(pa.ns).Get(t.Context(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	sec, err := pb.client.CoreV1().Secrets(pb.ns).Get(t.Context(), name, metav1.GetOptions{})
	switch {
	case err != nil:
		t.Errorf("B's Secret after the stale Start A woke: %v (A re-owned it to its doomed Job)", err)
	case sec.UID != secB.UID:
		t.Errorf("the Secret is not B's any more")
	case len(sec.OwnerReferences) != 1 || sec.OwnerReferences[0].Kind != "NetworkPolicy":
		t.Errorf("B's Secret's owners %+v, want B's claim only", sec.OwnerReferences)
	}
	close(stallB.gate)
	if err := <-bDone; err != nil {
		t.Errorf("Start B after A woke: %v", err)
	} else {
		cancel()
		waitTimeout(t, hb, 3*time.Minute)
	}
}
