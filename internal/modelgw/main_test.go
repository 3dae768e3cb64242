package modelgw

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/egress"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	testKey        = "sk-test-0123456789abcdefSECRETKEY"
	testDispatchID = "01JTESTDISPATCH0000000000"
	testRole       = "reviewer@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// testHosts resolves the test names; every other name fails like NXDOMAIN.
var testHosts = map[string]string{
	"model.test":    "127.0.0.1",
	"granted.test":  "127.0.0.1",
	"evil.test":     "127.0.0.1",
	"sub.docs.test": "127.0.0.1",
	"docs.test":     "127.0.0.1",
	"learn.test":    "127.0.0.1", // a learn host (fetchlearn_test.go)
	"internal.test": "10.0.0.1",
}

type mapResolver map[string]string

func (m mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if ip, ok := m[host]; ok {
		return []netip.Addr{netip.MustParseAddr(ip)}, nil
	}
	return nil, fmt.Errorf("lookup %s: no such host", host)
}

// loopbackDialer may dial 127.0.0.1, where the httptest upstreams listen.
func loopbackDialer() *egress.Dialer {
	return egress.NewDialer(egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, mapResolver(testHosts))
}

// defaultDialer has the default policy: no private or loopback address.
func defaultDialer() *egress.Dialer {
	return egress.NewDialer(egress.Policy{}, mapResolver(testHosts))
}

// recorded is one audit record.
type recorded struct {
	kind    string
	details map[string]any
}

// fakeAuditor records every entry in memory.
type fakeAuditor struct {
	mu      sync.Mutex
	entries []recorded
	// fail makes Record keep nothing and return an error, like a database that is down.
	fail atomic.Bool
}

func (a *fakeAuditor) Record(ctx context.Context, kind string, details map[string]any) error {
	if ctx.Err() != nil {
		panic("audit record handed a cancelled context")
	}
	if a.fail.Load() {
		return errors.New("audit log unavailable")
	}
	c := make(map[string]any, len(details))
	for k, v := range details {
		c[k] = v
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.entries = append(a.entries, recorded{kind, c})
	return nil
}

func (a *fakeAuditor) all() []recorded {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]recorded(nil), a.entries...)
}

func (a *fakeAuditor) ofKind(kind string) []map[string]any {
	var out []map[string]any
	for _, e := range a.all() {
		if e.kind == kind {
			out = append(out, e.details)
		}
	}
	return out
}

