package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/mcpserver"
	"github.com/agora-dev/agora/internal/oidcauth/oidctest"
)

// TestRedTeam31_HTTPOIDCChallengeAndSubject, on MCP HTTP against the real
// provider, with a static token beside and a public resource URL configured:
//   - the 401's WWW-Authenticate and the protected resource metadata name the configured
//     resource and the provider, and carry no static token nor client secret;
//   - a provider-signed token whose subject holds a bidirectional override or a C1 control
//     is refused 401, and nothing is audited under it;
//   - a token of the right issuer for another audience is 401, one matching no rule 403;
//   - no response, header or audit entry holds any presented token.
func TestRedTeam31_HTTPOIDCChallengeAndSubject(t *testing.T) {
	hidden := []string{"svc-\u202eevil", "svc-\u009b2J"}
	svcs := append([]oidctest.Service{}, oidcServices...)
	for _, h := range hidden {
		svcs = append(svcs, oidctest.Service{ID: h, Secret: "hidden-secret", Groups: []string{"platform"}, Audience: []string{oidcAudience}})
	}
	svcs = append(svcs, oidctest.Service{ID: "svc-elsewhere", Secret: "elsewhere-secret", Groups: []string{"platform"}, Audience: []string{"another-resource"}})
	p := oidctest.Start(t, oidctest.Config{Services: svcs})
	f := newFixture()
	f.disp.get = func(_ context.Context, id string) (*mcpserver.Record, error) { return record(id, "finished"), nil }
	static := newToken(t)
	const resource = "https://agora.example.com/team/mcp"
	addr := f.http(t, mcpserver.HTTPConfig{Clients: clients(static), OIDC: oidcVerifier(t, p.Issuer), Resource: resource})
	var seen strings.Builder
	record := func(code int, hdr http.Header, body string) {
		seen.WriteString(body)
		for k, vs := range hdr {
			seen.WriteString(k + ": " + strings.Join(vs, ",") + "\n")
		}
	}

	code, hdr, body := post(t, addr, "/mcp", nil, initialize)
	record(code, hdr, body)
	wantMeta := "https://agora.example.com/.well-known/oauth-protected-resource/team/mcp"
	if code != http.StatusUnauthorized || !strings.Contains(hdr.Get("WWW-Authenticate"), `resource_metadata="`+wantMeta+`"`) {
		t.Errorf("401: %d %q, want resource_metadata %s", code, hdr.Get("WWW-Authenticate"), wantMeta)
	}
	resp, err := http.Get("http://" + addr + "/.well-known/oauth-protected-resource/team/mcp")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	record(resp.StatusCode, resp.Header, string(raw))
	var meta struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil || meta.Resource != resource || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != p.Issuer {
		t.Errorf("protected resource metadata %s (%v)", raw, err)
	}

	var presented []string
	for _, h := range hidden {
		tok := p.Token(t, h)
		presented = append(presented, tok)
		code, hdr, body := post(t, addr, "/mcp", map[string]string{"Authorization": "Bearer " + tok}, initialize)
		record(code, hdr, body)
		if code != http.StatusUnauthorized {
			t.Errorf("subject %+q: got %d %q, want 401", h, code, body)
		}
	}
	tok := p.Token(t, "svc-elsewhere")
	presented = append(presented, tok)
	code, hdr, body = post(t, addr, "/mcp", map[string]string{"Authorization": "Bearer " + tok}, initialize)
	record(code, hdr, body)
	if code != http.StatusUnauthorized {
		t.Errorf("a token for another resource: got %d %q, want 401", code, body)
	}
	tok = p.Token(t, "svc-nobody")
	presented = append(presented, tok)
	code, hdr, body = post(t, addr, "/mcp", map[string]string{"Authorization": "Bearer " + tok}, initialize)
	record(code, hdr, body)
	if code != http.StatusForbidden {
		t.Errorf("a token matching no rule: got %d %q, want 403", code, body)
	}
	tok = p.Token(t, "svc-platform")
	presented = append(presented, tok)
	code, hdr, body = post(t, addr, "/mcp", map[string]string{"Authorization": "Bearer " + tok}, initialize)
	record(code, hdr, body)
	if code != http.StatusOK {
		t.Errorf("a valid token: got %d %q", code, body)
	}

	entries, _ := json.Marshal(f.audit.all())
	out := seen.String() + string(entries)
	for _, secret := range append(presented, static, "hidden-secret", "platform-secret", "elsewhere-secret") {
		sig := secret
		if parts := strings.Split(secret, "."); len(parts) == 3 {
			sig = parts[2]
		}
		if strings.Contains(out, sig) {
			t.Errorf("a response or the audit holds a credential (%.12s...)", sig)
		}
	}
	for _, h := range hidden {
		if strings.Contains(out, h) {
			t.Errorf("subject %+q reached a response or the audit", h)
		}
	}
}
