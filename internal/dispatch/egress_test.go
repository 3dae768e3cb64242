package dispatch_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// gitServer serves a bare repository holding README ("hello from upstream") over smart HTTP
// (git http-backend behind net/http/cgi). check, when set, may refuse a request first.
func gitServer(t *testing.T, check func(*http.Request) bool) http.Handler {
	t.Helper()
	git := requireTool(t, "git")
	root := t.TempDir()
	work := filepath.Join(root, "work")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", work},
		{"-C", work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init"},
	} {
		if out, err := exec.Command(git, args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	os.WriteFile(filepath.Join(work, "README"), []byte("hello from upstream\n"), 0o644)
	for _, args := range [][]string{
		{"-C", work, "add", "README"},
		{"-C", work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "readme"},
		{"clone", "-q", "--bare", work, filepath.Join(root, "repo.git")},
	} {
		if out, err := exec.Command(git, args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	backend := &cgi.Handler{
		Path: git, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if check != nil && !check(r) {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	})
}

// TestEgress_GitCloneThroughTheProxy: a grant naming the host lets git clone over HTTPS through
// the proxy (the host's CA from egress.ca_certs in the sandbox's trust store); without the grant
// the same clone fails and the dispatch's stderr says why; both are audited.
func TestEgress_GitCloneThroughTheProxy(t *testing.T) {
	ca := newTestCA(t)
	e := netEnv(t, ca)
	port := ca.serveTLS(t, gitServer(t, nil))
	url := "https://" + upstreamAddr + ":" + port + "/repo.git"
	script := "git clone -q " + url + " /tmp/c && cat /tmp/c/README"
	e.netSubagent("cloner", "  - \""+upstreamAddr+":"+port+"\"\n", script)
	e.netSubagent("stranger", "  - example.com\n", script)

	r := e.run(dispatch.Request{Subagent: "cloner"})
	if r.State != lifecycle.DispatchFinished || r.Network != dispatch.NetworkProxy {
		t.Fatalf("cloner: %s %s %s (network %s)\n%s", r.State, r.Reason, r.Detail, r.Network, e.logs(r.ID))
	}
	if out := e.stdout(r); !strings.Contains(out, "hello from upstream") {
		t.Fatalf("clone printed %q", out)
	}
	if r.Net == nil || r.Net.Reached[upstreamAddr+":"+port] == 0 {
		t.Fatalf("record's net = %+v", r.Net)
	}

	r2 := e.run(dispatch.Request{Subagent: "stranger"})
	if r2.State != lifecycle.DispatchFailed {
		t.Fatalf("stranger: %s, want failed\n%s", r2.State, e.logs(r2.ID))
	}
	logs := e.logs(r2.ID)
	if !strings.Contains(logs, "agora refused the connection to "+upstreamAddr+":"+port) || !strings.Contains(logs, "only the hosts its grant allows") {
		t.Fatalf("stderr lacks the refusal sentence:\n%s", logs)
	}
	if r2.Net == nil || r2.Net.Refused[upstreamAddr+":"+port] == 0 {
		t.Fatalf("record's net = %+v", r2.Net)
	}
	dump := e.auditDump()
	for _, want := range []string{
		`"kind":"net.connect"`, `"decision":"allow"`, `"decision":"deny"`, `"kind":"net.close"`,
		`dispatch/` + r.ID + ` cloner@`, `dispatch/` + r2.ID + ` stranger@`,
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("audit lacks %s", want)
		}
	}
}

// TestEgress_Curl tries the ways out a tool might: an allowed host, a host outside the grant,
// a granted name that resolves to an address the policy refuses, a literal IP outside the
// grant, and a redirect from an allowed host to a refused one.
func TestEgress_Curl(t *testing.T) {
	requireTool(t, "curl")
	ca := newTestCA(t)
	e := netEnv(t, ca)
	ok := ca.serveTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://127.0.0.3:9/steal", http.StatusFound)
			return
		}
		io.WriteString(w, "allowed-body")
	}))
	base := "https://" + upstreamAddr + ":" + ok
	// loop.test is granted but resolves to 127.0.0.1, which egress.allow_private does not admit.
	e.netSubagent("curler", "  - \""+upstreamAddr+":"+ok+"\"\n  - "+loopName+"\n", strings.Join([]string{
		"curl -sS " + base + "/ && echo",
		"curl -sS --fail-with-body https://evil.example/ ; echo \"exit=$?\"",
		"curl -sS --fail-with-body http://" + loopName + ":8080/ ; echo \"exit=$?\"",
		"curl -sS --fail-with-body http://127.0.0.3:" + ok + "/ ; echo \"exit=$?\"",
		"curl -sSL --fail-with-body " + base + "/redirect ; echo \"exit=$?\"",
	}, "; "))
	r := e.run(dispatch.Request{Subagent: "curler"})
	out := e.stdout(r)
	if r.State != lifecycle.DispatchFinished || !strings.Contains(out, "allowed-body") {
		t.Fatalf("%s %s: %q\n%s", r.State, r.Detail, out, e.logs(r.ID))
	}
	for _, want := range []string{
		"evil.example:443: not in the dispatch's egress grant",
		loopName + ":8080: it resolves to 127.0.0.1",
		"127.0.0.3:" + ok + ": not in the dispatch's egress grant",
		"127.0.0.3:9: not in the dispatch's egress grant",
	} {
		if !strings.Contains(out+e.logs(r.ID), "agora refused the connection to "+want) {
			t.Errorf("no refusal %q in\n%s", want, out+e.logs(r.ID))
		}
	}
	if strings.Count(out, "exit=0") != 0 {
		t.Errorf("a refused request exited 0:\n%s", out)
	}
}