// waitGateway waits (briefly) for n entry.ToolGateway records: the record is written after the
// handler returns, which may be just after the client has read the response.
func (a *fakeAuditor) waitGateway(t testing.TB, n int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := a.ofKind(entry.ToolGateway)
		if len(got) >= n || time.Now().After(deadline) {
			if len(got) != n {
				t.Fatalf("got %d %s records, want %d: %v", len(got), entry.ToolGateway, n, got)
			}
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lastGateway waits for n gateway records and returns the last one.
func (a *fakeAuditor) lastGateway(t testing.TB, n int) map[string]any {
	t.Helper()
	got := a.waitGateway(t, n)
	return got[len(got)-1]
}

// wantRecord checks the fields of a gateway record that every test cares about.
func wantRecord(t testing.TB, rec map[string]any, route, decision string, status int, reason string) {
	t.Helper()
	if rec["dispatch"] != testDispatchID || rec["role"] != testRole {
		t.Errorf("record names dispatch %v role %v, want %s %s", rec["dispatch"], rec["role"], testDispatchID, testRole)
	}
	if rec["route"] != route || rec["decision"] != decision || rec["status"] != status {
		t.Errorf("got record route=%v decision=%v status=%v, want %s %s %d (record %v)",
			rec["route"], rec["decision"], rec["status"], route, decision, status, rec)
	}
	if r, _ := rec["reason"].(string); !strings.Contains(r, reason) {
		t.Errorf("got record reason %q, want it to contain %q", r, reason)
	}
	for _, k := range []string{"method", "host", "path", "bytes_in", "bytes_out", "duration_ms"} {
		if _, ok := rec[k]; !ok {
			t.Errorf("record has no %q: %v", k, rec)
		}
	}
}

// wantRefused waits until n refusals of route with status are counted, flushing the counts
// to the audit log as it goes (the count follows the answer), and checks that none of them
// has an entry of its own.
func wantRefused(t testing.TB, h *harness, route string, status, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var got int64
	for {
		h.gw.flushRefusals(t.Context(), false)
		got = 0
		for _, d := range h.audit.ofKind(entry.ToolGatewayRefused) {
			if d["route"] == route && d["status"] == status {
				got += d["count"].(int64)
			}
		}
		if got >= int64(n) || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got != int64(n) {
		t.Errorf("got %d %s refusals of %s counted, want %d", got, http.StatusText(status), route, n)
	}
	for _, d := range h.audit.ofKind(entry.ToolGateway) {
		if d["route"] == route && d["status"] == status {
			t.Errorf("a counted refusal has its own entry: %v", d)
		}
	}
}

// shortDir is a temporary directory with a short path (Unix socket paths are limited).
func shortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "gw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// harness is a running gateway with a sandbox-side client.
type harness struct {
	gw     *Gateway
	audit  *fakeAuditor
	sock   string
	client *http.Client
}

// start fills the required fields cfg leaves empty (dispatch, role, a loopback-allowing
// dialer, an auditor) and listens on a fresh socket.
func start(t testing.TB, cfg Config) *harness {
	t.Helper()
	if cfg.DispatchID == "" {
		cfg.DispatchID = testDispatchID
	}
	if cfg.Role == "" {
		cfg.Role = testRole
	}
	if cfg.Dialer == nil {
		cfg.Dialer = loopbackDialer()
	}
	a, _ := cfg.Audit.(*fakeAuditor)
	if cfg.Audit == nil {
		a = &fakeAuditor{}
		cfg.Audit = a
	}
	sock := filepath.Join(shortDir(t), "gw.sock")
	gw, err := Listen(context.Background(), sock, cfg)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(func() {
		if err := gw.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &harness{gw: gw, audit: a, sock: sock, client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// do sends a request from the sandbox side and returns the status and the whole body.
func (h *harness) do(t testing.TB, method, path string, hdr http.Header, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://gateway"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp, b
}

// fetch posts a /fetch body and decodes a 200 reply.
func (h *harness) fetch(t testing.TB, body string) (int, fetchReply, string) {
	t.Helper()
	resp, b := h.do(t, http.MethodPost, "/fetch", http.Header{"Content-Type": {"application/json"}}, body)
	var reply fetchReply
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &reply); err != nil {
			t.Fatalf("decode fetch reply %q: %v", b, err)
		}
		return resp.StatusCode, reply, ""
	}
	return resp.StatusCode, reply, errorOf(t, b)
}

// errorOf decodes a {"error": "..."} body.
func errorOf(t testing.TB, b []byte) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Error == "" {
		t.Fatalf("got body %q, want a JSON error", b)
	}
	return e.Error
}

// raw sends req (a whole HTTP/1.1 request) on a fresh connection and returns every byte the
// gateway answers until it closes the connection.
func (h *harness) raw(t testing.TB, req string) []byte {
	t.Helper()
	conn, err := net.Dial("unix", h.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("read raw response: %v", err)
	}
	return b
}

// upstream is an httptest server on 127.0.0.1 that counts its requests.
type upstream struct {
	*httptest.Server
	hits atomic.Int64
}

func newUpstream(t testing.TB, h http.HandlerFunc) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

// at returns the upstream's base URL with its address replaced by host.
func (u *upstream) at(host string) string {
	p, err := url.Parse(u.URL)
	if err != nil {
		panic(err)
	}
	return "http://" + host + ":" + p.Port()
}

// keyForms are encodings of testKey that must never reach the sandbox or the audit log.
func keyForms() []string {
	k := []byte(testKey)
	return []string{
		testKey,
		base64.StdEncoding.EncodeToString(k),
		base64.RawURLEncoding.EncodeToString(k),
		hex.EncodeToString(k),
		url.QueryEscape(testKey),
	}
}

// wantNoKey fails if any form of testKey occurs in b.
func wantNoKey(t testing.TB, what string, b []byte) {
	t.Helper()
	for _, f := range keyForms() {
		if bytes.Contains(b, []byte(f)) {
			t.Errorf("%s contains the API key (form %.12q...)", what, f)
		}
	}
}

// wantNoKeyInAudit scans every recorded detail of every entry.
func wantNoKeyInAudit(t testing.TB, a *fakeAuditor) {
	t.Helper()
	for _, e := range a.all() {
		b, err := json.Marshal(e.details)
		if err != nil {
			t.Fatal(err)
		}
		wantNoKey(t, "audit record "+e.kind, b)
		wantNoKey(t, "audit record "+e.kind, []byte(fmt.Sprint(e.details)))
	}
}
