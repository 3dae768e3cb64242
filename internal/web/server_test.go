package web

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/mcpserver"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/plan"
)

const (
	opToken   = "op-token-0123456789abcdef0123456789abcdef"
	readToken = "rd-token-0123456789abcdef0123456789abcdef"
)

type env struct {
	base string
	orch *fakeOrch
	srv  *Server
}

func start(t *testing.T, opts ...func(*Config)) env {
	t.Helper()
	o := newFakeOrch(api.Task{ID: "a", State: lifecycle.TaskRunning, Subagent: "coder", DispatchID: "d1", Dispatches: []string{"d1"}},
		api.Task{ID: "b", State: lifecycle.TaskPending, Subagent: "coder", DependsOn: []string{"a"}, Needs: []string{"a"}, Locks: []string{"repo"}})
	now := time.Now()
	recs := map[string]*dispatch.Record{
		"d1": {ID: "d1", State: lifecycle.DispatchStarted, Subagent: "coder", CreatedAt: now, StartedAt: &now},
		"d2": {ID: "d2", State: lifecycle.DispatchFinished, Subagent: "alone", CreatedAt: now, EndedAt: &now},
	}
	return startWith(t, Sources{Orch: o, Dispatches: fakeDispatches{recs}}, opts...)
}

// startWith serves src (whose Orch is a *fakeOrch) on a loopback port to an operator (alice,
// opToken) and a read-only viewer (bob, readToken). The fake's run is written into a real
// orch.db, read through orch.Reader. opts change the server's Config (its clock).
func startWith(t *testing.T, src Sources, opts ...func(*Config)) env {
	t.Helper()
	if src.Runs == nil {
		src.Runs = src.Orch.(*fakeOrch).store(t)
	}
	addr := agoratest.FreeAddr(t) // Serve binds it: below the ephemeral range, where no port 0 or outgoing connection takes it
	cfg := Config{Addr: addr, Clients: []mcpserver.Client{
		{Name: "alice", Token: opToken, Ceiling: mcpserver.CeilingOrchestrate},
		{Name: "bob", Token: readToken, Ceiling: mcpserver.CeilingRead},
	}}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := New(cfg, src)
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
	return env{base: "http://" + addr, orch: src.Orch.(*fakeOrch), srv: srv}
}

// login returns a client holding the session cookie of token, and the page's CSRF token.
func login(t *testing.T, e env, token string) (*http.Client, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.PostForm(e.base+"/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("login: status %d: %s", resp.StatusCode, body)
	}
	_, rest, _ := strings.Cut(string(body), `name="csrf" value="`)
	csrf, _, _ := strings.Cut(rest, `"`)
	return c, csrf
}

var everyRoute = []struct{ method, path string }{
	{"GET", "/runs"}, {"GET", "/runs/run1"}, {"GET", "/runs/run1/tasks/a"}, {"GET", "/dispatches"},
	{"GET", "/dispatches/d1"}, {"GET", "/catalog"}, {"GET", "/audit"}, {"GET", "/api/runs"}, {"GET", "/api/runs/run1"},
	{"GET", "/api/runs/run1/events"}, {"GET", "/api/dispatches/d1"}, {"GET", "/api/dispatches/d1/tail"}, {"GET", "/static/app.js"},
	{"POST", "/runs/run1/cancel"}, {"POST", "/runs/run1/retry"}, {"POST", "/runs/run1/tasks/a/answer"},
	{"POST", "/dispatches/d1/approvals/c1/approve"}, {"POST", "/logout"},
}

func TestServer_RefusesWithoutLogin(t *testing.T) {
	e := start(t)
	for _, rt := range everyRoute {
		t.Run(rt.method+" "+rt.path, func(t *testing.T) {
			for _, auth := range []string{"", "Bearer wrong-token-0123456789abcdef0123456789", "Basic " + opToken} {
				req, _ := http.NewRequest(rt.method, e.base+rt.path, nil)
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("auth %q: status %d, want 401", auth, resp.StatusCode)
				}
			}
		})
	}
	if len(e.orch.actions) != 0 {
		t.Errorf("actions reached the engine: %v", e.orch.actions)
	}
}

