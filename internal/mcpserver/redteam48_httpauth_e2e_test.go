package mcpserver_test

import (
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/oidcauth/oidctest"
)

// TestRedTeam48_BinaryBearerAndHost attacks the real `agora mcp --http`, with its token from
// AGORA_HTTP_TOKEN as an operator sets it, the way a hostile client or a rebinding page would:
// every credential that is not exactly the token is 401 (a token in the query string
// included: it would land in proxies' and browsers' logs), and a Host or Origin that does not
// name the server is 403 even with the token. Neither the answers nor the server's log carry
// the token. The binary is what is attacked because which checks guard it is decided where
// the command is wired (internal/cli/mcp, internal/cli/httpauth), not in this package.
func TestRedTeam48_BinaryBearerAndHost(t *testing.T) {
	token := newToken(t)
	srv := httpServer(t, newHome(t), []string{"AGORA_HTTP_TOKEN=" + token})
	_, port, err := net.SplitHostPort(srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	bearer := "Bearer " + token
	for _, tt := range []struct {
		name    string
		path    string
		headers map[string]string
		want    int
	}{
		{"no credential", "/mcp", nil, http.StatusUnauthorized},
		{"empty bearer", "/mcp", map[string]string{"Authorization": "Bearer "}, http.StatusUnauthorized},
		{"bearer without a token", "/mcp", map[string]string{"Authorization": "Bearer"}, http.StatusUnauthorized},
		{"wrong token", "/mcp", map[string]string{"Authorization": "Bearer " + newToken(t)}, http.StatusUnauthorized},
		{"the token's first half", "/mcp", map[string]string{"Authorization": "Bearer " + token[:32]}, http.StatusUnauthorized},
		{"the token less its last character", "/mcp", map[string]string{"Authorization": "Bearer " + token[:len(token)-1]}, http.StatusUnauthorized},
		{"the token and more", "/mcp", map[string]string{"Authorization": bearer + token}, http.StatusUnauthorized},
		{"the token behind a prefix", "/mcp", map[string]string{"Authorization": "Bearer x" + token}, http.StatusUnauthorized},
		{"the token in another case", "/mcp", map[string]string{"Authorization": "Bearer " + strings.ToUpper(token)}, http.StatusUnauthorized},
		{"the token as Basic", "/mcp", map[string]string{"Authorization": "Basic " + token}, http.StatusUnauthorized},
		{"the token alone", "/mcp", map[string]string{"Authorization": token}, http.StatusUnauthorized},
		{"over-long token", "/mcp", map[string]string{"Authorization": "Bearer " + strings.Repeat(token, 64)}, http.StatusUnauthorized},
		{"the token in another header", "/mcp", map[string]string{"X-Api-Key": token}, http.StatusUnauthorized},
		{"access_token in the query", "/mcp?access_token=" + url.QueryEscape(token), nil, http.StatusUnauthorized},
		{"token in the query", "/mcp?token=" + url.QueryEscape(token), nil, http.StatusUnauthorized},
		{"the token as a cookie", "/mcp", map[string]string{"Cookie": "agora_session=" + token}, http.StatusUnauthorized},
		{"rebound Host", "/mcp", map[string]string{"Authorization": bearer, "Host": "evil.example:" + port}, http.StatusForbidden},
		{"rebound Host, loopback's name inside", "/mcp", map[string]string{"Authorization": bearer, "Host": "localhost.evil.example:" + port}, http.StatusForbidden},
		{"Host on another port", "/mcp", map[string]string{"Authorization": bearer, "Host": "127.0.0.1:1"}, http.StatusForbidden},
		{"foreign Origin", "/mcp", map[string]string{"Authorization": bearer, "Origin": "https://evil.example"}, http.StatusForbidden},
		{"null Origin", "/mcp", map[string]string{"Authorization": bearer, "Origin": "null"}, http.StatusForbidden},
		{"cross-site fetch", "/mcp", map[string]string{"Authorization": bearer, "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"rebound Host without a token", "/mcp", map[string]string{"Host": "evil.example:" + port}, http.StatusForbidden},
		{"the token", "/mcp", map[string]string{"Authorization": bearer}, http.StatusOK},
		{"the token, bound Host and Origin", "/mcp", map[string]string{"Authorization": bearer, "Host": "localhost:" + port, "Origin": "http://localhost:" + port}, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, hdr, body := post(t, srv.addr, tt.path, tt.headers, initialize)
			if code != tt.want {
				t.Errorf("got %d (%s), want %d", code, strings.TrimSpace(body), tt.want)
			}
			if tt.want == http.StatusUnauthorized && !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("a 401 without a Bearer challenge: %q", hdr.Get("WWW-Authenticate"))
			}
			if strings.Contains(body, token[:16]) {
				t.Errorf("the answer echoes the token: %q", body)
			}
		})
	}
	if strings.Contains(srv.logs(), token[:16]) {
		t.Errorf("the server log holds the token:\n%s", srv.logs())
	}
}

// TestRedTeam48_BinaryOIDCTokens attacks the real `agora mcp --http` with only auth.oidc in
// agora.yaml (the verifier internal/cli/httpauth builds from it): a token of the provider for
// another audience, an expired one, one of another provider with the same audience, and one
// whose header claims alg none are each 401; the provider's own token for this audience is
// let in. The verifier's finer checks are internal/oidcauth's (TestAttacks,
// TestRedTeam31_Claims): this shows the binary is wired to them, with agora.yaml's issuer
// and audience.
func TestRedTeam48_BinaryOIDCTokens(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Services: []oidctest.Service{
		{ID: "svc-platform", Secret: "platform-secret", Groups: []string{"platform"}, Audience: []string{oidcAudience}},
		{ID: "svc-elsewhere", Secret: "elsewhere-secret", Groups: []string{"platform"}, Audience: []string{"https://another.example/mcp"}},
		{ID: "svc-expired", Secret: "expired-secret", Groups: []string{"platform"}, Audience: []string{oidcAudience}, TTL: -time.Hour},
	}})
	other := oidctest.Start(t, oidctest.Config{Services: []oidctest.Service{
		{ID: "svc-platform", Secret: "platform-secret", Groups: []string{"platform"}, Audience: []string{oidcAudience}},
	}})
	home := newHome(t)
	f, err := os.OpenFile(filepath.Join(home, "agora.yaml"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "auth:\n  oidc:\n    issuer: %s\n    audience: %s\n    allow_private: [127.0.0.1/32]\n    rules:\n      - {group: platform, ceiling: orchestrate}\n", p.Issuer, oidcAudience)
	f.Close()
	srv := httpServer(t, home, nil)
	good := p.Token(t, "svc-platform")
	parts := strings.Split(good, ".")
	for _, tt := range []struct {
		name, token string
		want        int
	}{
		{"another audience", p.Token(t, "svc-elsewhere"), http.StatusUnauthorized},
		{"expired", p.Token(t, "svc-expired"), http.StatusUnauthorized},
		{"another provider", other.Token(t, "svc-platform"), http.StatusUnauthorized},
		{"alg none", base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + parts[1] + ".", http.StatusUnauthorized},
		{"signature dropped", parts[0] + "." + parts[1] + ".", http.StatusUnauthorized},
		{"the provider's token for this audience", good, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, body := post(t, srv.addr, "/mcp", map[string]string{"Authorization": "Bearer " + tt.token}, initialize)
			if code != tt.want {
				t.Errorf("got %d (%s), want %d", code, strings.TrimSpace(body), tt.want)
			}
		})
	}
	if strings.Contains(srv.logs(), parts[2]) {
		t.Error("the server log holds a token's signature")
	}
}
