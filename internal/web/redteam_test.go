package web

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/hostpath"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// The web view attacked as a hostile page, a hostile network client and a
// hostile agent would.

// TestRedTeamWeb_LoginNextDotSegments: targets that stay paths to a parser that resolves no
// dot segments but could read as a host once "." and ".." are resolved, or once a proxy
// decodes them. Every Location the login sends, resolved as a browser resolves it against
// the login page, is this server.
func TestRedTeamWeb_LoginNextDotSegments(t *testing.T) {
	e := start(t)
	base, _ := url.Parse(e.base + "/login")
	for _, next := range []string{
		"/.//evil.example", "/..//evil.example", "/./..//evil.example/x", "/%2e//evil.example", "/%2e%2e//evil.example",
		"/%2e%2e/%2f%2fevil.example", "/.%2f/evil.example", "/%2e%2f%2fevil.example", "/runs/..//evil.example",
		"/?//evil.example", "/?\\evil.example", "/#//evil.example", "/runs?next=//evil.example",
		"/%u2215%u2215evil.example", "/%C0%AF/evil.example", "/%E2%88%95%E2%88%95evil.example",
		"/ /evil.example", "/\u00a0/evil.example", "/@evil.example", "/:@evil.example", "/evil.example:80@x",
		"/" + strings.Repeat("a", maxNextLen), "/%", "/%%32%46/evil.example",
	} {
		resp := postLogin(t, e.base, url.Values{"token": {opToken}, "next": {next}})
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusSeeOther {
			t.Errorf("next=%q: status %d", next, resp.StatusCode)
			continue
		}
		ref, err := url.Parse(loc)
		if err != nil {
			t.Errorf("next=%q: Location %q does not parse: %v", next, loc, err)
			continue
		}
		got := base.ResolveReference(ref)
		if got.Host != base.Host || got.Scheme != base.Scheme || !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") || strings.ContainsAny(loc, "\\\t\r\n ") {
			t.Errorf("next=%q: Location %q leads to %s", next, loc, got)
		}
	}
}

