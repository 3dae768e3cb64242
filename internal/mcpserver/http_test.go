package mcpserver_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/mcpserver"
)

// initialize is a valid first request body.
const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

// post sends one raw MCP POST to http://addr/path with the given extra headers (Host sets the
// Host header) and returns the response status, headers and body.
func post(t testing.TB, addr, path string, headers map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func clients(tokens ...string) []mcpserver.Client {
	names := []string{"reader", "dispatcher", "orchestrator"}
	out := make([]mcpserver.Client, len(tokens))
	for i, tok := range tokens {
		out[i] = mcpserver.Client{Name: names[i], Token: tok, Ceiling: mcpserver.Ceilings[i]}
	}
	return out
}

func TestCheckHTTP_RefusesToStart(t *testing.T) {
	good := strings.Repeat("a", 32)
	tests := []struct {
		name string
		cfg  mcpserver.HTTPConfig
		want error
	}{
		{"no token", mcpserver.HTTPConfig{Addr: "127.0.0.1:8765"}, mcpserver.ErrNoToken},
		{"short token", mcpserver.HTTPConfig{Addr: "127.0.0.1:8765", Clients: clients(strings.Repeat("a", 31))}, mcpserver.ErrWeakToken},
		{"token with a space", mcpserver.HTTPConfig{Addr: "127.0.0.1:8765", Clients: clients(strings.Repeat("a", 31) + " b")}, mcpserver.ErrWeakToken},
		{"every interface", mcpserver.HTTPConfig{Addr: "0.0.0.0:8765", Clients: clients(good)}, mcpserver.ErrExposedBind},
		{"empty host", mcpserver.HTTPConfig{Addr: ":8765", Clients: clients(good)}, mcpserver.ErrExposedBind},
		{"a LAN address", mcpserver.HTTPConfig{Addr: "192.168.1.10:8765", Clients: clients(good)}, mcpserver.ErrExposedBind},
		{"another loopback spelling", mcpserver.HTTPConfig{Addr: "127.0.0.2:8765", Clients: clients(good)}, mcpserver.ErrExposedBind},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := mcpserver.CheckHTTP(tt.cfg)
			if !errors.Is(err, tt.want) {
				t.Fatalf("CheckHTTP = %v, want %v", err, tt.want)
			}
			s := newFixture().server(t)
			if err := s.ListenHTTP(t.Context(), tt.cfg); !errors.Is(err, tt.want) {
				t.Errorf("ListenHTTP = %v, want %v before binding anything", err, tt.want)
			}
		})
	}
	for _, ok := range []mcpserver.HTTPConfig{
		{Addr: "localhost:8765", Clients: clients(good)},
		{Addr: "[::1]:8765", Clients: clients(good)},
		{Addr: "0.0.0.0:8765", Clients: clients(good), AllowAny: true},
	} {
		if err := mcpserver.CheckHTTP(ok); err != nil {
			t.Errorf("CheckHTTP(%s) = %v, want nil", ok.Addr, err)
		}
	}
}

// TestMCPCommand_RefusesToStart runs the real binary: each refusal exits 2 with a message
// and a hint, binds nothing, and never prints the token.
func TestMCPCommand_RefusesToStart(t *testing.T) {
	dir := t.TempDir()
	short := "short-token-that-must-not-be-echoed"[:31]
	good := newToken(t)
	open := filepath.Join(dir, "open.yaml")
	os.WriteFile(open, []byte("- {name: a, token: "+good+", ceiling: read}\n"), 0o644)
	noCeiling := filepath.Join(dir, "noceiling.yaml")
	os.WriteFile(noCeiling, []byte("- {name: a, token: "+good+"}\n"), 0o600)
	tests := []struct {
		name string
		env  []string
		addr string
		want string
	}{
		{"no token", nil, "127.0.0.1:0", "no token, no bind"},
		{"short token", []string{"AGORA_HTTP_TOKEN=" + short}, "127.0.0.1:0", "at least 32 are required"},
		{"every interface without the opt-in", []string{"AGORA_HTTP_TOKEN=" + good}, "0.0.0.0:0", "also needs AGORA_HTTP_ALLOW_ANY=yes-i-understand-the-risk"},
		{"an opt-in that is not the literal", []string{"AGORA_HTTP_TOKEN=" + good, "AGORA_HTTP_ALLOW_ANY=yes"}, "0.0.0.0:0", "must be exactly yes-i-understand-the-risk"},
		{"both token variables", []string{"AGORA_HTTP_TOKEN=" + good, "AGORA_HTTP_TOKENS_FILE=" + open}, "127.0.0.1:0", "use one"},
		{"tokens file others can read", []string{"AGORA_HTTP_TOKENS_FILE=" + open}, "127.0.0.1:0", "readable or writable by others"},
		{"tokens file without a ceiling", []string{"AGORA_HTTP_TOKENS_FILE=" + noCeiling}, "127.0.0.1:0", "ceiling is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(agoraBin, "mcp", "--http", tt.addr)
			cmd.Env = append(baseEnv(filepath.Join(t.TempDir(), "home")), tt.env...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("exit = %v, want 2\n%s", err, out)
			}
			if !strings.Contains(string(out), tt.want) || !strings.Contains(string(out), "agora: hint:") {
				t.Errorf("output lacks %q and a hint:\n%s", tt.want, out)
			}
			if strings.Contains(string(out), short) || strings.Contains(string(out), good) {
				t.Errorf("output echoes a token:\n%s", out)
			}
			if strings.Contains(string(out), "mcp server listening") {
				t.Errorf("it listened:\n%s", out)
			}
		})
	}
}