func TestServer_RefusesWrongHostAndCrossOrigin(t *testing.T) {
	e := start(t)
	for _, rt := range append(everyRoute, struct{ method, path string }{"POST", "/login"}, struct{ method, path string }{"GET", "/login"}) {
		for _, tc := range []struct{ name, host, origin, fetch string }{
			{name: "rebound host", host: "evil.example:80"},
			{name: "cross-site origin", origin: "http://evil.example"},
			{name: "null origin", origin: "null"},
			{name: "cross-site fetch", fetch: "cross-site"},
		} {
			req, _ := http.NewRequest(rt.method, e.base+rt.path, strings.NewReader("token="+opToken))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Authorization", "Bearer "+opToken)
			if tc.host != "" {
				req.Host = tc.host
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			if tc.fetch != "" {
				req.Header.Set("Sec-Fetch-Site", tc.fetch)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s %s %s: status %d, want 403", tc.name, rt.method, rt.path, resp.StatusCode)
			}
		}
	}
	if len(e.orch.actions) != 0 {
		t.Errorf("actions reached the engine: %v", e.orch.actions)
	}
}

func TestServer_LoginCookieAndHeaders(t *testing.T) {
	e := start(t)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.PostForm(e.base+"/login", url.Values{"token": {opToken}, "next": {"//evil.example/x"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Location"); got != "/" {
		t.Errorf("redirect after login to %q, want / (an off-site next is dropped)", got)
	}
	sc := resp.Header.Get("Set-Cookie")
	for _, want := range []string{cookieName + "=", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(sc, want) {
			t.Errorf("Set-Cookie %q lacks %q", sc, want)
		}
	}
	if strings.Contains(sc, opToken) {
		t.Error("the cookie carries the token")
	}
	if got := resp.Header.Get("Content-Security-Policy"); !strings.Contains(got, "default-src 'none'") || !strings.Contains(got, "script-src 'self'") {
		t.Errorf("CSP %q", got)
	}
	resp, _ = c.PostForm(e.base+"/login", url.Values{"token": {"not-the-token-0123456789abcdef0123456789"}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Set-Cookie") != "" {
		t.Errorf("wrong token: status %d, cookie %q", resp.StatusCode, resp.Header.Get("Set-Cookie"))
	}
}

func TestServer_Pages(t *testing.T) {
	e := start(t)
	c, _ := login(t, e, readToken)
	for _, tc := range []struct{ path, want string }{
		{"/runs", `href="/runs/run1"`},
		{"/runs?state=failed", "No runs in state failed"},
		{"/runs/run1", `data-task="b"`},
		{"/runs/run1/tasks/a", `data-dispatch="d1"`},
		{"/dispatches", `href="/dispatches/d2"`},
		{"/dispatches/d2", "No patch."},
		{"/catalog", "not available"},
		{"/audit", "not available"},
	} {
		resp, err := c.Get(e.base + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), tc.want) {
			t.Errorf("GET %s: status %d, body lacks %q:\n%.2000s", tc.path, resp.StatusCode, tc.want, b)
		}
		if tc.path == "/dispatches" && strings.Contains(string(b), `href="/dispatches/d1"`) {
			t.Error("a run's dispatch is listed among those not in a run")
		}
	}
}

func TestServer_Actions(t *testing.T) {
	e := start(t)
	reader, rcsrf := login(t, e, readToken)
	resp, _ := reader.PostForm(e.base+"/runs/run1/cancel", url.Values{"csrf": {rcsrf}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a read-only client's cancel: status %d, want 403", resp.StatusCode)
	}
	op, csrf := login(t, e, opToken)
	resp, _ = op.PostForm(e.base+"/runs/run1/cancel", url.Values{"csrf": {"wrong"}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cancel with a wrong CSRF token: status %d, want 403", resp.StatusCode)
	}
	resp, _ = op.PostForm(e.base+"/runs/run1/cancel", url.Values{})
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cancel without a CSRF token: status %d, want 403", resp.StatusCode)
	}
	if len(e.orch.actions) != 0 {
		t.Fatalf("refused actions reached the engine: %v", e.orch.actions)
	}
	resp, _ = op.PostForm(e.base+"/runs/run1/tasks/a/cancel", url.Values{"csrf": {csrf}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel: status %d", resp.StatusCode)
	}
	if len(e.orch.actions) != 1 || e.orch.actions[0].Actor != "web:alice" || e.orch.actions[0].Task != "a" {
		t.Errorf("actions %+v, want one cancel of task a by web:alice", e.orch.actions)
	}
}

func TestServer_RunEventsReachThePage(t *testing.T) {
	e := start(t)
	req, _ := http.NewRequest("GET", e.base+"/api/runs/run1/events?tasks=a,zz", nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	next := func() string {
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(l, "data: ") {
				return l
			}
		}
	}
	if l := next(); !strings.Contains(l, `"counts":{"pending":1,"running":1},"total":2,"tasks":{"a":"running"}`) {
		t.Fatalf("first event %q, want the snapshot with the listed task's state", l)
	}
	// The hub subscribes to the engine as the server starts.
	agoratest.WaitFor(t, 10*time.Second, "the hub's subscription", func() bool {
		e.orch.mu.Lock()
		defer e.orch.mu.Unlock()
		return len(e.orch.subs) > 0
	})
	e.orch.set("a", lifecycle.TaskSucceeded)
	if l := next(); !strings.Contains(l, `{"a":"succeeded"}`) {
		t.Errorf("event %q, want task a succeeded", l)
	}
}

func TestShape_Layers(t *testing.T) {
	g := newShape(orch.RunShape{Tasks: []plan.Outline{{ID: "a"}, {ID: "b", Deps: []string{"a"}}, {ID: "c", Deps: []string{"a", "b"}, Needs: []string{"b"}}, {ID: "d"}}})
	y := map[string]int32{}
	for i, id := range g.ids {
		y[id] = g.y[i]
	}
	if !(y["a"] < y["b"] && y["b"] < y["c"] && y["a"] == y["d"]) {
		t.Errorf("layers by y: %v", y)
	}
	needs := 0
	for _, n := range g.needs {
		if n {
			needs++
		}
	}
	if len(g.deps) != 3 || needs != 1 {
		t.Errorf("edges %d (needs %d), want 3 (1)", len(g.deps), needs)
	}
}
