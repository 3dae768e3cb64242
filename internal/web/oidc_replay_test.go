package web

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/agora-dev/agora/internal/oidcauth/oidctest"
)

// TestServer_OIDCTokenReplayedToTheWebView: the web view signs in from the provider only by
// the code flow (oidc.go), so a provider's token, however valid for MCP, must open nothing
// here: not as a bearer token on the API, not as the session cookie, not as the login form's
// token.
func TestServer_OIDCTokenReplayedToTheWebView(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Services: []oidctest.Service{
		{ID: "svc-platform", Secret: "platform-secret", Groups: []string{"platform"}, Audience: []string{"agora-web"}},
	}})
	tok := p.Token(t, "svc-platform")
	e := start(t)
	for name, req := range map[string]func() *http.Request{
		"bearer": func() *http.Request {
			r, _ := http.NewRequest(http.MethodGet, e.base+"/api/runs", nil)
			r.Header.Set("Authorization", "Bearer "+tok)
			return r
		},
		"cookie": func() *http.Request {
			r, _ := http.NewRequest(http.MethodGet, e.base+"/api/runs", nil)
			r.AddCookie(&http.Cookie{Name: cookieName, Value: tok})
			return r
		},
	} {
		resp, err := http.DefaultClient.Do(req())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: got %d, want 401", name, resp.StatusCode)
		}
	}
	resp := postLogin(t, e.base, url.Values{"token": {tok}})
	if resp.StatusCode == http.StatusSeeOther || len(resp.Cookies()) > 0 {
		t.Errorf("login with a provider's token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
}