// TestRedTeamWeb_LoginLimitIgnoresForwardedHeaders: a flood of wrong tokens, each claiming
// another client address in the headers proxies set, is limited by the address it came
// from: no header buys a fresh budget.
func TestRedTeamWeb_LoginLimitIgnoresForwardedHeaders(t *testing.T) {
	e := start(t)
	c := fromSource("127.0.0.5")
	limited := 0
	for i := range 60 {
		req, _ := http.NewRequest("POST", e.base+"/login", strings.NewReader(url.Values{"token": {fmt.Sprintf("wrong-%d-0123456789abcdef0123456789abcdef", i)}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		ip := fmt.Sprintf("10.%d.%d.%d", i/65536%256, i/256%256, i%256)
		req.Header.Set("X-Forwarded-For", ip)
		req.Header.Set("X-Real-IP", ip)
		req.Header.Set("Forwarded", "for="+ip)
		req.Header.Set("True-Client-IP", ip)
		req.Header.Set("CF-Connecting-IP", ip)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited == 0 {
		t.Error("60 wrong tokens from one address, each with another forwarded address, were never limited")
	}
}

// TestRedTeamWeb_LoginSourceVariants: one host's many spellings of itself are one source
// (an IPv6 zone, an IPv4-mapped address, another address of the same /64), and an address
// the server cannot read falls into one shared source, never a fresh one per spelling.
func TestRedTeamWeb_LoginSourceVariants(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"[2001:db8::1]:1", "[2001:db8::2]:2"},
		{"[2001:db8::1%eth0]:1", "[2001:db8::1]:9"},
		{"[fe80::1%eth0]:1", "[fe80::1%eth1]:1"},
		{"[::ffff:127.0.0.1]:1", "127.0.0.1:2"},
		{"[::ffff:7f00:1]:1", "127.0.0.1:2"},
		{"[2001:db8:0:0:ffff:ffff:ffff:ffff]:1", "[2001:db8::]:1"},
		{"garbage", "more garbage"},
		{"", "[nonsense]:1"},
	} {
		if sa, sb := sourceOf(tc.a), sourceOf(tc.b); sa != sb {
			t.Errorf("sourceOf(%q) = %v, sourceOf(%q) = %v: one host, two budgets", tc.a, sa, tc.b, sb)
		}
	}
	if sourceOf("[2001:db8:0:1::1]:1") == sourceOf("[2001:db8:0:2::1]:1") {
		t.Error("two /64s share a budget")
	}
	l := newLoginLimiter()
	for range loginBurst {
		l.failed(netip.MustParseAddr("2001:db8::1"))
	}
	if l.failed(netip.MustParseAddr("2001:db8::ffff:1")) {
		t.Error("another address of the same /64 got a fresh budget")
	}
}

// TestRedTeamWeb_SessionsOfOthersSurvive: a read-only token logging in over and over, and
// logging out, never ends the operator's session; a session ended by logout is refused from
// then on, and a session id is no bearer token.
func TestRedTeamWeb_SessionsOfOthersSurvive(t *testing.T) {
	e := start(t)
	op, csrf := login(t, e, opToken)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for range 3 * maxClientSessions {
		if code := loginStatus(t, c, e.base, readToken); code != http.StatusSeeOther {
			t.Fatalf("reader login: %d", code)
		}
	}
	if code := getStatus(t, op, e.base+"/runs", nil); code != http.StatusOK {
		t.Errorf("the operator's session after the reader's logins: %d", code)
	}
	u, _ := url.Parse(e.base)
	sid := op.Jar.Cookies(u)[0].Value
	if code := getStatus(t, http.DefaultClient, e.base+"/api/runs", http.Header{"Authorization": {"Bearer " + sid}}); code != http.StatusUnauthorized {
		t.Errorf("the session id as a bearer token: %d, want 401", code)
	}
	resp, err := op.PostForm(e.base+"/logout", url.Values{"csrf": {csrf}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if code := getStatus(t, http.DefaultClient, e.base+"/api/runs", http.Header{"Cookie": {cookieName + "=" + sid}}); code != http.StatusUnauthorized {
		t.Errorf("the cookie after logout: %d, want 401", code)
	}
}

func getStatus(t *testing.T, c *http.Client, u string, h http.Header) int {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestRedTeamWeb_CSRF: every action refuses a request without its own session's CSRF token
// in the body or header: another session's token (same operator), a token in the query
// string, a text/plain or JSON body, a read-only session with its own token, a bearer of the
// read-only token beside the operator's cookie; no action runs on GET. Nothing refused
// reaches the engine.
func TestRedTeamWeb_CSRF(t *testing.T) {
	e := start(t)
	opA, csrfA := login(t, e, opToken)
	_, csrfB := login(t, e, opToken)
	reader, rcsrf := login(t, e, readToken)
	if csrfA == csrfB || csrfA == "" {
		t.Fatalf("two sessions share a CSRF token %q", csrfA)
	}
	actions := []string{"/runs/run1/cancel", "/runs/run1/retry", "/runs/run1/tasks/a/cancel", "/runs/run1/tasks/a/answer",
		"/dispatches/d2/cancel", "/dispatches/d1/approvals/c1/approve", "/dispatches/d1/approvals/c1/deny"}
	type try struct {
		name   string
		client *http.Client
		req    func(path string) *http.Request
	}
	form := func(v url.Values) func(string) *http.Request {
		return func(p string) *http.Request {
			r, _ := http.NewRequest("POST", e.base+p, strings.NewReader(v.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return r
		}
	}
	base := url.Values{"answer": {"yes"}, "reason": {"no"}}
	with := func(k, v string) url.Values {
		out := url.Values{}
		for a, b := range base {
			out[a] = b
		}
		out.Set(k, v)
		return out
	}
	for _, tt := range []try{
		{"another session's token", opA, form(with("csrf", csrfB))},
		{"another session's token in the header", opA, func(p string) *http.Request {
			r := form(base)(p)
			r.Header.Set("X-CSRF-Token", csrfB)
			return r
		}},
		{"token in the query", opA, func(p string) *http.Request {
			r, _ := http.NewRequest("POST", e.base+p+"?csrf="+url.QueryEscape(csrfA)+"&answer=yes&reason=no", nil)
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return r
		}},
		{"text/plain body", opA, func(p string) *http.Request {
			r, _ := http.NewRequest("POST", e.base+p, strings.NewReader("csrf="+csrfA+"&answer=yes&reason=no"))
			r.Header.Set("Content-Type", "text/plain")
			return r
		}},
		{"JSON body", opA, func(p string) *http.Request {
			b, _ := json.Marshal(map[string]string{"csrf": csrfA, "answer": "yes", "reason": "no"})
			r, _ := http.NewRequest("POST", e.base+p, bytes.NewReader(b))
			r.Header.Set("Content-Type", "application/json")
			return r
		}},
		{"empty token", opA, form(with("csrf", ""))},
		{"token with a suffix", opA, form(with("csrf", csrfA+"x"))},
		{"two tokens, the wrong first", opA, func(p string) *http.Request {
			v := with("csrf", "wrong")
			v.Add("csrf", csrfA)
			return form(v)(p)
		}},
		{"reader with its own token", reader, form(with("csrf", rcsrf))},
		{"reader bearer beside the operator's cookie", opA, func(p string) *http.Request {
			r := form(with("csrf", csrfA))(p)
			r.Header.Set("Authorization", "Bearer "+readToken)
			return r
		}},
		{"empty bearer beside the operator's cookie", opA, func(p string) *http.Request {
			r := form(with("csrf", csrfA))(p)
			r.Header.Set("Authorization", "Bearer ")
			return r
		}},
		{"GET", opA, func(p string) *http.Request {
			r, _ := http.NewRequest("GET", e.base+p+"?csrf="+url.QueryEscape(csrfA)+"&answer=yes&reason=no", nil)
			return r
		}},
	} {
		for _, p := range actions {
			resp, err := tt.client.Do(tt.req(p))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 400 {
				t.Errorf("%s: POST %s answered %d: %.200s", tt.name, p, resp.StatusCode, body)
			}
		}
	}
	if len(e.orch.actions) != 0 {
		t.Errorf("refused actions reached the engine: %+v", e.orch.actions)
	}
	// The session's own token in a multipart form is the form a browser may send: it acts.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	mw.WriteField("csrf", csrfA)
	mw.Close()
	r, _ := http.NewRequest("POST", e.base+"/runs/run1/retry", &buf)
	r.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := opA.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(e.orch.actions) != 1 {
		t.Errorf("multipart retry with the right token: %d, actions %v", resp.StatusCode, e.orch.actions)
	}
}

// rawStatus sends one request with exactly the Host and Origin given (no client
// normalisation) and returns the status code (0 when the server closed without answering).
func rawStatus(t *testing.T, addr, method, path, host, origin string) int {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	req := method + " " + path + " HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + opToken + "\r\n"
	if origin != "" {
		req += "Origin: " + origin + "\r\n"
	}
	req += "Content-Length: 0\r\nConnection: close\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// oddHosts are Host values that a page rebinding its DNS name, or a confused parser, could
// send to a loopback listener on port: none names it.
func oddHosts(port string) []string {
	return []string{
		"evil.example:" + port, "localhost.:" + port, "127.0.0.1.:" + port, "127.1:" + port, "2130706433:" + port,
		"0x7f000001:" + port, "0177.0.0.1:" + port, "[::ffff:127.0.0.1]:" + port, "[::1]:" + port, "127.0.0.1",
		"localhost", "127.0.0.1:0" + port, "127.0.0.1:" + port + "0", "127.0.0.1:+" + port, "127.0.0.1:" + port + ".",
		"localhost:" + port + "@evil.example", "evil.example@localhost:" + port, "localhost:" + port + ",evil.example",
		"localhost.evil.example:" + port, "127.0.0.1.nip.io:" + port, "xn--localhost:" + port, "LOCALHOST.:" + port,
		"127.0.0.1 :" + port, "127.0.0.1%00:" + port, "",
	}
}

// TestRedTeamWeb_OddHostsAndOrigins: the web listener answers no Host above and no Origin
// that only resembles its own; its own Host in any letter case is still served.
func TestRedTeamWeb_OddHostsAndOrigins(t *testing.T) {
	e := start(t)
	addr := strings.TrimPrefix(e.base, "http://")
	_, port, _ := net.SplitHostPort(addr)
	for _, h := range oddHosts(port) {
		if code := rawStatus(t, addr, "GET", "/api/runs", h, ""); code == http.StatusOK {
			t.Errorf("Host %q: 200", h)
		}
	}
	for _, o := range []string{
		"http://127.0.0.1:" + port + ".evil.example", "http://localhost.:" + port, "http://127.0.0.1.:" + port, "http://127.1:" + port,
		"http://[::ffff:127.0.0.1]:" + port, "http://127.0.0.1:0" + port, "http://127.0.0.1", "https://127.0.0.1", "file://",
		"http://127.0.0.1:" + port + "@evil.example", "http://evil.example#@127.0.0.1:" + port, "chrome-extension://abc",
		"null", "http://127.0.0.1:" + port + ", http://evil.example", "ws://127.0.0.1:" + port,
		"HTTP://EVIL.EXAMPLE:" + port, "http://localhost%2eevil.example:" + port,
	} {
		for _, m := range []string{"GET", "POST"} {
			if code := rawStatus(t, addr, m, "/runs/run1/retry", "127.0.0.1:"+port, o); code < 400 {
				t.Errorf("%s with Origin %q: %d", m, o, code)
			}
		}
	}
	if len(e.orch.actions) != 0 {
		t.Errorf("actions reached the engine: %v", e.orch.actions)
	}
	// A header's surrounding blanks are no part of its value (RFC 9110): "127.0.0.1:PORT " is
	// the server's own Host.
	for _, h := range []string{"127.0.0.1:" + port, "LOCALHOST:" + port, "LocalHost:" + port, "127.0.0.1:" + port + " \t"} {
		if code := rawStatus(t, addr, "GET", "/api/runs", h, ""); code != http.StatusOK {
			t.Errorf("own Host %q: %d, want 200", h, code)
		}
	}
}

// TestRedTeamWeb_GraphParameters: the viewport API with huge, negative, overflowing,
// non-numeric and inverted bounds answers 200 with at most its node cap, never an error or
// a panic.
func TestRedTeamWeb_GraphParameters(t *testing.T) {
	e := startWith(t, Sources{Orch: wideRun(3000), Dispatches: fakeDispatches{map[string]*dispatch.Record{}}})
	// The layout is made first (the graph answers 503 while it is): the requests test bounds.
	if _, ok, err := e.srv.shapes.get(t.Context(), "run1", 0, time.Minute); !ok {
		t.Fatalf("the run's layout: %v", err)
	}
	for _, q := range []string{
		"", "x0=-1&y0=-1&x1=-1&y1=-1", "x0=NaN&y0=Inf&x1=-Inf&y1=1e9", "x0=2147483647&y0=2147483647&x1=2147483647&y1=2147483647",
		"x0=9223372036854775807&x1=99999999999999999999999", "x0=-9223372036854775808&x1=9223372036854775807&y1=9223372036854775807",
		"x0=1073741824&x1=1073741824&y0=1073741824&y1=1073741824", "x0=0&x1=2147483647&y0=0&y1=2147483647",
		"x0=500&x1=0&y0=500&y1=0", "x0=0x10&x1=%00", "x0=1&x0=2&x1=3", "x1=" + strings.Repeat("9", 10000),
	} {
		req, _ := http.NewRequest("GET", e.base+"/api/runs/run1/graph?"+q, nil)
		req.Header.Set("Authorization", "Bearer "+readToken)
		var g graphView
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("graph?%.80s: %d %s", q, resp.StatusCode, body)
		}
		if err := json.Unmarshal(body, &g); err != nil {
			t.Fatalf("graph?%.80s: %v", q, err)
		}
		if len(g.Nodes) > maxGraphNodes || len(g.Deps)+len(g.Needs) > 4*maxGraphEdges {
			t.Errorf("graph?%.80s: %d nodes, %d edge numbers", q, len(g.Nodes), len(g.Deps)+len(g.Needs))
		}
	}
}

// TestRedTeamWeb_ForgedIDsAndCursors: ids that walk out of their place (encoded slashes,
// dot segments, NUL, very long) and forged page cursors answer not found or the clamped
// page, never a server error.
func TestRedTeamWeb_ForgedIDsAndCursors(t *testing.T) {
	e := start(t)
	for _, p := range []string{
		"/dispatches/..%2f..%2f..%2fetc%2fpasswd", "/api/dispatches/..%2f..%2fd1", "/api/dispatches/%2e%2e/tail",
		"/dispatches/d1%00", "/api/dispatches/" + strings.Repeat("d", 4000), "/runs/..%2frun1", "/runs/run1%2f..%2f..%2f/tasks/a",
		"/runs/run1/tasks/..%2fa", "/api/runs/%2e%2e%2frun1/graph", "/api/runs/run1%00/events", "/runs/run1/tasks/%00",
		"/api/runs/'%20OR%201=1--", "/runs/run1/tasks/a'%20OR%20'1'='1",
	} {
		code := getStatus(t, http.DefaultClient, e.base+p, http.Header{"Authorization": {"Bearer " + readToken}})
		if code != http.StatusNotFound && code != http.StatusBadRequest && code != http.StatusMovedPermanently {
			t.Errorf("GET %s: %d, want 404", p, code)
		}
	}
	for _, q := range []string{"from=-1", "from=-9223372036854775808", "from=9223372036854775807", "from=99999999999999999999", "from=abc", "from=1e3", "from=0x10", "from=%00"} {
		if code := getStatus(t, http.DefaultClient, e.base+"/runs/run1?"+q, http.Header{"Authorization": {"Bearer " + readToken}}); code != http.StatusOK {
			t.Errorf("GET /runs/run1?%s: %d, want 200", q, code)
		}
	}
	for _, q := range []string{"from=9223372036854775807&limit=9223372036854775807", "from=-5&limit=-5", "limit=NaN", "from=1e99", "limit=0x7fffffff"} {
		req, _ := http.NewRequest("GET", e.base+"/api/runs/run1?"+q, nil)
		req.Header.Set("Authorization", "Bearer "+readToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var ans struct{ Tasks []json.RawMessage }
		err = json.NewDecoder(resp.Body).Decode(&ans)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil || len(ans.Tasks) > maxAPITaskPage {
			t.Errorf("GET /api/runs/run1?%s: %d, %v, %d tasks", q, resp.StatusCode, err, len(ans.Tasks))
		}
	}
	if n := len(listedTasks(strings.Repeat("a,", 30000))); n > maxListed {
		t.Errorf("an event stream lists %d tasks, over %d", n, maxListed)
	}
}

// TestRedTeamWeb_AgentTextInEveryPlace: agent- and model-written text holding markup, a
// javascript: URL, a </script>, bidi overrides and terminal escapes reaches every page and
// JSON answer inert: no raw markup, no raw control, the text shown escaped.
func TestRedTeamWeb_AgentTextInEveryPlace(t *testing.T) {
	evil := "</script><script>alert(1)</script><img src=x onerror=alert(2)>\"'><a href=\"javascript:alert(3)\">x</a>invoice\u202efdp.exe\x1b]52;c;cGF5bG9hZA==\x07\u2066\u2028 hidden:\U000E0072\U000E006D\u200b\ufe00"
	o := newFakeOrch(api.Task{ID: "a", State: lifecycle.TaskNeedsInput, Subagent: "coder", DispatchID: "d1", Dispatches: []string{"d1"}, Question: evil, Reason: evil, Detail: evil})
	o.run.Name = "demo"
	now := time.Now()
	recs := map[string]*dispatch.Record{
		"d1": {ID: "d1", State: lifecycle.DispatchNeedsInput, Subagent: "coder", CreatedAt: now, EndedAt: &now, Reason: evil},
		"d2": {ID: "d2", State: lifecycle.DispatchStarted, Subagent: "alone", CreatedAt: now, StartedAt: &now},
	}
	live := func(string) dispatch.Live { return dispatch.Live{Stdout: []byte(evil), Stderr: []byte(evil)} }
	e := startWith(t, Sources{Orch: o, Dispatches: fakeDispatches{recs}, Live: live})
	for _, tok := range []string{opToken, readToken} {
		c, _ := login(t, e, tok)
		for _, p := range []string{"/runs", "/runs/run1", "/runs/run1/tasks/a", "/dispatches", "/dispatches/d1", "/dispatches/d2",
			"/api/runs/run1", "/api/dispatches/d1", "/api/runs"} {
			resp, err := c.Get(e.base + p)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			s := string(body)
			for _, bad := range []string{"<script>alert", "<img", `href="javascript:`, "\u202e", "\x1b", "\x07", "\u2066", "\u2028", "\U000E0072", "\u200b", "\ufe00"} {
				if strings.Contains(s, bad) {
					t.Errorf("GET %s shows %q raw", p, bad)
				}
			}
			if resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") && strings.Contains(s, "alert(1)") && !strings.Contains(s, `invoice\u202efdp.exe`) {
				t.Errorf("GET %s shows the agent's text but not escaped as the CLI does", p)
			}
		}
	}
	// The live tail's event stream carries the text escaped, in JSON that holds no markup.
	req, _ := http.NewRequest("GET", e.base+"/api/dispatches/d2/tail", nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(l, "data: ") {
			continue
		}
		for _, bad := range []string{"<", ">", "\u202e", "\x1b", "\u2028", "\U000E0072", "\u200b"} {
			if strings.Contains(l, bad) {
				t.Errorf("the tail stream carries %q raw: %.300s", bad, l)
			}
		}
		var ts tailState
		json.Unmarshal([]byte(strings.TrimPrefix(l, "data: ")), &ts)
		if !strings.Contains(ts.Stdout, `invoice\u202efdp.exe`) {
			t.Errorf("the tail's stdout is not escaped as the CLI does: %q", ts.Stdout)
		}
		break
	}
}

// TestRedTeamWeb_PathCutAtTheEdgeOfALog: a log an agent wrote innocently (a compiler's
// "REPO/main.go:3: ...") is shown to a read-only viewer as its last or first bytes; where
// that edge falls inside the repository's path, the part of the path left over (its last
// components: the project's name) must not be shown, on the page, in the tail stream or for a
// finished dispatch's stored logs and transcript.
func TestRedTeamWeb_PathCutAtTheEdgeOfALog(t *testing.T) {
	const repo = "/srv/clients/acme-secret-merger"
	const leak = "secret-merger"
	tailCut := func(n int) []byte { // the last n bytes start 10 bytes into repo
		rest := "/main.go:3: undefined: x\n"
		return []byte(strings.Repeat("x", 100) + repo + rest + strings.Repeat("y", n-(len(repo)-10)-len(rest)))
	}
	headCut := func(n int) []byte { // the first n bytes end 10 bytes before repo's end
		return []byte(strings.Repeat("z", n-(len(repo)-10)) + repo + "/main.go:3\n")
	}
	blobs := map[digest.Digest][]byte{}
	art := func(b []byte) *dispatch.Artifact {
		d := digest.Sum(b)
		blobs[d] = b
		return &dispatch.Artifact{Digest: d, Size: int64(len(b))}
	}
	now := time.Now()
	recs := map[string]*dispatch.Record{
		"live": {ID: "live", State: lifecycle.DispatchStarted, Subagent: "s", Repo: repo, CreatedAt: now, StartedAt: &now},
		"done": {ID: "done", State: lifecycle.DispatchFinished, Subagent: "s", Repo: repo, CreatedAt: now, EndedAt: &now,
			Result: &dispatch.Result{Stdout: art(tailCut(maxLogShown)), Stderr: art(tailCut(maxLogShown)), Transcript: art(headCut(maxTranscriptShown))}},
	}
	src := Sources{Orch: newFakeOrch(), Dispatches: fakeDispatches{recs},
		Live: func(string) dispatch.Live {
			return dispatch.Live{Stdout: tailCut(tailBytes), Stderr: tailCut(tailBytes)}
		},
		Blob: func(d digest.Digest, _ int64) ([]byte, error) { return blobs[d], nil }}
	e := startWith(t, src)
	c, _ := login(t, e, readToken)
	for _, p := range []string{"/dispatches/live", "/dispatches/done"} {
		resp, err := c.Get(e.base + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || strings.Contains(string(body), leak) {
			t.Errorf("GET %s: status %d, shows the repository's name %q: %v", p, resp.StatusCode, leak, strings.Contains(string(body), leak))
		}
	}
	req, _ := http.NewRequest("GET", e.base+"/api/dispatches/live/tail", nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(l, "data: ") {
			if strings.Contains(l, leak) {
				t.Errorf("the tail stream shows the repository's name %q", leak)
			}
			if !strings.Contains(l, "undefined: x") {
				t.Errorf("the tail stream lost the log's text: %.200s", l)
			}
			break
		}
	}
	// The operator sees everything, cut where it falls.
	op, _ := login(t, e, opToken)
	resp2, err := op.Get(e.base + "/dispatches/live")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	if !strings.Contains(string(body), leak) {
		t.Error("the operator's page lost the path's end")
	}
}

// TestRedTeamWeb_CutNeverShowsPartOfAPath cuts a log at every offset: no piece of four or
// more bytes of the repository's last component is ever shown to a viewer, while the text
// after the path is.
func TestRedTeamWeb_CutNeverShowsPartOfAPath(t *testing.T) {
	const repo = "/srv/clients/acme-secret-merger"
	m := hostpath.New(repo, "/srv/clients/acme-secret-merger/sub")
	b := []byte("start " + repo + "/a.go:1 then " + repo + " and é " + repo + "\nend")
	last := "acme-secret-merger"
	for n := 1; n <= len(b)+5; n++ {
		for name, got := range map[string]string{"tail": tailShown(b, n, m), "head": headShown(b, n, m)} {
			for i := 0; i+4 <= len(last); i++ {
				if strings.Contains(got, last[i:i+4]) {
					t.Fatalf("%s of %d bytes shows %q of the path: %q", name, n, last[i:i+4], got)
				}
			}
			if !utf8.ValidString(got) {
				t.Fatalf("%s of %d bytes is not UTF-8: %q", name, n, got)
			}
		}
	}
	if got := tailShown(b, 4, m); got != "\nend" {
		t.Errorf("tail of 4 = %q", got)
	}
	if got := tailShown(b, len(b), nil); got != string(b) {
		t.Errorf("an operator's tail = %q", got)
	}
}

// TestRedTeamWeb_InvisibleTextInJSON: tag characters (above U+FFFF) in an agent's text reach
// a JSON answer as surrogate-pair escapes that decode to the text as written, never raw.
func TestRedTeamWeb_InvisibleTextInJSON(t *testing.T) {
	q := "Approve?\U000E0072\U000E006D\u200b"
	o := newFakeOrch(api.Task{ID: "a", State: lifecycle.TaskNeedsInput, Subagent: "coder", Question: q})
	e := startWith(t, Sources{Orch: o, Dispatches: fakeDispatches{map[string]*dispatch.Record{}}})
	req, _ := http.NewRequest("GET", e.base+"/api/runs/run1", nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), "\U000E0072") || !strings.Contains(string(body), `\udb40\udc72`) {
		t.Errorf("the answer does not escape U+E0072 as a surrogate pair: %.400s", body)
	}
	var run api.Run
	if err := json.Unmarshal(body, &run); err != nil {
		t.Fatal(err)
	}
	if len(run.Tasks) == 0 || run.Tasks[0].Question != q {
		t.Errorf("the question decodes to %+v, want %q", run.Tasks, q)
	}
}

// TestRedTeamWeb_ReaderStreamsLeaveRoomForOthers: a read-only token opens live streams until
// the listener's every connection is one of them (each page's stream holds a connection as
// long as it is open); the operator must still get in and act, as with the login
// sessions. The reader's streams past its share are refused, and the refused connection is
// closed rather than kept idle.
func TestRedTeamWeb_ReaderStreamsLeaveRoomForOthers(t *testing.T) {
	e := start(t)
	addr := strings.TrimPrefix(e.base, "http://")
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	opened, refused := 0, 0
	for i := 0; i < maxConns; i++ {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		path := "/api/runs/run1/events"
		if i%2 == 1 {
			path = "/api/dispatches/d1/tail"
		}
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", path, addr, readToken)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			// the listener holds no more connections for anyone
			break
		}
		if strings.Contains(line, " 200 ") {
			opened++
		} else {
			refused++
		}
	}
	t.Logf("reader streams opened %d, refused %d", opened, refused)
	cl := &http.Client{Timeout: 10 * time.Second}
	req, _ := http.NewRequest("POST", e.base+"/runs/run1/retry", nil)
	req.Header.Set("Authorization", "Bearer "+opToken)
	req.Header.Set("Accept", "application/json")
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("the operator cannot reach the web view while the reader's streams are open: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the operator's retry: %d", resp.StatusCode)
	}
}

// TestRedTeamWeb_ApprovalFormStaysOnItsCall: a held call's id is a path segment of its
// Approve and Deny forms. The gateway admits only [A-Za-z0-9_-] ids, but the page must not
// rely on it: an id with dot segments and a query ("x/../../../../runs/run1/cancel?x=") would
// make the Approve button cancel a run. A form posts to its own call; a call whose id is not
// a plain word gets no form, and the page says to decide it from the CLI.
func TestRedTeamWeb_ApprovalFormStaysOnItsCall(t *testing.T) {
	now := time.Now()
	var approvals []dispatch.Approval
	hostile := []string{"x/../../../../runs/run1/cancel?x=", "../../../runs/run1/retry#", "a b\"><x", "%2e%2e%2f", "c?d", "javascript:alert(1)"}
	for i, id := range append([]string{"call_ok-1"}, hostile...) {
		approvals = append(approvals, dispatch.Approval{Seq: i + 1, CallID: id, Tool: "write_file", Rule: "write_file", State: dispatch.ApprovalPending,
			ArgsDigest: "sha256:" + strings.Repeat("a", 64), Preview: "{}", ArgsBytes: 2, ExpiresAt: now.Add(time.Minute)})
	}
	recs := map[string]*dispatch.Record{"d9": {ID: "d9", State: lifecycle.DispatchStarted, Subagent: "w", CreatedAt: now, StartedAt: &now,
		Phase: dispatch.PhaseAwaitingApproval, Approvals: approvals}}
	e := startWith(t, Sources{Orch: newFakeOrch(), Dispatches: fakeDispatches{recs}})
	c, _ := login(t, e, opToken)
	resp, err := c.Get(e.base + "/dispatches/d9")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	base, _ := url.Parse(e.base + "/dispatches/d9")
	n := 0
	for rest := page; ; {
		_, after, ok := strings.Cut(rest, `<form method="post" action="`)
		if !ok {
			break
		}
		action, tail, _ := strings.Cut(after, `"`)
		rest = tail
		if !strings.Contains(action, "/approvals/") {
			continue
		}
		n++
		ref, err := url.Parse(strings.ReplaceAll(action, "&amp;", "&"))
		if err != nil {
			t.Errorf("form action %q: %v", action, err)
			continue
		}
		got := base.ResolveReference(ref)
		if !strings.HasPrefix(got.Path, "/dispatches/d9/approvals/") || got.RawQuery != "" || got.Fragment != "" ||
			!(strings.HasSuffix(got.Path, "/approve") || strings.HasSuffix(got.Path, "/deny")) || strings.Count(got.EscapedPath(), "/") != 5 {
			t.Errorf("form action %q posts to %s", action, got)
		}
	}
	if n != 2 {
		t.Errorf("%d approval forms, want the plain call's approve and deny", n)
	}
	if got := strings.Count(page, "is not a plain word: decide with agora dispatch approve|deny d9 CALL --digest"); got != len(hostile) {
		t.Errorf("%d calls are sent to the CLI, want %d", got, len(hostile))
	}
}

// TestRedTeamWeb_IdleConnectionsYield: anyone who reaches the port (no token needed) opens
// every connection the listener keeps, asks for the login page on each and leaves them idle
// (keep-alive), refreshing them before the idle timeout: the operator's connection must still
// be accepted. An idle connection yields its place when the listener is full.
func TestRedTeamWeb_IdleConnectionsYield(t *testing.T) {
	e := start(t)
	addr := strings.TrimPrefix(e.base, "http://")
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for i := 0; i < maxConns; i++ {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "GET /login HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
			break
		}
	}
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get(e.base + "/login")
	if err != nil {
		t.Fatalf("the operator cannot reach the login page while %d idle connections are held: %v", len(conns), err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /login: %d", resp.StatusCode)
	}
}