func TestHTTP_Unauthenticated(t *testing.T) {
	token := newToken(t)
	addr := newFixture().http(t, mcpserver.HTTPConfig{Clients: clients(token)})
	tests := []struct {
		name   string
		header string
	}{
		{"no header", ""},
		{"wrong token", "Bearer " + newToken(t)},
		{"token prefix", "Bearer " + token[:32]},
		{"token plus one", "Bearer " + token + "x"},
		{"basic", "Basic " + token},
		{"empty bearer", "Bearer "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{}
			if tt.header != "" {
				h["Authorization"] = tt.header
			}
			code, hdr, body := post(t, addr, "/mcp", h, initialize)
			if code != http.StatusUnauthorized || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("got %d WWW-Authenticate=%q, want 401 with a Bearer challenge", code, hdr.Get("WWW-Authenticate"))
			}
			if strings.Contains(body, token[:16]) {
				t.Errorf("the 401 body echoes the token: %q", body)
			}
		})
	}
	code, hdr, _ := post(t, addr, "/mcp", map[string]string{"Authorization": "bearer " + token}, initialize)
	if code != http.StatusOK || hdr.Get("WWW-Authenticate") != "" {
		t.Errorf("with the token (scheme in any case): got %d WWW-Authenticate=%q, want 200 and no challenge", code, hdr.Get("WWW-Authenticate"))
	}
}

func TestHTTP_ForbiddenHostAndOrigin(t *testing.T) {
	token := newToken(t)
	addr := newFixture().http(t, mcpserver.HTTPConfig{Clients: clients(token), AllowHosts: []string{"agora.internal"}})
	_, port, _ := net.SplitHostPort(addr)
	auth := "Bearer " + token
	tests := []struct {
		name    string
		headers map[string]string
		want    int
	}{
		{"bound address", map[string]string{}, http.StatusOK},
		{"localhost", map[string]string{"Host": "localhost:" + port}, http.StatusOK},
		{"allowed host", map[string]string{"Host": "agora.internal:" + port}, http.StatusOK},
		{"rebound name", map[string]string{"Host": "evil.example.com:" + port}, http.StatusForbidden},
		{"rebound name without port", map[string]string{"Host": "evil.example.com"}, http.StatusForbidden},
		{"right host wrong port", map[string]string{"Host": "127.0.0.1:1"}, http.StatusForbidden},
		{"same origin", map[string]string{"Origin": "http://127.0.0.1:" + port}, http.StatusOK},
		{"foreign origin", map[string]string{"Origin": "https://evil.example.com"}, http.StatusForbidden},
		{"null origin", map[string]string{"Origin": "null"}, http.StatusForbidden},
		{"origin on another port", map[string]string{"Origin": "http://localhost:6274"}, http.StatusForbidden},
		{"cross-site fetch", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, withToken := range []bool{true, false} {
				h := map[string]string{}
				for k, v := range tt.headers {
					h[k] = v
				}
				if withToken {
					h["Authorization"] = auth
				}
				code, _, body := post(t, addr, "/mcp", h, initialize)
				want := tt.want
				if !withToken && want == http.StatusOK {
					want = http.StatusUnauthorized
				}
				if code != want {
					t.Errorf("token=%v: got %d (%s), want %d", withToken, code, strings.TrimSpace(body), want)
				}
			}
		})
	}
	if code, _, _ := post(t, addr, "/other", map[string]string{"Authorization": auth}, initialize); code != http.StatusNotFound {
		t.Errorf("another path: got %d, want 404", code)
	}
}

