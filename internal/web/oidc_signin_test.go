package web

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/mcpserver"
	"github.com/agora-dev/agora/internal/oidcauth"
	"github.com/agora-dev/agora/internal/oidcauth/oidctest"
	"github.com/agora-dev/agora/internal/orch/api"
)

const (
	oidcWebClient = "agora-web"
	oidcWebSecret = "agora-web-secret-0123456789"
)

// oidcEnv is the run view with the provider's sign-in, the provider, and a clock the test
// moves ahead of the provider's.
type oidcEnv struct {
	env
	p *oidctest.Provider

	mu  sync.Mutex
	off time.Duration
}

func (o *oidcEnv) clock() time.Time { o.mu.Lock(); defer o.mu.Unlock(); return time.Now().Add(o.off) }

func (o *oidcEnv) advance(d time.Duration) { o.mu.Lock(); o.off += d; o.mu.Unlock() }

// startOIDC serves the fake orchestrator's run with the static tokens of startWith and the
// sign-in of a real provider whose user id1 is in group platform (operator) and id2 in
// groups (viewer when groups is "readers", nothing when "marketing").
func startOIDC(t *testing.T, user2Group string) *oidcEnv {
	t.Helper()
	addr := agoratest.FreeAddr(t) // the server binds it after the provider registers its redirect URL
	redirect := "http://" + addr + oidcauth.WebCallbackPath
	p := oidctest.Start(t, oidctest.Config{
		UserGroups:  map[string][]string{oidctest.User1: {"platform"}, oidctest.User2: {user2Group}},
		WebClientID: oidcWebClient, WebSecret: oidcWebSecret, RedirectURI: []string{redirect},
		Services: []oidctest.Service{{ID: "svc-web", Secret: "svc-web-secret", Groups: []string{"platform"}, Audience: []string{oidcWebClient}}},
	})
	t.Cleanup(http.DefaultClient.CloseIdleConnections) // before the provider stops
	o := &oidcEnv{p: p}
	v, err := oidcauth.NewWeb(oidcauth.Config{Issuer: p.Issuer, Audience: "agora-mcp", AllowPrivate: []string{"127.0.0.1/32"},
		Rules: []oidcauth.Rule{{Group: "platform", Ceiling: "orchestrate", Web: "operator"}, {Group: "readers", Web: "viewer"}},
		Web:   oidcauth.WebClient{ClientID: oidcWebClient, RedirectURL: redirect}},
		oidcauth.Options{RefetchEvery: time.Millisecond, Now: o.clock})
	if err != nil {
		t.Fatal(err)
	}
	fo := newFakeOrch(api.Task{ID: "a", State: lifecycle.TaskRunning, Subagent: "coder", DispatchID: "d1", Dispatches: []string{"d1"}})
	now := time.Now()
	src := Sources{Orch: fo, Dispatches: fakeDispatches{map[string]*dispatch.Record{
		"d1": {ID: "d1", State: lifecycle.DispatchStarted, Subagent: "coder", CreatedAt: now, StartedAt: &now}}}}
	src.Runs = fo.store(t)
	srv, err := New(Config{Addr: addr, Now: o.clock, OIDC: &OIDC{Verifier: v, Secret: oidcWebSecret}, Clients: []mcpserver.Client{
		{Name: "alice", Token: opToken, Ceiling: mcpserver.CeilingOrchestrate},
	}}, src)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	srv.cfg.Listening = func(net.Addr) { close(ready) }
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	<-ready
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	o.env = env{base: "http://" + addr, orch: fo, srv: srv}
	return o
}

// browserClient is a browser's cookie jar that does not follow redirects, so each step's
// answer is seen.
func browserClient() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// toCallback signs user in at the provider from c's /oidc/login?next=next and returns the
// callback URL the provider sends c to (not yet followed).
func (o *oidcEnv) toCallback(t *testing.T, c *http.Client, user, next string) string {
	t.Helper()
	start := o.base + "/oidc/login"
	if next != "" {
		start += "?next=" + url.QueryEscape(next)
	}
	loc, err := o.p.SignIn(c, start, user)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(loc, o.base+oidcauth.WebCallbackPath+"?") {
		t.Fatalf("the provider sends the browser to %q", loc)
	}
	return loc
}