// TestEgress_MethodAndPathRules: a rule with methods and paths refuses a POST and a path
// outside its prefix, over plain HTTP and over HTTPS (which the proxy then terminates).
func TestEgress_MethodAndPathRules(t *testing.T) {
	requireTool(t, "curl")
	ca := newTestCA(t)
	e := netEnv(t, ca)
	var seen []string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Method+" "+r.URL.Path)
		io.WriteString(w, "ok:"+r.URL.Path)
	})
	tlsPort := ca.serveTLS(t, h)
	plainPort := servePlain(t, upstreamAddr, h)
	rules := ""
	var script []string
	for _, u := range []string{"https://" + upstreamAddr + ":" + tlsPort, "http://" + upstreamAddr + ":" + plainPort} {
		port := u[strings.LastIndexByte(u, ':')+1:]
		rules += "  - {host: \"" + upstreamAddr + "\", port: " + port + ", methods: [GET], paths: [/repos/acme/]}\n"
		script = append(script,
			"curl -sS "+u+"/repos/acme/x; echo",
			"curl -sS -X POST -d x=1 "+u+"/repos/acme/x; echo",
			"curl -sS "+u+"/repos/other/x; echo",
			"curl -sS --path-as-is "+u+"/repos/acme/../other/x; echo")
	}
	e.netSubagent("ruled", rules, strings.Join(script, "; "))
	// Eight curls through the proxy: under make stress's CPU hog they outlasted the default
	// 30 s (16 s for the agent). A budget, not an assertion.
	r := e.run(dispatch.Request{Subagent: "ruled", Timeout: 2 * time.Minute})
	out := e.stdout(r)
	if r.State != lifecycle.DispatchFinished {
		t.Fatalf("%s %s: %s\n%s\n%s", r.State, r.Reason, r.Detail, out, e.logs(r.ID))
	}
	if got := strings.Count(out, "ok:/repos/acme/x"); got != 2 {
		t.Fatalf("allowed GETs answered %d times:\n%s\n%s", got, out, e.logs(r.ID))
	}
	if got := strings.Count(out, "agora refused"); got != 6 {
		t.Fatalf("refusals = %d, want 6:\n%s", got, out)
	}
	for _, s := range seen {
		if s != "GET /repos/acme/x" {
			t.Fatalf("the server saw %q", s)
		}
	}
	if !strings.Contains(e.auditDump(), `"kind":"net.request"`) {
		t.Fatal("refused requests not audited")
	}
}

