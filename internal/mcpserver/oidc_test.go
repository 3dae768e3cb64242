package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/mcpserver"
	"github.com/agora-dev/agora/internal/oidcauth"
	"github.com/agora-dev/agora/internal/oidcauth/oidctest"
)

const oidcAudience = "agora-mcp-test"

var oidcServices = []oidctest.Service{
	{ID: "svc-platform", Secret: "platform-secret", Groups: []string{"platform"}, Audience: []string{oidcAudience}},
	{ID: "svc-readers", Secret: "readers-secret", Groups: []string{"readers"}, Audience: []string{oidcAudience}},
	{ID: "svc-nobody", Secret: "nobody-secret", Groups: []string{"marketing"}, Audience: []string{oidcAudience}},
}

func oidcVerifier(t *testing.T, issuer string) *oidcauth.Verifier {
	t.Helper()
	v, err := oidcauth.New(oidcauth.Config{Issuer: issuer, Audience: oidcAudience, AllowPrivate: []string{"127.0.0.1/32"},
		Rules: []oidcauth.Rule{{Group: "platform", Ceiling: "orchestrate", Web: "operator"}, {Group: "readers", Ceiling: "read"}}},
		oidcauth.Options{RefetchEvery: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// sdkOIDCSession connects the official SDK client with its own client credentials handler:
// it reads the 401's resource_metadata, the provider's metadata, and obtains its token itself.
func sdkOIDCSession(t *testing.T, url, id, secret string) *mcp.ClientSession {
	t.Helper()
	h, err := extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{
		Credentials: &oauthex.ClientCredentials{ClientID: id, ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: secret}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := newClient().Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: url, OAuthHandler: h, MaxRetries: -1, DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		t.Fatalf("connect %s as %s: %v", url, id, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestHTTP_OIDC, on MCP HTTP against the real provider: the SDK client signs in by
// itself, its ceiling comes from the rules, the audit names the token's subject, a token
// matching no rule is refused 403, a static token keeps working beside it.
func TestHTTP_OIDC(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Services: oidcServices})
	f := newFixture()
	f.disp.get = func(_ context.Context, id string) (*mcpserver.Record, error) { return record(id, "finished"), nil }
	static := newToken(t)
	addr := f.http(t, mcpserver.HTTPConfig{Clients: clients(static), OIDC: oidcVerifier(t, p.Issuer)})
	url := "http://" + addr + "/mcp"
	prm := "http://" + addr + "/.well-known/oauth-protected-resource/mcp"

	t.Run("401 names the resource metadata", func(t *testing.T) {
		code, hdr, _ := post(t, addr, "/mcp", nil, initialize)
		if want := fmt.Sprintf(`resource_metadata=%q`, prm); code != http.StatusUnauthorized || !strings.Contains(hdr.Get("WWW-Authenticate"), want) {
			t.Fatalf("got %d %q, want 401 with %s", code, hdr.Get("WWW-Authenticate"), want)
		}
		resp, err := http.Get(prm)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m oauthex.ProtectedResourceMetadata
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || m.Resource != url || len(m.AuthorizationServers) != 1 || m.AuthorizationServers[0] != p.Issuer {
			t.Fatalf("metadata %+v, %v", m, err)
		}
	})

	t.Run("the SDK client signs in and acts within its ceiling", func(t *testing.T) {
		cs := sdkOIDCSession(t, url, "svc-platform", "platform-secret")
		if n := len(toolNames(t, cs)); n != 11 {
			t.Fatalf("orchestrate ceiling sees %d tools, want 11", n)
		}
		if res := call(t, cs, "agora_dispatch_describe", map[string]any{"id": dispatchID}); res.IsError {
			t.Fatalf("describe: %s", text(res))
		}
		reader := sdkOIDCSession(t, url, "svc-readers", "readers-secret")
		res := call(t, reader, "agora_dispatch", map[string]any{"subagent": "writer"})
		if !res.IsError || !strings.Contains(text(res), "its ceiling is read") {
			t.Fatalf("a read ceiling dispatched: %s", text(res))
		}
		var actors []string
		for _, e := range f.audit.all() {
			actors = append(actors, e.Actor+" "+e.Kind+" "+e.Details["ceiling"].(string))
		}
		want := []string{
			"oidc:" + p.Issuer + "#svc-platform " + entry.MCPToolCall + " orchestrate",
			"oidc:" + p.Issuer + "#svc-readers " + entry.MCPToolDenied + " read",
		}
		if strings.Join(actors, "\n") != strings.Join(want, "\n") {
			t.Fatalf("audit actors:\n%s\nwant:\n%s", strings.Join(actors, "\n"), strings.Join(want, "\n"))
		}
	})

	t.Run("claims matching no rule: 403 insufficient_scope", func(t *testing.T) {
		tok := p.Token(t, "svc-nobody")
		code, hdr, body := post(t, addr, "/mcp", map[string]string{"Authorization": "Bearer " + tok}, initialize)
		if code != http.StatusForbidden || !strings.Contains(hdr.Get("WWW-Authenticate"), `error="insufficient_scope"`) {
			t.Fatalf("got %d %q %q, want 403 insufficient_scope", code, hdr.Get("WWW-Authenticate"), body)
		}
	})

	t.Run("the static token keeps working", func(t *testing.T) {
		if code, _, body := post(t, addr, "/mcp", map[string]string{"Authorization": "Bearer " + static}, initialize); code != http.StatusOK {
			t.Fatalf("static token: %d %s", code, body)
		}
	})

	t.Run("attacks", func(t *testing.T) {
		good := p.Token(t, "svc-platform")
		parts := strings.Split(good, ".")
		for name, tok := range map[string]string{
			"alg none":          `eyJhbGciOiJub25lIn0.` + parts[1] + `.`,
			"signature dropped": parts[0] + "." + parts[1] + ".",
			"over the size cap": strings.Repeat("a", oidcauth.MaxTokenBytes) + "." + parts[1] + "." + parts[2],
		} {
			code, _, body := post(t, addr, "/mcp", map[string]string{"Authorization": "Bearer " + tok}, initialize)
			if code != http.StatusUnauthorized || strings.Contains(body, parts[1]) {
				t.Errorf("%s: got %d %q, want 401 without the token", name, code, body)
			}
		}
		// A header over the server's cap is refused before any token is parsed.
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(initialize))
		req.Header.Set("Authorization", "Bearer "+strings.Repeat("a", 64<<10))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("huge header: got %d, want 431", resp.StatusCode)
		}
		for _, e := range f.audit.all() {
			b, _ := json.Marshal(e)
			if strings.Contains(string(b), parts[2]) || strings.Contains(string(b), good) {
				t.Fatalf("the audit holds a token: %s", b)
			}
		}
	})
}

// TestCheckHTTP_OIDCAlone: a server with only a provider (no static token) may start.
func TestCheckHTTP_OIDCAlone(t *testing.T) {
	if err := mcpserver.CheckHTTP(mcpserver.HTTPConfig{Addr: "127.0.0.1:0", OIDC: oidcVerifier(t, "https://id.example")}); err != nil {
		t.Fatal(err)
	}
	if err := mcpserver.CheckHTTP(mcpserver.HTTPConfig{Addr: "127.0.0.1:0"}); err == nil {
		t.Fatal("no token and no provider started")
	}
}

// TestHTTP_BinaryOIDC runs the real binary with only auth.oidc in agora.yaml (no static
// token): it starts, the SDK client signs in by itself, the audit log names the token's
// subject, and neither the log nor the audit holds a token.
func TestHTTP_BinaryOIDC(t *testing.T) {
	p := oidctest.Start(t, oidctest.Config{Services: oidcServices})
	home := newHome(t)
	cfg := fmt.Sprintf("auth:\n  oidc:\n    issuer: %s\n    audience: %s\n    allow_private: [127.0.0.1/32]\n    rules:\n      - {group: platform, ceiling: orchestrate, web: operator}\n      - {group: readers, ceiling: read}\n", p.Issuer, oidcAudience)
	f, err := os.OpenFile(filepath.Join(home, "agora.yaml"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(cfg)
	f.Close()
	srv := httpServer(t, home, nil)
	cs := sdkOIDCSession(t, srv.url, "svc-readers", "readers-secret")
	if n := len(toolNames(t, cs)); n != 8 {
		t.Fatalf("read ceiling sees %d tools, want 8", n)
	}
	res := call(t, cs, "agora_dispatch", map[string]any{"subagent": "rogue"})
	actor := "oidc:" + p.Issuer + "#svc-readers"
	if !res.IsError || !strings.Contains(text(res), fmt.Sprintf("client %q may not call agora_dispatch: its ceiling is read", actor)) {
		t.Fatalf("got %q", text(res))
	}
	tok := p.Token(t, "svc-nobody")
	addr := strings.TrimSuffix(strings.TrimPrefix(srv.url, "http://"), "/mcp")
	if code, _, _ := post(t, addr, "/mcp", map[string]string{"Authorization": "Bearer " + tok}, initialize); code != http.StatusForbidden {
		t.Fatalf("no rule: got %d, want 403", code)
	}
	var saw []string
	for _, e := range auditEntries(t, home) {
		saw = append(saw, e.Actor+" "+e.Kind+" "+e.Details["tool"].(string)+" "+e.Details["decision"].(string))
	}
	if want := []string{actor + " mcp.tool.denied agora_dispatch denied"}; strings.Join(saw, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit:\n%s\nwant:\n%s", strings.Join(saw, "\n"), strings.Join(want, "\n"))
	}
	if strings.Contains(srv.logs(), strings.Split(tok, ".")[2]) {
		t.Fatal("the server log holds a token")
	}
}