// TestHTTP_HostCheckedOffLoopback binds an address that is not loopback, where the SDK's own
// rebinding check does nothing: a foreign Host must still be refused.
func TestHTTP_HostCheckedOffLoopback(t *testing.T) {
	ip := nonLoopbackIP(t)
	token := newToken(t)
	addr := newFixture().http(t, mcpserver.HTTPConfig{Addr: net.JoinHostPort(ip, "0"), AllowAny: true, Clients: clients(token)})
	auth := map[string]string{"Authorization": "Bearer " + token}
	if code, _, body := post(t, addr, "/mcp", auth, initialize); code != http.StatusOK {
		t.Fatalf("bound address: got %d %s, want 200", code, body)
	}
	auth["Host"] = "rebound.example.com"
	if code, _, _ := post(t, addr, "/mcp", auth, initialize); code != http.StatusForbidden {
		t.Errorf("rebound Host: got %d, want 403", code)
	}
}

func nonLoopbackIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("SKIP: no interface addresses: %v", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Skip("SKIP: this machine has no non-loopback IPv4 address to bind")
	return ""
}

func TestHTTP_RateLimited(t *testing.T) {
	token := newToken(t)
	addr := newFixture().http(t, mcpserver.HTTPConfig{Clients: clients(token), Limits: mcpserver.Limits{Rate: 1, Burst: 5}})
	codes := map[int]int{}
	var retry string
	for range 20 {
		code, hdr, _ := post(t, addr, "/mcp", map[string]string{"Authorization": "Bearer " + token}, initialize)
		codes[code]++
		if code == http.StatusTooManyRequests {
			retry = hdr.Get("Retry-After")
		}
	}
	if codes[http.StatusOK] < 5 || codes[http.StatusOK] > 6 || codes[http.StatusTooManyRequests] < 14 || retry == "" {
		t.Errorf("status counts %v, Retry-After %q: want the burst of 5 (or 6) served, the rest 429 with Retry-After", codes, retry)
	}
}

func TestHTTP_InFlightCapped(t *testing.T) {
	f := newFixture()
	release := make(chan struct{})
	entered := make(chan struct{}, 4)
	f.disp.get = func(ctx context.Context, id string) (*mcpserver.Record, error) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return record(id, "finished"), nil
	}
	token := newToken(t)
	addr := f.http(t, mcpserver.HTTPConfig{Clients: clients(token, newToken(t), newToken(t)), Limits: mcpserver.Limits{MaxInFlight: 1}})
	cs := httpSession(t, "http://"+addr+"/mcp", token)
	done := make(chan struct{})
	go func() {
		defer close(done)
		cs.CallTool(context.Background(), describeParams())
	}()
	<-entered
	code, _, _ := post(t, addr, "/mcp", map[string]string{"Authorization": "Bearer " + token}, initialize)
	if code != http.StatusTooManyRequests {
		t.Errorf("a second request while one is in flight: got %d, want 429", code)
	}
	close(release)
	<-done
}