// TestEgress_RawConnectStillFails: inside the sandbox nothing but the proxy leads out: a
// direct connection to the host's loopback servers, bypassing the proxy, fails.
func TestEgress_RawConnectStillFails(t *testing.T) {
	requireTool(t, "curl")
	e := netEnv(t, nil)
	port := servePlain(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "host-loopback") }))
	port2 := servePlain(t, upstreamAddr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "host-alias") }))
	e.netSubagent("raw", "  - \""+upstreamAddr+"\"\n", fmt.Sprintf(
		"curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:%s/; echo \"a=$?\"; curl -sS --noproxy '*' --max-time 5 http://%s:%s/; echo \"b=$?\"; curl -sS http://%s:%s/; echo",
		port, upstreamAddr, port2, upstreamAddr, port2))
	r := e.run(dispatch.Request{Subagent: "raw"})
	out := e.stdout(r)
	if strings.Contains(out, "host-loopback") || strings.Contains(out, "a=0") || strings.Contains(out, "b=0") {
		t.Fatalf("a direct connection left the sandbox:\n%s", out)
	}
	if !strings.Contains(out, "host-alias") {
		t.Fatalf("the same host through the proxy failed:\n%s\n%s", out, e.logs(r.ID))
	}
}

// TestEgress_GoModDownload: go mod download from a module proxy the grant names.
func TestEgress_GoModDownload(t *testing.T) {
	goBin := requireTool(t, "go")
	if !strings.HasPrefix(goBin, "/usr/") {
		t.Skipf("SKIP: go is at %s, outside the sandbox's read-only /usr", goBin)
	}
	ca := newTestCA(t)
	e := netEnv(t, ca)
	port := ca.serveTLS(t, goProxy(t))
	e.netSubagent("gomod", "  - \"mods.test:"+port+"\"\n", strings.Join([]string{
		"export GOPROXY=https://mods.test:" + port + " GOSUMDB=off GOTOOLCHAIN=local GOFLAGS=-modcacherw GOMODCACHE=/tmp/mod GOCACHE=/tmp/gocache",
		"mkdir /tmp/m && cd /tmp/m && " + goBin + " mod init example.test/app >/dev/null 2>&1",
		goBin + " mod download -json example.test/hello@v1.0.0",
		"cat /tmp/mod/example.test/hello@v1.0.0/hello.go",
	}, " && "))
	r := e.run(dispatch.Request{Subagent: "gomod"})
	if out := e.stdout(r); r.State != lifecycle.DispatchFinished || !strings.Contains(out, "package hello") {
		t.Fatalf("%s %s: %q\n%s", r.State, r.Detail, out, e.logs(r.ID))
	}
}

// goProxy serves one module, example.test/hello v1.0.0, by the GOPROXY protocol.
func goProxy(t *testing.T) http.Handler {
	t.Helper()
	var zb bytes.Buffer
	zw := newZip(&zb)
	zw.add("example.test/hello@v1.0.0/go.mod", "module example.test/hello\n\ngo 1.21\n")
	zw.add("example.test/hello@v1.0.0/hello.go", "package hello\n\nfunc Hello() string { return \"hi\" }\n")
	zw.close(t)
	files := map[string][]byte{
		"/example.test/hello/@v/list":        []byte("v1.0.0\n"),
		"/example.test/hello/@v/v1.0.0.info": []byte(`{"Version":"v1.0.0","Time":"2026-01-01T00:00:00Z"}`),
		"/example.test/hello/@v/v1.0.0.mod":  []byte("module example.test/hello\n\ngo 1.21\n"),
		"/example.test/hello/@v/v1.0.0.zip":  zb.Bytes(),
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	})
}

