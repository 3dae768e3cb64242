package web_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/oidcauth/oidctest"
)

const uiOIDCSecret = "ui-oidc-web-secret-0123456789"

// TestUI_OIDCChromium signs in to the real binary's web view in headless Chromium through the
// real identity provider's login page: a viewer (group readers) sees the running run
// without its cancel button and is refused a cancel posted with its own session and CSRF
// token; an operator (group platform) cancels the run from its page, recorded in the audit
// as web:oidc:ISSUER#id1. The session cookie is HttpOnly and Strict.
func TestUI_OIDCChromium(t *testing.T) {
	requireUI(t)
	e := newUIHome(t)
	e.addr = agoratest.FreeAddr(t)
	p := oidctest.Start(t, oidctest.Config{
		UserGroups:  map[string][]string{oidctest.User1: {"platform"}, oidctest.User2: {"readers"}},
		WebClientID: "agora-web", WebSecret: uiOIDCSecret, RedirectURI: []string{"http://" + e.addr + "/oidc/callback"},
	})
	cfg := filepath.Join(e.home, "agora.yaml")
	old, err := os.ReadFile(cfg)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	must(t, os.WriteFile(cfg, append(old, []byte(fmt.Sprintf(`
auth:
  oidc:
    issuer: %s
    audience: agora-mcp
    allow_private: [127.0.0.1/32]
    rules:
      - {group: platform, ceiling: orchestrate, web: operator}
      - {group: readers, web: viewer}
    web:
      client_id: agora-web
      redirect_url: http://%s/oidc/callback
`, p.Issuer, e.addr))...), 0o600))
	e.vars = append(e.vars, "AGORA_OIDC_CLIENT_SECRET="+uiOIDCSecret)
	e.serve()
	run := e.submit("forever", "version: 1\nname: forever\ntasks:\n  - {id: wait, subagent: forever}\n")

	signIn := func(user string) *browser {
		b := newBrowserAllowing(t, e.base, p.Issuer)
		b.must(map[string]any{"op": "goto", "path": "/login"})
		b.must(map[string]any{"op": "click", "selector": "#oidc-login", "nav": true})
		b.must(map[string]any{"op": "fill", "selector": "#username", "value": oidctest.Username(user)})
		b.must(map[string]any{"op": "fill", "selector": "#password", "value": oidctest.Password})
		a := b.must(map[string]any{"op": "click", "selector": "button[type=submit]", "nav": true})
		if !strings.Contains(a.URL, "/oidc/callback?") {
			t.Fatalf("after the provider's login page %s is at %s, want the callback", user, a.URL)
		}
		// The callback's page moves on to /runs by a navigation of its own.
		if w := b.do(map[string]any{"op": "waitSelector", "selector": "#who", "timeout": 15000}); !w.OK {
			b.shot("oidc-login-failed-" + user)
			t.Fatalf("signed in at the provider, %s never reached a page of the run view: %s (%s)", user, w.Error, b.do(map[string]any{"op": "text", "selector": "body"}).Text)
		}
		if h := b.must(map[string]any{"op": "text", "selector": "h1"}).Text; h != "Runs" {
			t.Fatalf("%s landed on %q, want the runs page", user, h)
		}
		if who := txt(b, "#who"); who != "oidc:"+p.Issuer+"#"+user+map[bool]string{true: " (operator)", false: " (read only)"}[user == oidctest.User1] {
			t.Fatalf("%s is shown as %q", user, who)
		}
		return b
	}

	v := signIn(oidctest.User2)
	var session *cookieAnswer
	for _, c := range v.must(map[string]any{"op": "cookies"}).Cookies {
		if c.Name == "agora_session" {
			session = &c
		}
	}
	if session == nil || !session.HTTPOnly || session.SameSite != "Strict" || session.Expires <= 0 || session.Expires > float64(time.Now().Add(time.Hour+time.Minute).Unix()) {
		t.Fatalf("the session cookie %+v: want HttpOnly, Strict, ending with the ID token", session)
	}
	v.must(map[string]any{"op": "goto", "path": "/runs/" + run.ID})
	v.must(map[string]any{"op": "waitSelector", "selector": "#run-state", "timeout": 10000})
	if n := v.must(map[string]any{"op": "count", "selector": "#cancel-run"}).N; n != 0 {
		t.Error("a viewer from the provider sees the cancel button")
	}
	csrf := v.must(map[string]any{"op": "attr", "selector": "input[name=csrf]", "name": "value"}).Text
	req, _ := http.NewRequest(http.MethodPost, e.base+"/runs/"+run.ID+"/cancel", strings.NewReader(url.Values{"csrf": {csrf}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: session.Name, Value: session.Value})
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "may read but not act") {
		t.Fatalf("a viewer's cancel with its session and CSRF token: %d %s", resp.StatusCode, body)
	}
	if r := mustStatus(t, e, run.ID); r.CancelAsked || lifecycle.RunEnded(r.State) {
		t.Fatalf("the viewer's refused cancel changed the run: %+v", r)
	}
	v.shot("oidc-viewer-run")

	op := signIn(oidctest.User1)
	op.must(map[string]any{"op": "goto", "path": "/runs/" + run.ID})
	op.must(map[string]any{"op": "waitSelector", "selector": "#cancel-run", "timeout": 10000})
	op.must(map[string]any{"op": "click", "selector": "#cancel-run", "nav": true})
	op.must(map[string]any{"op": "waitText", "selector": "#run-state", "contains": "cancelled", "timeout": 20000})
	op.must(map[string]any{"op": "goto", "path": "/audit?log=orch"})
	if a := txt(op, "table#audit"); !strings.Contains(a, `"by":"web:oidc:`+p.Issuer+`#id1"`) {
		t.Errorf("orch.db's audit log does not show the cancel by web:oidc:%s#id1:\n%.3000s", p.Issuer, a)
	}
	op.shot("oidc-operator-audit")
	for _, b := range []*browser{v, op} {
		if r := b.must(map[string]any{"op": "report"}); len(r.Offsite) > 0 {
			t.Errorf("the browser tried to reach %v", r.Offsite)
		}
	}
	if r := mustStatus(t, e, run.ID); r.State != lifecycle.RunCancelled {
		t.Errorf("the run is %s after the operator's cancel", r.State)
	}
}
