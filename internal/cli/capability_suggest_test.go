package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// suggestUpstream is where the end-to-end test's server listens: loopback, but not the
// sandbox's own 127.0.0.1; agora.yaml's egress.allow_private admits it.
const suggestUpstream = "127.0.0.2"

// suggestE2E is the end-to-end test's world: a server on suggestUpstream, a home, and the
// real binary.
type suggestE2E struct {
	t      *testing.T
	dir    string
	env    map[string]string
	port   string
	repo   string
	mu     sync.Mutex
	served []string
}

// newSuggestE2E starts the server and a home whose subagent fetcher runs, with the exec
// runtime, a script that GETs the path its input names; its grant admits the command and the
// host but only HEAD /none, so every GET is refused.
//
// With learn, agora.yaml's egress.learn_hosts names the server's address instead and fetcher
// holds no grant at all: a learn dispatch records its command and its requests as would-deny.
func newSuggestE2E(t *testing.T, learn bool) *suggestE2E {
	for _, tool := range []string{"bwrap", "git", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIP: %s not installed; the end-to-end suggest test dispatches in a sandbox with it", tool)
		}
	}
	e := &suggestE2E{t: t, dir: t.TempDir()}
	ln, err := net.Listen("tcp", suggestUpstream+":0")
	if err != nil {
		t.Skipf("SKIP: cannot listen on %s: %v", suggestUpstream, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.served = append(e.served, r.Method+" "+r.URL.Path)
		e.mu.Unlock()
		io.WriteString(w, "ok")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	e.port = strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	e.env = map[string]string{"AGORA_HOME": filepath.Join(e.dir, "agora"), "HOME": e.dir, "USER": "tester"}
	e.must("init")
	yaml := "egress:\n  allow_private: [\"" + suggestUpstream + "/32\"]\n"
	if learn {
		yaml += "  learn_hosts: [\"" + suggestUpstream + "\"]\n"
	}
	writeFile(t, filepath.Join(e.env["AGORA_HOME"], "agora.yaml"), yaml)
	script := "#!/bin/sh\np=$(printf '%s' \"$AGORA_INPUT_JSON\" | sed -n 's/.*\"path\":\"\\([^\"]*\\)\".*/\\1/p')\n" +
		"curl -sS -o /dev/null -w 'status=%{http_code}\\n' \"http://" + suggestUpstream + ":" + e.port + "$p\"\n"
	writeFile(t, filepath.Join(e.dir, "caps", "script", "run.sh"), script)
	writeFile(t, filepath.Join(e.dir, "caps", "start", "capability.yaml"), fmt.Sprintf(
		"commands: [%q]\negress:\n  - {host: %q, port: %s, methods: [HEAD], paths: [/none]}\n", suggestRun, suggestUpstream, e.port))
	e.must("capability", "register", "script", "--from", filepath.Join(e.dir, "caps", "script"))
	e.must("capability", "register", "start", "--from", filepath.Join(e.dir, "caps", "start"))
	caps := "script,start"
	if learn {
		caps = "script"
	}
	e.must("subagent", "register", "fetcher", "--runtime", "exec", "--command", suggestRun, "--capability", caps)
	e.repo = filepath.Join(e.dir, "repo")
	gitInit(t, e.repo)
	return e
}

// suggestRun is the fetcher's command: a script from its capability, so a pattern can hold it.
const suggestRun = "sh /agora/capabilities/script/run.sh"

func (e *suggestE2E) agora(args ...string) (string, string, int) {
	e.t.Helper()
	cmd := agoraProcess(e.t, e.env, args...)
	cmd.Dir = e.dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("agora %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

func (e *suggestE2E) must(args ...string) string {
	e.t.Helper()
	out, errOut, code := e.agora(args...)
	if code != 0 {
		e.t.Fatalf("agora %v: exit %d\n%s%s", args, code, out, errOut)
	}
	return out
}

// dispatch runs fetcher on path and returns the dispatch id and how many of its entries
// refused something.
func (e *suggestE2E) dispatch(path string, flags ...string) (string, int) {
	e.t.Helper()
	args := append([]string{"dispatch", "run", "--subagent", "fetcher", "--repo", e.repo, "--input", `{"path":"` + path + `"}`, "-o", "json"}, flags...)
	out, errOut, code := e.agora(args...)
	var rec struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec.State != "finished" {
		e.t.Fatalf("dispatch %s: exit %d, %v\n%s%s", path, code, err, out, errOut)
	}
	return rec.ID, refusals(e.t, e.must("audit", "log", "-o", "json"), rec.ID)
}

// TestCapabilitySuggest_EndToEnd runs the real binary and bubblewrap: three dispatches of an
// exec subagent whose grant refuses their requests (each refusal a net.request entry). suggest
// proposes none of them: it lists them apart, as the agent tried them and the proxy refused
// them, and the capability.yaml it writes admits none of them.
// What the work needs beyond its grant is learned with --learn (the test below).
func TestCapabilitySuggest_EndToEnd(t *testing.T) {
	e := newSuggestE2E(t, false)
	paths := []string{"/repos/acme/a", "/repos/acme/b", "/issues/1"}
	var ids []string
	for _, p := range paths {
		id, n := e.dispatch(p)
		if n != 1 {
			t.Fatalf("dispatch %s under the first grant: %d refusals, want 1", p, n)
		}
		ids = append(ids, id)
	}
	capDir := filepath.Join(e.dir, "proposed")
	out := e.must("capability", "suggest", "--from", strings.Join(ids, ","), "--narrow", "--out", capDir)
	proposed, apart, ok := strings.Cut(out, "not proposed: the agent tried it, the proxy refused it:\n")
	if !ok || strings.Contains(proposed, "/repos/acme") || strings.Contains(proposed, "+ egress") {
		t.Errorf("suggest proposes what the proxy refused, or does not list it apart:\n%s", out)
	}
	for _, p := range paths {
		if !strings.Contains(apart, "  - egress GET "+suggestUpstream+":"+e.port+p+": the egress proxy refused it") {
			t.Errorf("the refused GET %s is not listed apart:\n%s", p, out)
		}
	}
	y, err := os.ReadFile(filepath.Join(capDir, "capability.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The proxy refused each request before it connected: nothing reached the host, so no
	// rule is proposed for it.
	if strings.Contains(string(y), suggestUpstream) || !strings.Contains(string(y), "egress: []") {
		t.Errorf("capability.yaml admits a host the proxy refused every request to:\n%s", y)
	}
}

// TestCapabilitySuggest_LearnEndToEnd is the suggest test on learn dispatches: fetcher holds no
// grant; three learn dispatches run anyway, their command and requests recorded as
// would-deny; suggest proposes, register takes it as is, and the same three run (not in learn
// mode) with zero refusals while a fourth, different one is refused.
func TestCapabilitySuggest_LearnEndToEnd(t *testing.T) {
	e := newSuggestE2E(t, true)
	paths := []string{"/repos/acme/a", "/repos/acme/b", "/issues/1"}
	var ids []string
	for _, p := range paths {
		id, n := e.dispatch(p, "--learn")
		if n != 0 {
			t.Fatalf("learn dispatch %s: %d refusals, want 0 (recorded as would-deny instead)", p, n)
		}
		if log := e.must("audit", "log", "--kind", "net.would_deny", "-o", "json"); !strings.Contains(log, `"path": "`+p+`"`) {
			t.Fatalf("learn dispatch %s: no would-deny of its request in\n%s", p, log)
		}
		ids = append(ids, id)
	}
	e.suggestRegisterRerun(ids, paths)
}

// suggestRegisterRerun suggests from ids with --narrow, registers what it wrote as is, moves
// fetcher onto it, and runs paths again (zero refusals) and one more (refused).
func (e *suggestE2E) suggestRegisterRerun(ids, paths []string) {
	t := e.t
	// suggest writes a fresh directory; it refuses to write it twice.
	capDir := filepath.Join(e.dir, "learned")
	out := e.must("capability", "suggest", "--from", strings.Join(ids, ","), "--narrow", "--out", capDir)
	for _, want := range []string{"GETs to " + suggestUpstream + ":" + e.port + "/issues/1, ", "/repos/acme/a", "+ egress: "} {
		if !strings.Contains(out, want) {
			t.Errorf("suggest's list lacks %q:\n%s", want, out)
		}
	}
	if _, _, code := e.agora("capability", "suggest", "--from", strings.Join(ids, ","), "--out", capDir); code == 0 {
		t.Errorf("suggest wrote over %s without --force", capDir)
	}
	e.must("capability", "register", "learned", "--from", capDir)
	e.must("subagent", "register", "fetcher", "--runtime", "exec", "--command", suggestRun, "--capability", "script,learned")

	var again []string
	for _, p := range paths {
		id, n := e.dispatch(p)
		if n != 0 {
			t.Errorf("dispatch %s under the suggested grant: %d refusals, want 0", p, n)
		}
		again = append(again, id)
	}
	if _, n := e.dispatch("/repos/acme/c"); n != 1 {
		t.Errorf("a fourth, different dispatch: %d refusals, want 1 (--narrow admits exactly the evidence)", n)
	}
	e.mu.Lock()
	if slices.Contains(e.served, "GET /repos/acme/c") {
		t.Errorf("the server answered the refused request: %q", e.served)
	}
	e.mu.Unlock()
	e.noWidening(again)
}

// noWidening: suggesting again from the dispatches the grant allowed proposes no more than
// it: the proxy did not record their requests, and the rules that admitted them are kept.
func (e *suggestE2E) noWidening(ids []string) {
	out := e.must("capability", "suggest", "--from", strings.Join(ids, ","), "-o", "json")
	var res struct {
		Grant struct {
			Egress []any `json:"egress"`
		} `json:"grant"`
		Diff struct {
			Added []string `json:"added"`
		} `json:"diff"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		e.t.Fatal(err)
	}
	if len(res.Diff.Added) != 0 || len(res.Grant.Egress) != 1 {
		e.t.Errorf("suggest over allowed dispatches widened the grant: %s", out)
	}
}

// refusals counts the entries of dispatch id in an `audit log -o json` that refused something.
func refusals(t *testing.T, log, id string) int {
	t.Helper()
	var recs []struct {
		Subject string         `json:"subject"`
		Details map[string]any `json:"details"`
	}
	if err := json.Unmarshal([]byte(log), &recs); err != nil {
		t.Fatalf("audit log: %v", err)
	}
	n := 0
	for _, r := range recs {
		if d := r.Details["decision"]; r.Subject == "dispatch/"+id && (d == "deny" || d == "denied") {
			n++
		}
	}
	return n
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func gitInit(t *testing.T, dir string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "README"), "x\n")
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}
