package cli_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/k8stest"
)

// probe is the kubelet's readiness probe of a gateway: GET /readyz over HTTPS, the certificate
// not checked (as the kubelet does not), given up after timeout. It returns the status, or 0
// when nothing answered in time.
func probe(addr string, timeout time.Duration) int {
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}}
	resp, err := c.Get("https://" + addr + "/readyz")
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// Probe timeouts. A gateway that must answer is given readyWait: the kubelet's 1 s is a
// deployment's setting, and on a loaded machine a -race agora starved of CPU takes longer
// than that for a TLS handshake, which says nothing about whether it is Ready. A stopped
// leader's port is asked with stoppedAsk, so that the asking goes on while it sleeps (no
// answer is one of the two allowed).
const (
	readyWait  = 30 * time.Second
	stoppedAsk = time.Second
)

// TestLeaderLease_OnlyTheLeaderIsReady with the real binary on a real control plane: two
// replicas of `agora orch serve --gateway`, each on its own port. Only the leader's gateway
// answers the readiness probe 200 (the chart's probe: the Service agora-gateway-vip has the
// leader alone as its endpoint); the standby's port refuses, so a Job sent to it reaches
// nothing. The leader is stopped (SIGSTOP) past the lease; the standby takes over and its
// gateway becomes the Ready one. The old leader woken (SIGCONT) is never Ready again and
// serves no session: every request it still answers is 503, never 401 or 200, until it exits
// saying it lost the lease.
func TestLeaderLease_OnlyTheLeaderIsReady(t *testing.T) {
	c := k8stest.Shared(t, k8stest.Options{}).InNewNamespace(t) // the package's one control plane; its leases are named apart
	dir := t.TempDir()
	w := &leaseWorld{t: t, bin: builtAgora(t), dir: dir, cluster: c, lease: fmt.Sprintf("agora-gw-%d", os.Getpid())}
	// Each serve binds its gateway's address itself: below the ephemeral range, no other
	// test's port 0 or outgoing connection takes it first.
	gwA, gwB := agoratest.FreeAddr(t), agoratest.FreeAddr(t)
	for gwB == gwA {
		gwB = agoratest.FreeAddr(t)
	}
	gw := func(a string) string { return fmt.Sprintf("gateway: {listen: %q, advertise: \"https://%s\"}\n", a, a) }
	envA, envB := w.home("a", gw(gwA)), w.home("b", gw(gwB))
	a := w.serveArgs(envA, "--gateway", gwA)
	w.waitLog(a, "gateway serving")
	b := w.serveArgs(envB, "--gateway", gwB)
	w.waitLog(b, "standby: waiting for the leader lease")
	if code := probe(gwA, readyWait); code != http.StatusOK {
		t.Errorf("the leader's readiness probe: %d, want 200", code)
	}
	if code := probe(gwB, readyWait); code != 0 {
		t.Errorf("the standby's gateway answered the probe %d: it must not listen", code)
	}
	if conn, err := net.DialTimeout("tcp", gwB, time.Second); err == nil {
		conn.Close()
		t.Error("the standby accepts connections on its gateway's port: a Job reaching it would reach a serve that commits nothing")
	}

	a.cmd.Process.Signal(syscall.SIGSTOP)
	w.waitLog(b, "gateway serving")
	agoratest.Eventually(t, time.Minute, "the new leader's gateway to be Ready", func() error {
		if code := probe(gwB, readyWait); code != http.StatusOK {
			return fmt.Errorf("readiness %d\n%s", code, b.log())
		}
		return nil
	})
	// The old leader wakes: requests already queued on its port, and new ones, get no session.
	seen := wokenLeaderAnswers(t, gwA, a)
	t.Logf("the woken old leader's answers: %v", seen)
	if !strings.Contains(a.log(), "lost the leader lease") {
		t.Errorf("the old leader did not stop saying it lost the lease:\n%s", a.log())
	}
	if code := probe(gwB, readyWait); code != http.StatusOK {
		t.Errorf("the new leader's readiness after the old one woke: %d", code)
	}
}

// wokenLeaderAnswers queues readiness and session requests on the stopped leader's port gwA,
// wakes it (SIGCONT) and asks on until it exits, failing the test on any answer other than
// 503 or none, and if it has not exited within a bound. It returns how often each answer came.
func wokenLeaderAnswers(t *testing.T, gwA string, a *replica) map[string]int {
	t.Helper()
	type answer struct {
		what string
		code int
	}
	answers := make(chan answer, 64)
	stop := make(chan struct{})
	queued := make(chan struct{}, 1) // a session request's connection in the stopped process's backlog
	session := func() int {
		req, _ := http.NewRequest(http.MethodGet, "https://"+gwA+"/v1/dispatches/01J00000000000000000000000/session", nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{ConnectDone: func(_, _ string, err error) {
			if err == nil {
				select {
				case queued <- struct{}{}:
				default:
				}
			}
		}}))
		req.Header.Set("Authorization", "Bearer agw_"+strings.Repeat("A", 43))
		c := &http.Client{Timeout: 2 * stoppedAsk, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}}
		resp, err := c.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	go func() {
		for {
			select {
			case <-stop:
				close(answers)
				return
			default:
			}
			answers <- answer{"readyz", probe(gwA, stoppedAsk)}
			answers <- answer{"session", session()}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	// Requests wait on the stopped process's port: the kernel took a connection for it.
	select {
	case <-queued:
	case <-time.After(time.Minute):
		t.Fatal("no request reached the stopped leader's port")
	}
	a.cmd.Process.Signal(syscall.SIGCONT)
	exited := make(chan bool, 1)
	go func() {
		defer close(stop)
		select {
		case err := <-a.done:
			a.done <- err
			exited <- true
		case <-time.After(2 * time.Minute): // a bound: a woken leader exits at its first look at the Lease
			exited <- false
		}
	}()
	seen := map[string]int{}
	for ans := range answers {
		seen[fmt.Sprintf("%s %d", ans.what, ans.code)]++
		if ans.code != 0 && ans.code != http.StatusServiceUnavailable {
			t.Errorf("the woken old leader answered %s with %d, want 503 or nothing", ans.what, ans.code)
		}
	}
	if !<-exited {
		t.Errorf("the woken old leader still runs 2m after it woke:\n%s", a.log())
	}
	return seen
}
