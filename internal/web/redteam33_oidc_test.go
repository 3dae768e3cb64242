package web

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/oidcauth"
	"github.com/agora-dev/agora/internal/oidcauth/oidctest"
)

// fromAddr is a browser whose connections leave from the loopback address local (another
// source than 127.0.0.1 to the server), not following redirects.
func fromAddr(t *testing.T, local string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Jar: jar, Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// TestRedTeam33_OIDCFlowFlood: an unauthenticated client starts maxFlows sign-ins it never
// finishes (GET /oidc/login needs no credential). Before the fix the table of pending flows
// dropped its oldest, so every other person's sign-in under way (here one who has already
// passed the provider's login page) came back to "unknown, already used or expired": one
// client could keep everyone from signing in. Failed before: "the victim's callback: 400
// ... This sign-in is unknown, already used or expired". Now a full table drops the oldest
// flow of the source holding the most, so a flood drops only the flooder's.
func TestRedTeam33_OIDCFlowFlood(t *testing.T) {
	o := startOIDC(t, "readers")
	victim := browserClient()
	cb := o.toCallback(t, victim, oidctest.User1, "")

	attacker := fromAddr(t, "127.0.0.2")
	var last string
	for i := range maxFlows + 8 {
		a := get(t, attacker, o.base+"/oidc/login")
		if a.status != http.StatusSeeOther {
			t.Fatalf("flood request %d: %d %s", i, a.status, a.body)
		}
		last = a.loc
	}
	if a := get(t, victim, cb); a.status != http.StatusOK || !strings.Contains(a.body, `content="0;url=/runs"`) {
		t.Fatalf("the victim's callback after another source started %d sign-ins: %d %s", maxFlows+8, a.status, a.body)
	}
	if a := get(t, victim, o.base+"/api/runs"); a.status != http.StatusOK {
		t.Fatalf("the victim has no session: %d", a.status)
	}
	// The flooder's own newest flow still signs in: the bound drops its oldest, not its newest.
	loc, err := o.p.SignIn(attacker, last, oidctest.User2)
	if err != nil {
		t.Fatal(err)
	}
	if a := get(t, attacker, loc); a.status != http.StatusOK {
		t.Fatalf("the flooder's newest sign-in: %d %s", a.status, a.body)
	}
	o.srv.flows.mu.Lock()
	n, mine := len(o.srv.flows.m), o.srv.flows.bySrc[sourceOf("127.0.0.2:1")]
	o.srv.flows.mu.Unlock()
	if n > maxFlows || mine != n {
		t.Fatalf("%d flows pending, %d of the flooder's: want at most %d, all the flooder's", n, mine, maxFlows)
	}
}

// syncBuf is a log sink the server writes from its handlers' goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestRedTeam33_OIDCSecretAndSignOut: the client secret is never in a page or a log line
// whatever the sign-in's fate (signed in, refused for no rule, a refused code, a provider
// error); a signed-out session's cookie, kept by a thief, opens nothing; a session of one
// subject cannot act with another's CSRF token after the other signed out; the operator's
// action is recorded with the issuer and subject it signed in as.
func TestRedTeam33_OIDCSecretAndSignOut(t *testing.T) {
	o := startOIDC(t, "marketing")
	logs := &syncBuf{}
	o.srv.log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var pages []string
	keep := func(a answerT) answerT { pages = append(pages, a.body); return a }

	// Signed in, then signed out; the cookie replayed from another jar.
	c, csrf := o.signIn(t, oidctest.User1)
	keep(get(t, c, o.base+"/runs"))
	if a := keep(postForm(t, c, o.base+"/runs/run1/cancel", url.Values{"csrf": {csrf}})); a.status >= 400 {
		t.Fatalf("the operator's cancel: %d %s", a.status, a.body)
	}
	if len(o.orch.actions) != 1 || o.orch.actions[0].Actor != "web:"+oidcauth.Actor(o.p.Issuer, oidctest.User1) {
		t.Fatalf("the operator's action: %+v", o.orch.actions)
	}
	cookies := c.Jar.Cookies(mustURL(o.base + "/"))
	if a := postForm(t, c, o.base+"/logout", url.Values{"csrf": {csrf}}); a.status != http.StatusSeeOther {
		t.Fatalf("sign-out: %d %s", a.status, a.body)
	}
	thief := browserClient()
	thief.Jar.SetCookies(mustURL(o.base+"/"), cookies)
	if len(cookies) == 0 {
		t.Fatal("no session cookie was kept")
	}
	if a := get(t, thief, o.base+"/api/runs"); a.status != http.StatusUnauthorized {
		t.Fatalf("a signed-out session's cookie: %d", a.status)
	}
	if a := postForm(t, thief, o.base+"/runs/run1/cancel", url.Values{"csrf": {csrf}}); a.status != http.StatusUnauthorized {
		t.Fatalf("a signed-out session's cookie and CSRF token: %d", a.status)
	}
	// user2 is in no rule's group here: refused with a page naming it.
	c2 := browserClient()
	if a := keep(get(t, c2, o.toCallback(t, c2, oidctest.User2, "/runs"))); a.status != http.StatusForbidden || !strings.Contains(a.body, "no rule") {
		t.Fatalf("a subject with no rule: %d %s", a.status, a.body)
	}
	for _, p := range []string{"/api/runs", "/runs", "/runs/run1", "/api/dispatches/d1"} {
		if a := get(t, c2, o.base+p); a.status != http.StatusUnauthorized {
			t.Fatalf("a subject with no rule reached %s: %d", p, a.status)
		}
	}
	if a := postForm(t, c2, o.base+"/runs/run1/cancel", url.Values{"csrf": {csrf}}); a.status != http.StatusUnauthorized {
		t.Fatalf("a subject with no rule posted a cancel: %d", a.status)
	}
	// A refused code and a provider error.
	c3 := browserClient()
	cb := o.toCallback(t, c3, oidctest.User1, "")
	keep(get(t, c3, swapCode(t, cb, cb+"x")))
	c4 := browserClient()
	cb4, _ := url.Parse(o.toCallback(t, c4, oidctest.User1, ""))
	q := cb4.Query()
	q.Del("code")
	q.Set("error", "access_denied")
	cb4.RawQuery = q.Encode()
	if a := keep(get(t, c4, cb4.String())); a.status != http.StatusForbidden {
		t.Fatalf("a provider error: %d %s", a.status, a.body)
	}
	keep(get(t, browserClient(), o.base+"/login"))
	if len(o.orch.actions) != 1 {
		t.Fatalf("a refused or signed-out browser reached the engine: %+v", o.orch.actions)
	}
	out := logs.String()
	if !strings.Contains(out, "web sign-in") {
		t.Fatalf("the sign-in was not logged: %s", out)
	}
	for i, p := range append(pages, out) {
		if strings.Contains(p, oidcWebSecret) {
			t.Fatalf("the client secret is in page/log %d: %s", i, p)
		}
	}
}