type answerT struct {
	status int
	body   string
	loc    string
	resp   *http.Response
}

func get(t *testing.T, c *http.Client, u string) answerT {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return answerT{status: resp.StatusCode, body: string(b), loc: resp.Header.Get("Location"), resp: resp}
}

func postForm(t *testing.T, c *http.Client, u string, form url.Values) answerT {
	t.Helper()
	resp, err := c.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return answerT{status: resp.StatusCode, body: string(b), loc: resp.Header.Get("Location"), resp: resp}
}

// signIn signs user in to completion and returns the browser and its session's CSRF token.
func (o *oidcEnv) signIn(t *testing.T, user string) (*http.Client, string) {
	t.Helper()
	c := browserClient()
	a := get(t, c, o.toCallback(t, c, user, ""))
	if a.status != http.StatusOK || !strings.Contains(a.body, `content="0;url=/runs"`) {
		t.Fatalf("callback: %d: %s", a.status, a.body)
	}
	page := get(t, c, o.base+"/runs")
	if page.status != http.StatusOK {
		t.Fatalf("/runs after sign-in: %d %s", page.status, page.body)
	}
	_, rest, _ := strings.Cut(page.body, `name="csrf" value="`)
	csrf, _, _ := strings.Cut(rest, `"`)
	if csrf == "" {
		t.Fatal("no CSRF token on the page")
	}
	return c, csrf
}

