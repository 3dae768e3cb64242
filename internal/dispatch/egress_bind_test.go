package dispatch_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestEgress_BoundCredential: a secret bound to git.test never enters the sandbox. git clones
// from git.test with the placeholder in its Authorization header and the server sees the real
// token (the proxy terminated TLS with the dispatch's CA); the sandbox's environment, every
// /proc/*/environ it can read, a file it writes and its output hold only the placeholder; the
// placeholder sent to an unbound host, or over plain HTTP to the bound host, is refused and
// audited; the value is in no record, log or audit entry.
func TestEgress_BoundCredential(t *testing.T) {
	const value = "ghp_BOUNDtokenVALUE0123456789abcdef"
	ca := newTestCA(t)
	e := netEnv(t, ca)
	var mu sync.Mutex
	var gitAuth []string
	gitPort := ca.serveTLS(t, gitServer(t, func(r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		gitAuth = append(gitAuth, r.Header.Get("Authorization"))
		return r.Header.Get("Authorization") == "Bearer "+value
	}))
	var apiSeen, plainSeen []string
	apiPort := servePlain(t, upstreamAddr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		apiSeen = append(apiSeen, r.Header.Get("Authorization"))
		mu.Unlock()
	}))
	// Plain HTTP on the bound host itself: the secret never goes there.
	plainPort := servePlain(t, upstreamAddr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		plainSeen = append(plainSeen, r.Header.Get("Authorization"))
		mu.Unlock()
	}))

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
	e.netSubagent("binder", "  - \"git.test:"+gitPort+"\"\n  - \"git.test:"+plainPort+"\"\n  - \"api.test:"+apiPort+"\"\n", strings.Join([]string{
		`echo "token=$GITHUB_TOKEN"`,
		`mkdir -p "$AGORA_OUT/outputs" && echo "$GITHUB_TOKEN" > "$AGORA_OUT/outputs/token.txt"`,
		`for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f" 2>/dev/null; done > "$AGORA_OUT/outputs/environ.txt"`,
		`git -c http.extraHeader="Authorization: Bearer $GITHUB_TOKEN" clone -q https://git.test:` + gitPort + `/repo.git /tmp/c && cat /tmp/c/README`,
		`curl -sS --fail-with-body -H "Authorization: Bearer $GITHUB_TOKEN" http://api.test:` + apiPort + `/; echo "exit=$?"`,
		`curl -sS --fail-with-body -H "Authorization: Bearer $GITHUB_TOKEN" http://git.test:` + plainPort + `/; echo "plain-exit=$?"`,
	}, "; "))
	r := e.run(dispatch.Request{Subagent: "binder", Envs: []string{"gh"}})
	out := e.stdout(r)
	logs := e.logs(r.ID)
	if r.State != lifecycle.DispatchFinished || !strings.Contains(out, "hello from upstream") {
		t.Fatalf("%s %s: %q\n%s\ngit saw %q", r.State, r.Detail, out, logs, gitAuth)
	}
	if !strings.Contains(out, "token="+dispatch.PlaceholderPrefix) {
		t.Fatalf("the sandbox's variable is not the placeholder: %q", out)
	}
	if !strings.Contains(out, "not bound to this host") || strings.Contains(out, "exit=0") {
		t.Fatalf("the placeholder to an unbound host was not refused: %q", out)
	}
	if !strings.Contains(out, "swaps only inside HTTPS") || strings.Contains(out, "plain-exit=0") || len(plainSeen) != 0 {
		t.Fatalf("the placeholder over plain HTTP to the bound host was not refused (the host saw %q): %q", plainSeen, out)
	}
	for _, a := range apiSeen {
		if strings.Contains(a, dispatch.PlaceholderPrefix) || strings.Contains(a, value) {
			t.Fatalf("the unbound host received %q", a)
		}
	}
	outs := map[string]string{}
	for _, o := range r.Result.Outputs {
		b, err := e.home.Blobs.Get(o.Digest, 0)
		if err != nil {
			t.Fatal(err)
		}
		outs[o.Path] = string(b)
	}
	if !strings.HasPrefix(outs["token.txt"], dispatch.PlaceholderPrefix) {
		t.Fatalf("token.txt = %q", outs["token.txt"])
	}
	if !strings.Contains(outs["environ.txt"], "GITHUB_TOKEN="+dispatch.PlaceholderPrefix) {
		t.Fatalf("environ.txt lacks the placeholder:\n%s", outs["environ.txt"])
	}
	rec, _ := json.Marshal(r)
	stage, _ := os.ReadDir(filepath.Join(e.d.StateDir, r.ID))
	for what, s := range map[string]string{
		"stdout and stderr": out + logs, "outputs": outs["token.txt"] + outs["environ.txt"],
		"record": string(rec), "audit": e.auditDump(),
	} {
		if strings.Contains(s, value) {
			t.Errorf("the value is in the %s", what)
		}
	}
	for _, f := range stage {
		if b, err := os.ReadFile(filepath.Join(e.d.StateDir, r.ID, f.Name())); err == nil && strings.Contains(string(b), value) {
			t.Errorf("the value is in the stage's %s", f.Name())
		}
	}
	dump := e.auditDump()
	if !strings.Contains(dump, `"credentials":["GITHUB_TOKEN"]`) || !strings.Contains(dump, `"terminated":true`) ||
		!strings.Contains(dump, "not bound to this host") || !strings.Contains(dump, "swaps only inside HTTPS") {
		t.Fatalf("audit lacks the swap or the refusals:\n%s", dump)
	}
}
