package dispatch_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestEgress_AttacksFromASandbox drives the proxy's attack tests with the real curl inside
// a real bubblewrap sandbox, through the worker's relay:
//   - path-prefix bypasses on a restricted rule ({host: api.test, methods: [GET], paths:
//     [/repos/acme]}): "..", "%2e%2e", "%252e%252e", "..;", a sibling "/repos/acmeevil" and
//     a method override are refused; "/repos/acme/x" passes;
//   - a host switch inside the terminated session to git.test, where GITHUB_TOKEN is bound:
//     a Host header or an absolute-form target naming mods.test (granted, unbound, the same
//     server) is refused, and mods.test never receives the value.
func TestEgress_AttacksFromASandbox(t *testing.T) {
	requireTool(t, "curl")
	const value = "ghp_ATTACKtokenVALUE0123456789abcdef"
	ca := newTestCA(t)
	e := netEnv(t, ca)
	var mu sync.Mutex
	var seen []string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Host+" "+r.Method+" "+r.URL.RawPath+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		io.WriteString(w, "ok:"+r.URL.Path)
	})
	gitPort := ca.serveTLS(t, h)
	apiPort := ca.serveTLS(t, h)
	p, err := e.w.PrepareEnvSpec("gh", provision.EnvSpec{
		Secrets:  map[string][]byte{"GITHUB_TOKEN": []byte(value)},
		Bindings: map[string]catalog.Binding{"GITHUB_TOKEN": {Hosts: []string{"git.test:" + gitPort}}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.w.Register(t.Context(), "test", "register", p); err != nil {
		t.Fatal(err)
	}
	api := "https://api.test:" + apiPort
	git := "https://git.test:" + gitPort
	rules := "  - \"git.test:" + gitPort + "\"\n  - \"mods.test:" + gitPort + "\"\n" +
		"  - {host: api.test, port: " + apiPort + ", methods: [GET], paths: [/repos/acme]}\n"
	script := []string{
		"curl -sS " + api + "/repos/acme/x; echo",
		"curl -sS --path-as-is " + api + "/repos/acme/../other; echo",
		"curl -sS --path-as-is " + api + "/repos/acme/%2e%2e/other; echo",
		"curl -sS --path-as-is " + api + "/repos/acme/%252e%252e/other; echo",
		"curl -sS --path-as-is " + api + "/repos/acme/..%3b/other; echo",
		"curl -sS --path-as-is '" + api + "/repos/acme/..;/other'; echo",
		"curl -sS " + api + "/repos/acmeevil; echo",
		"curl -sS -H 'X-HTTP-Method-Override: DELETE' " + api + "/repos/acme/x; echo",
		`curl -sS -H "Authorization: Bearer $GITHUB_TOKEN" -H "Host: mods.test:` + gitPort + `" ` + git + "/; echo",
		`curl -sS -H "Authorization: Bearer $GITHUB_TOKEN" --request-target "https://mods.test:` + gitPort + `/x" ` + git + "/; echo",
		`curl -sS -H "Authorization: Bearer $GITHUB_TOKEN" ` + git + "/bound; echo",
	}
	e.netSubagent("attacker", rules, strings.Join(script, "; "))
	// Eleven curls in a row, each a process and a TLS session terminated by the proxy in this
	// race-instrumented test process: a few seconds on a quiet machine, more than the default
	// 30 s dispatch's 16 s for its agent under make stress-all's load. No assertion here is
	// about time; the bound only ends a hung run.
	r := e.run(dispatch.Request{Subagent: "attacker", Envs: []string{"gh"}, Timeout: 2 * time.Minute})
	out := e.stdout(r)
	logs := e.logs(r.ID)
	if r.State != lifecycle.DispatchFinished {
		t.Fatalf("%s %s\n%s\n%s", r.State, r.Detail, out, logs)
	}
	if got := strings.Count(out, "agora refused"); got != 9 {
		t.Fatalf("refusals = %d, want 9:\n%s", got, out)
	}
	if !strings.Contains(out, "ok:/repos/acme/x") || !strings.Contains(out, "ok:/bound") {
		t.Fatalf("the allowed requests failed:\n%s\n%s", out, logs)
	}
	if strings.Count(out, "another host") != 2 {
		t.Fatalf("the host switches were not refused as such:\n%s", out)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]bool{
		"api.test:" + apiPort + " GET /repos/acme/x ":         true,
		"git.test:" + gitPort + " GET /bound Bearer " + value: true,
	}
	for _, s := range seen {
		if !want[s] {
			t.Errorf("the servers saw %q", s)
		}
	}
	if len(seen) != 2 {
		t.Fatalf("the servers saw %d requests, want 2: %q", len(seen), seen)
	}
	if dump := e.auditDump(); strings.Contains(dump+out+logs, value) || strings.Count(dump, `"kind":"net.request"`) != 9 {
		t.Fatalf("audit (the value must be absent, 9 net.request refusals):\n%s", dump)
	}
}