// TestEgress_NPMInstall: npm install from a registry the grant names.
func TestEgress_NPMInstall(t *testing.T) {
	npm := requireTool(t, "npm")
	if !strings.HasPrefix(npm, "/usr/") {
		t.Skipf("SKIP: npm is at %s, outside the sandbox's read-only /usr", npm)
	}
	ca := newTestCA(t)
	e := netEnv(t, ca)
	var port string
	port = ca.serveTLS(t, npmRegistry(t, func() string { return "https://registry.test:" + port }))
	e.netSubagent("npmer", "  - \"registry.test:"+port+"\"\n", strings.Join([]string{
		"mkdir /tmp/p && cd /tmp/p && echo '{\"name\":\"p\",\"version\":\"1.0.0\"}' > package.json",
		"npm install --no-audit --no-fund --no-update-notifier --loglevel=http --fetch-retries=0 --registry https://registry.test:" + port + "/ agora-left-pad",
		"cat node_modules/agora-left-pad/index.js",
	}, " && "))
	r := e.run(dispatch.Request{Subagent: "npmer", Timeout: 120e9})
	if out := e.stdout(r); r.State != lifecycle.DispatchFinished || !strings.Contains(out, "module.exports") {
		t.Fatalf("%s %s: %q\n%s", r.State, r.Detail, out, e.logs(r.ID))
	}
}

// npmRegistry serves one package, agora-left-pad 1.0.0: its packument and its tarball.
func npmRegistry(t *testing.T, base func() string) http.Handler {
	t.Helper()
	var tb bytes.Buffer
	gz := gzip.NewWriter(&tb)
	tw := tar.NewWriter(gz)
	for name, body := range map[string]string{
		"package/package.json": `{"name":"agora-left-pad","version":"1.0.0","main":"index.js"}`,
		"package/index.js":     "module.exports = (s, n) => s.padStart(n);\n",
	} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body))})
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	tgz := tb.Bytes()
	sum := sha1.Sum(tgz)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/agora-left-pad":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"name":"agora-left-pad","dist-tags":{"latest":"1.0.0"},"versions":{"1.0.0":{"name":"agora-left-pad","version":"1.0.0","dist":{"tarball":"%s/agora-left-pad/-/agora-left-pad-1.0.0.tgz","shasum":"%s"}}}}`,
				base(), hex.EncodeToString(sum[:]))
		case "/agora-left-pad/-/agora-left-pad-1.0.0.tgz":
			w.Write(tgz)
		default:
			http.NotFound(w, r)
		}
	})
}

// TestEgress_200ConcurrentFromASandbox: 200 connections at once from one sandbox, through the
// worker's relay and the proxy, all answered.
func TestEgress_200ConcurrentFromASandbox(t *testing.T) {
	requireTool(t, "curl")
	requireTool(t, "xargs")
	ca := newTestCA(t)
	e := netEnv(t, ca)
	port := ca.serveTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
	e.netSubagent("swarm", "  - \"api.test:"+port+"\"\n",
		"seq 200 | xargs -P 200 -I{} curl -sS --max-time 150 -o /dev/null -w '%{http_code}\\n' https://api.test:"+port+"/{} | sort | uniq -c")
	// Four minutes (the agent gets 156 s of it): at load 12 on 2 cores, 120 s (66 s for the
	// agent) ran out before the 200 were answered.
	r := e.run(dispatch.Request{Subagent: "swarm", Timeout: 240e9})
	out := e.stdout(r)
	if r.State != lifecycle.DispatchFinished || !strings.Contains(out, "200 200") {
		t.Fatalf("%s %s: %q\n%s", r.State, r.Detail, out, e.logs(r.ID))
	}
	if r.Net == nil || r.Net.Reached["api.test:"+port] != 200 {
		t.Fatalf("net = %+v", r.Net)
	}
}