// TestOIDC_SignIn: an operator and a viewer sign in through the real provider's login page;
// the session cookie is HttpOnly and Strict and ends with the ID token; each sees the run view
// with its role's rights (the viewer is refused a cancel, the operator's is recorded as
// web:oidc:ISSUER#sub); sign-out ends the session; the static token keeps working.
func TestOIDC_SignIn(t *testing.T) {
	o := startOIDC(t, "readers")
	page := get(t, http.DefaultClient, o.base+"/login")
	if !strings.Contains(page.body, `id="oidc-login"`) {
		t.Fatalf("the login page offers no sign-in: %s", page.body)
	}

	c := browserClient()
	a := get(t, c, o.toCallback(t, c, oidctest.User1, "/runs/run1"))
	if a.status != http.StatusOK || !strings.Contains(a.body, `content="0;url=/runs/run1"`) {
		t.Fatalf("callback: %d: %s", a.status, a.body)
	}
	var session *http.Cookie
	for _, ck := range a.resp.Cookies() {
		if ck.Name == cookieName {
			session = ck
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.MaxAge <= 0 || session.MaxAge > int(time.Hour.Seconds())+1 {
		t.Fatalf("session cookie %+v: want HttpOnly, Strict, ending with the ID token (1h)", session)
	}
	run := get(t, c, o.base+"/runs/run1")
	actor := "oidc:" + o.p.Issuer + "#id1"
	if run.status != http.StatusOK || !strings.Contains(run.body, actor+" (operator)") || !strings.Contains(run.body, `id="cancel-run"`) {
		t.Fatalf("operator's run page: %d %s", run.status, run.body)
	}
	_, rest, _ := strings.Cut(run.body, `name="csrf" value="`)
	csrf, _, _ := strings.Cut(rest, `"`)
	if a := postForm(t, c, o.base+"/runs/run1/cancel", url.Values{"csrf": {csrf}}); a.status != http.StatusSeeOther {
		t.Fatalf("operator's cancel: %d %s", a.status, a.body)
	}
	if len(o.orch.actions) != 1 || o.orch.actions[0].Actor != "web:"+actor {
		t.Fatalf("recorded actions %+v, want one by web:%s", o.orch.actions, actor)
	}

	viewer, vcsrf := o.signIn(t, oidctest.User2)
	vrun := get(t, viewer, o.base+"/runs/run1")
	if !strings.Contains(vrun.body, "#id2 (read only)") || strings.Contains(vrun.body, `id="cancel-run"`) {
		t.Fatalf("viewer's run page: %s", vrun.body)
	}
	if a := postForm(t, viewer, o.base+"/runs/run1/cancel", url.Values{"csrf": {vcsrf}}); a.status != http.StatusForbidden || !strings.Contains(a.body, "may read but not act") {
		t.Fatalf("viewer's cancel: %d %s", a.status, a.body)
	}
	if len(o.orch.actions) != 1 {
		t.Fatalf("a viewer's cancel reached the engine: %+v", o.orch.actions)
	}

	if a := postForm(t, c, o.base+"/logout", url.Values{"csrf": {csrf}}); a.status != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", a.status)
	}
	c.Jar.SetCookies(mustURL(o.base), []*http.Cookie{session}) // the old cookie, kept by an attacker
	if a := get(t, c, o.base+"/api/runs"); a.status != http.StatusUnauthorized {
		t.Fatalf("a signed-out session still reads: %d", a.status)
	}
	if a := get(t, viewer, o.base+"/api/runs"); a.status != http.StatusOK {
		t.Fatalf("signing one out ended another: %d", a.status)
	}
	req, _ := http.NewRequest(http.MethodGet, o.base+"/api/runs", nil)
	req.Header.Set("Authorization", "Bearer "+opToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the static token beside the provider: %d", resp.StatusCode)
	}
}

func mustURL(s string) *url.URL { u, _ := url.Parse(s); return u }

// TestOIDC_NoMatchingRule: an account the provider signs in but no rule gives a web role is
// refused with a page saying so, and gets no session.
func TestOIDC_NoMatchingRule(t *testing.T) {
	o := startOIDC(t, "marketing")
	c := browserClient()
	a := get(t, c, o.toCallback(t, c, oidctest.User2, ""))
	if a.status != http.StatusForbidden || !strings.Contains(a.body, "no rule of this agora") || !strings.Contains(a.body, "id2") {
		t.Fatalf("no matching rule: %d %s", a.status, a.body)
	}
	for _, ck := range a.resp.Cookies() {
		if ck.Name == cookieName && ck.Value != "" {
			t.Fatalf("a refused account got a session cookie")
		}
	}
	if a := get(t, c, o.base+"/api/runs"); a.status != http.StatusUnauthorized {
		t.Fatalf("refused account reads: %d", a.status)
	}
}

// TestOIDC_RotatedKeyAndExpiry: after the provider rotates its key (the old one unpublished)
// the next sign-in verifies with the new one; a session ends when its ID token does; an ID
// token already expired when it reaches the callback opens none.
func TestOIDC_RotatedKeyAndExpiry(t *testing.T) {
	o := startOIDC(t, "readers")
	c, _ := o.signIn(t, oidctest.User1)
	o.p.Rotate(t, true)
	c2, _ := o.signIn(t, oidctest.User1)

	o.advance(time.Hour + time.Minute) // the ID tokens' hour and the verifier's skew
	for _, b := range []*http.Client{c, c2} {
		if a := get(t, b, o.base+"/api/runs"); a.status != http.StatusUnauthorized {
			t.Fatalf("a session outlived its ID token: %d", a.status)
		}
	}
	// The provider issues tokens by its own clock: one issued now ends an hour from now,
	// a minute before this server's clock, so it is expired at its callback (the flow,
	// started by this server's clock, is still pending).
	c3 := browserClient()
	cb := o.toCallback(t, c3, oidctest.User1, "")
	if a := get(t, c3, cb); a.status != http.StatusUnauthorized || !strings.Contains(a.body, "expired") {
		t.Fatalf("an expired ID token at the callback: %d %s", a.status, a.body)
	}
}

// TestOIDC_Attacks are the sign-in attacks: a forged state, a replayed callback and code, a
// code injected into another browser's flow (PKCE), a callback delivered to another browser
// (login CSRF), an open redirect in the return URL, another session's cookie with this
// one's CSRF token, and CSRF on sign-out and on an action.
func TestOIDC_Attacks(t *testing.T) {
	o := startOIDC(t, "readers")
	noSession := func(t *testing.T, c *http.Client) {
		t.Helper()
		if a := get(t, c, o.base+"/api/runs"); a.status != http.StatusUnauthorized {
			t.Fatalf("the attack opened a session: %d", a.status)
		}
	}

	t.Run("forged state", func(t *testing.T) {
		c := browserClient()
		cb, _ := url.Parse(o.toCallback(t, c, oidctest.User1, ""))
		q := cb.Query()
		q.Set("state", "forged-"+q.Get("state"))
		cb.RawQuery = q.Encode()
		if a := get(t, c, cb.String()); a.status != http.StatusBadRequest {
			t.Fatalf("forged state: %d %s", a.status, a.body)
		}
		noSession(t, c)
		if a := get(t, c, o.base+oidcauth.WebCallbackPath+"?code=x"); a.status != http.StatusBadRequest {
			t.Fatalf("no state: %d", a.status)
		}
	})

	t.Run("replayed callback and code", func(t *testing.T) {
		c := browserClient()
		cb := o.toCallback(t, c, oidctest.User1, "")
		bind := c.Jar.Cookies(mustURL(o.base + oidcauth.WebCallbackPath))
		if a := get(t, c, cb); a.status != http.StatusOK {
			t.Fatalf("first use: %d %s", a.status, a.body)
		}
		// The same URL again, with the flow cookie restored: the state is spent.
		thief := browserClient()
		thief.Jar.SetCookies(mustURL(o.base+oidcauth.WebCallbackPath), bind)
		if a := get(t, thief, cb); a.status != http.StatusBadRequest {
			t.Fatalf("replayed callback: %d %s", a.status, a.body)
		}
		noSession(t, thief)
		// The spent code in a fresh flow of the thief's: the provider refuses it.
		own := o.toCallback(t, thief, oidctest.User2, "")
		u := swapCode(t, own, cb)
		if a := get(t, thief, u); a.status != http.StatusUnauthorized || !strings.Contains(a.body, "refused the code") {
			t.Fatalf("replayed code: %d %s", a.status, a.body)
		}
		noSession(t, thief)
	})

	t.Run("a code injected into another flow (PKCE)", func(t *testing.T) {
		victim, attacker := browserClient(), browserClient()
		stolen := o.toCallback(t, victim, oidctest.User1, "") // never delivered to the victim's server
		own := o.toCallback(t, attacker, oidctest.User2, "")
		if a := get(t, attacker, swapCode(t, own, stolen)); a.status != http.StatusUnauthorized || !strings.Contains(a.body, "refused the code") {
			t.Fatalf("injected code: %d %s", a.status, a.body)
		}
		noSession(t, attacker)
	})

	t.Run("a callback delivered to another browser (login CSRF)", func(t *testing.T) {
		attacker := browserClient()
		cb := o.toCallback(t, attacker, oidctest.User2, "")
		victim := browserClient()
		if a := get(t, victim, cb); a.status != http.StatusBadRequest || !strings.Contains(a.body, "another browser") {
			t.Fatalf("a callback in another browser: %d %s", a.status, a.body)
		}
		noSession(t, victim)
		// The victim's own pending flow does not make it pass either.
		victim2 := browserClient()
		o.toCallback(t, victim2, oidctest.User1, "")
		cb2 := o.toCallback(t, attacker, oidctest.User2, "")
		if a := get(t, victim2, cb2); a.status != http.StatusBadRequest {
			t.Fatalf("a callback in a browser with a flow of its own: %d %s", a.status, a.body)
		}
		noSession(t, victim2)
	})

	t.Run("open redirect in the return URL", func(t *testing.T) {
		for _, next := range []string{"//evil.example/x", "https://evil.example/", "/\\evil.example", "/%2F%2Fevil.example", "javascript:alert(1)"} {
			c := browserClient()
			a := get(t, c, o.toCallback(t, c, oidctest.User1, next))
			if a.status != http.StatusOK || !strings.Contains(a.body, `content="0;url=/runs"`) || strings.Contains(a.body, "evil") || strings.Contains(a.body, "javascript") {
				t.Fatalf("next %q: %d %s", next, a.status, a.body)
			}
		}
	})

	t.Run("another session's cookie with this one's CSRF token", func(t *testing.T) {
		a, acsrf := o.signIn(t, oidctest.User1)
		b, _ := o.signIn(t, oidctest.User1) // the same person, another browser
		if r := postForm(t, b, o.base+"/runs/run1/cancel", url.Values{"csrf": {acsrf}}); r.status != http.StatusForbidden {
			t.Fatalf("b's cookie with a's CSRF token: %d %s", r.status, r.body)
		}
		if r := postForm(t, a, o.base+"/runs/run1/cancel", url.Values{}); r.status != http.StatusForbidden {
			t.Fatalf("an action without a CSRF token: %d", r.status)
		}
		if r := postForm(t, a, o.base+"/logout", url.Values{}); r.status != http.StatusForbidden {
			t.Fatalf("sign-out without a CSRF token: %d", r.status)
		}
		if r := get(t, a, o.base+"/api/runs"); r.status != http.StatusOK {
			t.Fatalf("a forged sign-out ended the session: %d", r.status)
		}
		if r := postForm(t, a, o.base+"/logout", url.Values{"csrf": {"x" + acsrf}}); r.status != http.StatusForbidden {
			t.Fatalf("sign-out with a wrong CSRF token: %d", r.status)
		}
	})
	t.Run("the Origin check opens for the callback's navigation only", func(t *testing.T) {
		// The provider's site sends the browser back: a cross-site GET navigation, let in.
		c := browserClient()
		cb := o.toCallback(t, c, oidctest.User1, "")
		req, _ := http.NewRequest(http.MethodGet, cb, nil)
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		req.Header.Set("Sec-Fetch-Mode", "navigate")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the provider's cross-site navigation to the callback: %d", resp.StatusCode)
		}
		// Anything else cross-site stays refused: a fetch of the callback, a POST to it, a
		// cross-site navigation elsewhere, even with the session just made.
		for _, tc := range []struct{ method, path, mode, origin string }{
			{"GET", oidcauth.WebCallbackPath, "cors", ""},
			{"GET", oidcauth.WebCallbackPath, "navigate", "https://evil.example"},
			{"POST", oidcauth.WebCallbackPath, "navigate", ""},
			{"GET", "/runs", "navigate", ""},
			{"POST", "/runs/run1/cancel", "navigate", ""},
		} {
			req, _ := http.NewRequest(tc.method, o.base+tc.path, nil)
			req.Header.Set("Sec-Fetch-Site", "cross-site")
			req.Header.Set("Sec-Fetch-Mode", tc.mode)
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("cross-site %s %s (%s, origin %q): %d, want 403", tc.method, tc.path, tc.mode, tc.origin, resp.StatusCode)
			}
		}
	})
	if len(o.orch.actions) != 0 {
		t.Fatalf("an attack reached the engine: %+v", o.orch.actions)
	}
}

// swapCode is own (a callback URL of the attacker's flow) carrying the code of other.
func swapCode(t *testing.T, own, other string) string {
	t.Helper()
	u, _ := url.Parse(own)
	o, _ := url.Parse(other)
	q := u.Query()
	q.Set("code", o.Query().Get("code"))
	u.RawQuery = q.Encode()
	return u.String()
}
