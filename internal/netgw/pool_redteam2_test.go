package netgw

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute/remote"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
)

// Enrolment abuse by anyone who reaches the gateway (an agent in a
// cold dispatch's pod does: its policy admits the gateway).

// floodClient is an HTTP client of the gateway whose connections come from loopback address
// src (Linux routes all of 127/8 to lo): the attacker is another source than the pool's pods.
func (g *gw) floodClient(t testing.TB, src string) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(g.ca)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext, TLSClientConfig: &tls.Config{RootCAs: pool}, MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("SKIP: no /proc/self/fd to count descriptors: %v", err)
	}
	return len(ents)
}

// Attack: a flood of enrolments with tokens of a JWT's shape that the apiserver refuses (each
// TokenReview takes it a moment), from as many connections at once as one source may keep pending, for as long as
// a pool pod's init step tries. The pod (another source) must still enrol, through its
// retries of the 429s: a flood that starved it would fail every pool pod's init step, and
// every dispatch would start cold. Once the flood ends the gateway holds no goroutine and no
// descriptor more than before it but
// the enrolled pod's slot's hold.
func TestPool_AttackEnrolFloodStarvesNoPod(t *testing.T) {
	if !strings.HasPrefix(runtime.GOOS, "linux") {
		t.Skip("SKIP: needs Linux's 127/8 loopback to be two sources")
	}
	f := &fakePods{}
	var asked atomic.Int64
	g := withSlots(t, func(s *Server) {
		s.Pods = verifyFunc(func(ctx context.Context, tok string) (remote.PodIdentity, error) {
			asked.Add(1)
			// The apiserver's TokenReview of a token it refuses: a few milliseconds.
			select {
			case <-time.After(3 * time.Millisecond):
			case <-ctx.Done():
			}
			return f.VerifyPod(ctx, tok)
		})
	})
	jwt, id := f.pod(42)
	hc := g.floodClient(t, "127.0.0.2")
	// Warm the gateway up (its first TLS handshakes, its goroutines) before the baseline.
	if code := g.enrollFrom(t, hc, "eyJ.eyJ.warm"); code != http.StatusUnauthorized {
		t.Fatalf("a refused token: %d, want 401", code)
	}
	hc.Transport.(*http.Transport).CloseIdleConnections()
	agoratest.WaitFor(t, 30*time.Second, "the warm-up's connection to leave the gateway", func() bool {
		g.srv.conns.mu.Lock()
		defer g.srv.conns.mu.Unlock()
		return g.srv.conns.order.Len() == 0
	})
	runtime.GC()
	baseG, baseFD := runtime.NumGoroutine(), openFDs(t)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var tooMany atomic.Int64
	for range MaxPendingPerSource {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if g.enrollFrom(t, hc, "eyJhbGciOiJSUzI1NiJ9.eyJmbG9vZCI6MX0.Zmxvb2Q") == http.StatusTooManyRequests {
					tooMany.Add(1)
				}
			}
		})
	}
	for tooMany.Load() == 0 {
		time.Sleep(time.Millisecond) // the flood fills the verifications
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	a, err := workerremote.Enroll(ctx, g.url, g.ca, jwt, nil)
	cancel()
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("the pool pod did not enrol under the flood (%d refused with 429, %d verified): %v", tooMany.Load(), asked.Load(), err)
	}
	t.Logf("flood: %d verified, %d refused with 429", asked.Load(), tooMany.Load())
	hc.Transport.(*http.Transport).CloseIdleConnections()
	settle(t, baseG, baseFD+1) // +1: the pod's slot's hold, held while its worker waits
	s := g.exportBare(t, "01FLOODPOD")
	bound := make(chan error, 1)
	go func() { bound <- g.slots().BindPod(context.Background(), id.UID, s.Dispatch, s.Token) }()
	c, err := workerremote.Claim(context.Background(), g.url, a.Slot, a.Token, g.ca, nil)
	if err != nil {
		t.Fatalf("the pod's worker's claim: %v", err)
	}
	if err := <-bound; err != nil || c.Dispatch() != "01FLOODPOD" {
		t.Fatalf("BindPod = %v; the worker got %q", err, c.Dispatch())
	}
	c.Close()
}

// enrollFrom posts an enrolment with tok through hc and returns the status (0: no answer).
func (g *gw) enrollFrom(t testing.TB, hc *http.Client, tok string) int {
	req, err := http.NewRequest(http.MethodPost, g.url+remote.EnrollRoute, nil)
	if err != nil {
		t.Error(err)
		return 0
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := hc.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// settle waits (a generous bound, not a timing assertion) for the goroutines and descriptors
// to come back to at most baseG and baseFD and returns them.
func settle(t testing.TB, baseG, baseFD int) (int, int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		runtime.GC()
		g, fd := runtime.NumGoroutine(), openFDs(t)
		if g <= baseG && fd <= baseFD {
			return g, fd
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("after the flood: %d goroutines (%d before), %d descriptors (%d before)\n%s",
				g, baseG, fd, baseFD, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(50 * time.Millisecond)
	}
}