func TestHTTP_BodyLimit(t *testing.T) {
	token := newToken(t)
	addr := newFixture().http(t, mcpserver.HTTPConfig{Clients: clients(token)})
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", 3<<20) + `"}}`
	if code, _, _ := post(t, addr, "/mcp", map[string]string{"Authorization": "Bearer " + token}, body); code != http.StatusRequestEntityTooLarge {
		t.Errorf("got %d, want 413", code)
	}
}

// TestHTTP_Ceilings: a client sees and may call only what its token's ceiling allows, and a
// new session on the same token starts with the same ceiling.
func TestHTTP_Ceilings(t *testing.T) {
	f := newFixture()
	f.disp.get = func(_ context.Context, id string) (*mcpserver.Record, error) { return record(id, "finished"), nil }
	f.disp.dispatch = func(context.Context, mcpserver.DispatchRequest) (*mcpserver.Record, error) {
		return record(dispatchID, "finished"), nil
	}
	tokens := []string{newToken(t), newToken(t), newToken(t)}
	url := "http://" + f.http(t, mcpserver.HTTPConfig{Clients: clients(tokens...)}) + "/mcp"
	read := []string{"agora_capabilities_list", "agora_dispatch_describe", "agora_envs_list", "agora_orchestrator_schedule_show",
		"agora_orchestrator_schedules_list", "agora_orchestrator_status", "agora_orchestrator_watch", "agora_subagents_list"}
	dispatch := append(slices.Clone(read), "agora_dispatch", "agora_dispatch_cancel")
	all := append(slices.Clone(dispatch), "agora_orchestrator_submit")
	for i, want := range [][]string{read, dispatch, all} {
		got := toolNames(t, httpSession(t, url, tokens[i]))
		slices.Sort(got)
		slices.Sort(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("tools of %s (-want +got):\n%s", mcpserver.Ceilings[i], diff)
		}
	}
	for session := range 2 { // the second session must not shed the ceiling
		cs := httpSession(t, url, tokens[0])
		res := call(t, cs, "agora_dispatch", map[string]any{"subagent": "writer"})
		want := `client "reader" may not call agora_dispatch: its ceiling is read, and agora_dispatch needs dispatch`
		if !res.IsError || text(res) != want {
			t.Errorf("session %d: got %q, want %q", session, text(res), want)
		}
		cs.Close()
	}
	if res := call(t, httpSession(t, url, tokens[1]), "agora_dispatch", map[string]any{"subagent": "writer", "wait_seconds": 0}); res.IsError {
		t.Errorf("dispatcher client: %s", text(res))
	}
	var denied []string
	for _, e := range f.audit.all() {
		if e.Kind == entry.MCPToolDenied {
			denied = append(denied, e.Actor+" "+e.Details["tool"].(string)+" "+e.Details["ceiling"].(string))
		}
	}
	if diff := cmp.Diff([]string{"reader agora_dispatch read", "reader agora_dispatch read"}, denied); diff != "" {
		t.Errorf("denials audited (-want +got):\n%s", diff)
	}
}

// TestHTTP_BinaryCeilingsAndAudit runs the real binary with a tokens file: the read client's
// denial lands in the audit log, the token appears in no log, and the server shuts down on
// SIGINT.
func TestHTTP_BinaryCeilingsAndAudit(t *testing.T) {
	home := newHome(t)
	reader, orch := newToken(t), newToken(t)
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	src := "- name: ci-reader\n  token: " + reader + "\n  ceiling: read\n- {name: planner, token: " + orch + ", ceiling: orchestrate}\n"
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httpServer(t, home, []string{"AGORA_HTTP_TOKENS_FILE=" + file})
	cs := httpSession(t, srv.url, reader)
	if names := toolNames(t, cs); slices.Contains(names, "agora_dispatch") || len(names) != 8 {
		t.Errorf("read client sees %v", names)
	}
	res := call(t, cs, "agora_dispatch", map[string]any{"subagent": "rogue"})
	if !res.IsError || !strings.Contains(text(res), `client "ci-reader" may not call agora_dispatch: its ceiling is read`) {
		t.Errorf("got %q", text(res))
	}
	var list struct{ Subagents []map[string]any }
	decode(t, call(t, cs, "agora_subagents_list", nil), &list)
	if len(list.Subagents) != 4 {
		t.Errorf("subagents %v", list.Subagents)
	}
	if got := len(toolNames(t, httpSession(t, srv.url, orch))); got != 11 {
		t.Errorf("orchestrate client sees %d tools, want 11", got)
	}
	var saw []string
	for _, e := range auditEntries(t, home) {
		saw = append(saw, e.Actor+" "+e.Kind+" "+e.Details["tool"].(string)+" "+e.Details["decision"].(string))
		if len(e.Details["args_sha256"].(string)) != 64 {
			t.Errorf("entry without an argument hash: %+v", e)
		}
	}
	want := []string{"ci-reader mcp.tool.denied agora_dispatch denied", "ci-reader mcp.tool.call agora_subagents_list allowed"}
	if diff := cmp.Diff(want, saw); diff != "" {
		t.Errorf("audit log (-want +got):\n%s", diff)
	}
	for _, tok := range []string{reader, orch} {
		if strings.Contains(srv.logs(), tok) {
			t.Errorf("the server log holds a token")
		}
	}
}

func describeParams() *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: "agora_dispatch_describe", Arguments: map[string]any{"id": dispatchID}}
}
