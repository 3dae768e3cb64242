package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var loopback = netip.MustParseAddr("127.0.0.1")

// fakeResolver answers lookups from a table and counts them. answers[host][i] is the answer to
// the i-th lookup of host; the last answer repeats. Unknown hosts fail like NXDOMAIN.
type fakeResolver struct {
	answers map[string][][]netip.Addr

	mu    sync.Mutex
	calls map[string]int
}

func newFakeResolver(answers map[string][][]netip.Addr) *fakeResolver {
	return &fakeResolver{answers: answers, calls: map[string]int{}}
}

var errNoSuchHost = errors.New("no such host")

func (r *fakeResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.calls[host]
	r.calls[host]++
	list, ok := r.answers[host]
	if !ok || len(list) == 0 {
		return nil, fmt.Errorf("lookup %s: %w", host, errNoSuchHost)
	}
	return list[min(n, len(list)-1)], nil
}

func (r *fakeResolver) callsTo(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[host]
}

// resolverFunc adapts a function to [Resolver].
type resolverFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

func (f resolverFunc) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return f(ctx, network, host)
}

// noResolver fails the test if a lookup happens.
func noResolver(t testing.TB) Resolver {
	return resolverFunc(func(_ context.Context, _, host string) ([]netip.Addr, error) {
		t.Errorf("unexpected lookup of %q", host)
		return nil, errNoSuchHost
	})
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

var errNotDialed = errors.New("test dialer: only 127.0.0.1 is really dialed")

// dialLog records every literal address a Dialer tried to connect to.
type dialLog struct {
	mu    sync.Mutex
	addrs []string
}

func (l *dialLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.addrs...)
}

// newTestDialer builds a Dialer whose connects are recorded and which really connects only to
// 127.0.0.1: any other vetted address is recorded and answered with errNotDialed, so tests
// never send traffic anywhere else.
func newTestDialer(t testing.TB, p Policy, r Resolver) (*Dialer, *dialLog) {
	t.Helper()
	d := NewDialer(p, r)
	log := &dialLog{}
	real := d.dial
	d.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		log.mu.Lock()
		log.addrs = append(log.addrs, addr)
		log.mu.Unlock()
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			t.Errorf("dial handed %q, want a literal ip:port", addr)
			return nil, errNotDialed
		}
		if ap.Addr() != loopback {
			return nil, errNotDialed
		}
		return real(ctx, network, addr)
	}
	return d, log
}

// countingServer is an httptest server on 127.0.0.1 that counts requests and records the Host
// header of the last one.
type countingServer struct {
	*httptest.Server
	hits     atomic.Int64
	lastHost atomic.Value
}

func newCountingServer(t testing.TB, h http.HandlerFunc) *countingServer {
	t.Helper()
	s := &countingServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.lastHost.Store(r.Host)
		if h != nil {
			h(w, r)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *countingServer) port() uint16 {
	return netip.MustParseAddrPort(s.Listener.Addr().String()).Port()
}

// get performs a GET with c and closes the body; it returns the status code.
func get(t testing.TB, c *http.Client, url string) (int, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatalf("new request %s: %v", url, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// wantDenied fails unless err is a *DeniedError (matching ErrDenied) whose reason contains
// reason and, when addr is not empty, whose Addr is addr.
func wantDenied(t testing.TB, err error, reason, addr string) *DeniedError {
	t.Helper()
	if !errors.Is(err, ErrDenied) {
		t.Fatalf("got error %v, want one matching ErrDenied", err)
	}
	var de *DeniedError
	if !errors.As(err, &de) {
		t.Fatalf("got error %T %v, want a *DeniedError", err, err)
	}
	if !strings.Contains(de.Reason, reason) {
		t.Errorf("got reason %q, want it to contain %q", de.Reason, reason)
	}
	if addr != "" && de.Addr != netip.MustParseAddr(addr) {
		t.Errorf("got denied address %v, want %s", de.Addr, addr)
	}
	return de
}
