package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/client"
)

var agoraBin string

// TestMain builds the binary, runs the tests, and fails the package when a goroutine a
// test started outlives the tests.
func TestMain(m *testing.M) { os.Exit(agoratest.NoLeaks(agoratest.RunWithBinary(m, &agoraBin))) }

const (
	uiOperatorToken = "ui-operator-token-0123456789abcdef0123456789abcdef"
	uiViewerToken   = "ui-viewer-token-0123456789abcdef0123456789abcdef"
)

// uiEnv is one AGORA_HOME with a catalog, a git repository and `agora orch serve --http`.
type uiEnv struct {
	t    testing.TB
	dir  string
	home string
	repo string
	vars []string
	base string
	addr string
}

// repoRoot is the module's root: tests run in their package's directory (internal/web).
func repoRoot() string {
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	return dir
}

// requireUI skips, loudly, where the real parts are missing.
func requireUI(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("SKIP: bubblewrap (bwrap) is not installed; the UI test runs real sandboxed workers (apt-get install bubblewrap)")
	}
	if _, err := os.Stat(chromium()); err != nil {
		t.Skip("SKIP: Debian chromium is not installed at " + chromium() + " (apt-get install chromium)")
	}
}

func chromium() string {
	if p := os.Getenv("UI_CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func newUIEnv(t testing.TB) *uiEnv {
	t.Helper()
	e := newUIHome(t)
	e.serve()
	return e
}

// newUIHome is newUIEnv before serve starts.
func newUIHome(t testing.TB) *uiEnv {
	t.Helper()
	dir := t.TempDir()
	e := &uiEnv{t: t, dir: dir, home: filepath.Join(dir, "home"), repo: filepath.Join(dir, "repo")}
	tokens := filepath.Join(dir, "tokens.yaml")
	must(t, os.WriteFile(tokens, []byte(fmt.Sprintf("- {name: operator, token: %s, ceiling: orchestrate}\n- {name: viewer, token: %s, ceiling: read}\n",
		uiOperatorToken, uiViewerToken)), 0o600))
	e.vars = append(os.Environ(), "AGORA_HOME="+e.home, "AGORA_HTTP_TOKENS_FILE="+tokens, "AGORA_HTTP_TOKEN=")
	cat := filepath.Join(dir, "catalog")
	must(t, os.MkdirAll(filepath.Join(cat, "caps", "shell"), 0o755))
	must(t, os.WriteFile(filepath.Join(cat, "caps", "shell", "capability.yaml"), []byte("description: a shell\ncommands: [\"sh -c *\"]\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(cat, "slow.yaml"), []byte(`description: works for a while, says so, and leaves a file
runtime: exec
command: [sh, -c, 'echo starting; sleep 1.5; echo "$AGORA_INPUT_JSON" > "out-$(date +%s%N).txt"; echo halfway; sleep 1; echo finished']
capabilities: [shell]
`), 0o644))
	must(t, os.WriteFile(filepath.Join(cat, "forever.yaml"), []byte(`description: runs until cancelled
runtime: exec
command: [sh, -c, 'echo waiting; sleep 300']
capabilities: [shell]
`), 0o644))
	// bidi writes what a hostile agent would: a reversed file name in its output, an output
	// file of that name, and a question that reads backwards (YAML's \u202E is the raw
	// RIGHT-TO-LEFT OVERRIDE in the command).
	must(t, os.WriteFile(filepath.Join(cat, "bidi.yaml"), []byte(`description: writes bidirectional overrides everywhere
runtime: exec
command: [sh, -c, "echo \"stdout invoice\u202Efdp.exe\"; mkdir -p \"$AGORA_OUT/outputs\"; echo x > \"$AGORA_OUT/outputs/invoice\u202Efdp.exe\"; printf '{\"question\":\"Pay invoice\u202Efdp.exe?\"}' > \"$AGORA_OUT/needs_input.json\""]
capabilities: [shell]
`), 0o644))
	must(t, os.WriteFile(filepath.Join(cat, "agora-manifest.yaml"), []byte(`version: 1
capabilities:
  - {name: shell, from: caps/shell}
subagents:
  - {name: slow, from: slow.yaml}
  - {name: forever, from: forever.yaml}
  - {name: bidi, from: bidi.yaml}
`), 0o644))
	e.run("init")
	e.run("apply", "-f", filepath.Join(cat, "agora-manifest.yaml"))
	must(t, os.MkdirAll(e.repo, 0o755))
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "start"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = e.repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return e
}

func (e *uiEnv) run(args ...string) string {
	e.t.Helper()
	cmd := exec.Command(agoraBin, args...)
	cmd.Env = e.vars
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("agora %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// serve starts `agora orch serve --http` (on e.addr when set) and waits until the web view
// answers.
func (e *uiEnv) serve() {
	e.t.Helper()
	if e.addr == "" {
		e.addr = agoratest.FreeAddr(e.t)
	}
	e.base = "http://" + e.addr
	cmd := exec.Command(agoraBin, "orch", "serve", "--http", e.addr)
	cmd.Env = e.vars
	logf, err := os.Create(filepath.Join(e.dir, "serve.log"))
	must(e.t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	must(e.t, cmd.Start())
	e.t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait(); logf.Close() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(e.base + "/login")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(e.dir, "serve.log"))
			e.t.Fatalf("the web view did not answer within 30s:\n%s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *uiEnv) client() *client.Client {
	return client.New(filepath.Join(e.home, "orch", "orch.sock"))
}

func (e *uiEnv) submit(name, planText string) api.Run {
	e.t.Helper()
	p := filepath.Join(e.dir, name+".yaml")
	must(e.t, os.WriteFile(p, []byte(planText), 0o644))
	cmd := exec.Command(agoraBin, "orch", "submit", p, "--repo", e.repo)
	cmd.Env = e.vars
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("agora orch submit: %v", err)
	}
	run, err := e.client().Status(context.Background(), strings.TrimSpace(string(out)))
	must(e.t, err)
	return run
}

type watched struct {
	Run   *api.Run
	Event *api.Event
}

// watch follows a run through the service's own watch, as `orch watch` does.
func watch(t testing.TB, e *uiEnv, runID string) <-chan watched {
	ch := make(chan watched, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		defer close(ch)
		e.client().Watch(ctx, runID, func(run *api.Run, ev *api.Event) error {
			ch <- watched{Run: run, Event: ev}
			return nil
		})
	}()
	return ch
}

// browser is the Chromium driver (scripts/ui-test/driver.mjs) over its stdin and stdout.
type browser struct {
	t   testing.TB
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

type answer struct {
	OK      bool           `json:"ok"`
	Error   string         `json:"error"`
	Status  int            `json:"status"`
	MS      float64        `json:"ms"`
	LoadMS  float64        `json:"load_ms"`
	Text    string         `json:"text"`
	N       int            `json:"n"`
	URL     string         `json:"url"`
	Offsite []string       `json:"offsite"`
	Console []string       `json:"console_errors"`
	Cookies []cookieAnswer `json:"cookies"`
	Rows    []rowCells     `json:"rows"`
}

// rowCells is a table row as the page shows it: its task and, per cell, its text and the
// (sorted) classes of each state badge in it.
type rowCells struct {
	Task  string `json:"task"`
	Cells []cell `json:"cells"`
}

type cell struct {
	Text   string   `json:"text"`
	Badges []string `json:"badges"`
}

type cookieAnswer struct {
	Name     string  `json:"name"`
	Value    string  `json:"value"`
	Path     string  `json:"path"`
	Secure   bool    `json:"secure"`
	Expires  float64 `json:"expires"`
	HTTPOnly bool    `json:"httpOnly"`
	SameSite string  `json:"sameSite"`
}

func newBrowser(t testing.TB, base string) *browser {
	t.Helper()
	return newBrowserAllowing(t, base)
}

// newBrowserAllowing is newBrowser whose browser may also reach the origins allow (an
// identity provider's).
func newBrowserAllowing(t testing.TB, base string, allow ...string) *browser {
	t.Helper()
	out, err := exec.Command(filepath.Join(repoRoot(), "scripts", "ui-test", "install.sh")).Output()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 3 {
		t.Skip("SKIP: node and npm are not installed, so Chromium cannot be driven (apt-get install npm)")
	}
	must(t, err)
	cache := strings.TrimSpace(string(out))
	src, err := os.ReadFile(filepath.Join(repoRoot(), "scripts", "ui-test", "driver.mjs"))
	must(t, err)
	// ESM resolves packages from the script's directory: run a copy beside node_modules.
	drv := filepath.Join(cache, "driver.mjs")
	must(t, os.WriteFile(drv, src, 0o644))
	cmd := exec.Command("node", drv)
	cmd.Env = append(os.Environ(), "UI_BASE="+base, "UI_CHROMIUM="+chromium(), "UI_ALLOW="+strings.Join(allow, ","))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	must(t, err)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	b := &browser{t: t, cmd: cmd, in: in, out: bufio.NewScanner(stdout)}
	b.out.Buffer(make([]byte, 1<<20), 1<<20)
	t.Cleanup(func() { b.do(map[string]any{"op": "close"}); in.Close(); cmd.Wait() })
	return b
}

func (b *browser) do(cmd map[string]any) answer {
	line, _ := json.Marshal(cmd)
	if _, err := b.in.Write(append(line, '\n')); err != nil {
		return answer{Error: err.Error()}
	}
	if !b.out.Scan() {
		return answer{Error: "the driver ended"}
	}
	var a answer
	if err := json.Unmarshal(b.out.Bytes(), &a); err != nil {
		return answer{Error: err.Error()}
	}
	return a
}

// must runs cmd and fails the test on an error.
func (b *browser) must(cmd map[string]any) answer {
	b.t.Helper()
	a := b.do(cmd)
	if !a.OK {
		b.t.Fatalf("browser %v: %s", cmd, a.Error)
	}
	return a
}

func (b *browser) login(token string) {
	b.t.Helper()
	b.must(map[string]any{"op": "goto", "path": "/login"})
	b.must(map[string]any{"op": "fill", "selector": "#token", "value": token})
	a := b.must(map[string]any{"op": "click", "selector": "#login", "nav": true})
	if !strings.HasSuffix(a.URL, "/runs") {
		b.shot("login-failed")
		b.t.Fatalf("page says %q; ", b.do(map[string]any{"op": "text", "selector": "main"}).Text)
		b.t.Fatalf("after login the browser is at %s, want /runs", a.URL)
	}
}

func artifactDir(t testing.TB) string {
	dir := os.Getenv("UI_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(repoRoot(), ".cache", "ui-test", "artifacts")
	}
	must(t, os.MkdirAll(dir, 0o755))
	return dir
}

func (b *browser) shot(name string) {
	b.t.Helper()
	p := filepath.Join(artifactDir(b.t), name+".png")
	b.must(map[string]any{"op": "screenshot", "path": p})
	b.t.Logf("screenshot %s", p)
}

const sixTasks = `version: 1
name: six
concurrency: 3
tasks:
  - {id: fetch, subagent: slow}
  - {id: build, subagent: slow, depends_on: [fetch], locks: [repo]}
  - {id: lint, subagent: slow, depends_on: [fetch]}
  - {id: test, subagent: slow, depends_on: [build, lint], locks: [repo]}
  - {id: docs, subagent: slow, learn: true}
  - {id: ship, subagent: slow, depends_on: [test, docs]}
`

// TestUI_Chromium drives the real binary's web view in headless Chromium: login, a running
// 6-task plan's graph changing colour live at each transition (how soon is logged), a task's
// patch and tool-call table, a cancel from the page recorded with the operator's name, a
// read-only login that cannot act, and a screenshot of every page.
func TestUI_Chromium(t *testing.T) {
	requireUI(t)
	e := newUIEnv(t)
	b := newBrowser(t, e.base)

	a := b.must(map[string]any{"op": "goto", "path": "/runs"})
	if a.Status != http.StatusUnauthorized {
		t.Errorf("runs before login: status %d, want 401", a.Status)
	}
	b.shot("login")
	b.login(uiOperatorToken)
	cookies := b.must(map[string]any{"op": "cookies"}).Cookies
	if len(cookies) != 1 || !cookies[0].HTTPOnly || cookies[0].SameSite != "Strict" {
		t.Errorf("cookies %+v, want one HttpOnly SameSite=Strict session cookie", cookies)
	}

	run := e.submit("six", sixTasks)
	events := watch(t, e, run.ID)
	b.must(map[string]any{"op": "goto", "path": "/runs/" + run.ID})
	// The page asks the graph endpoint for what it shows once it has loaded.
	b.must(map[string]any{"op": "waitSelector", "selector": `svg#dag g.node[data-task="ship"]`, "timeout": 10000})
	if n := b.must(map[string]any{"op": "count", "selector": "svg#dag g.node"}).N; n != 6 {
		t.Fatalf("the graph has %d nodes, want 6", n)
	}
	// The edges are drawn as one path per kind, a subpath ("M...") per edge.
	if d := b.must(map[string]any{"op": "attr", "selector": "svg#dag path.edge:not(.needs)", "name": "d"}).Text; strings.Count(d, "M") != 6 {
		t.Errorf("the graph has %d depends_on edges (d=%q), want 6", strings.Count(d, "M"), d)
	}
	if d := b.must(map[string]any{"op": "attr", "selector": "svg#dag path.edge.needs", "name": "d"}).Text; d != "" {
		t.Errorf("the graph has needs edges %q, want none", d)
	}
	b.shot("run-running")
	checked, succeeded, worst := 0, 0, 0.0
	for msg := range events {
		if msg.Event == nil || msg.Event.Task == "" {
			if msg.Run != nil && lifecycle.RunEnded(msg.Run.State) {
				break
			}
			continue
		}
		st := msg.Event.State
		if st != lifecycle.TaskRunning && st != lifecycle.TaskSucceeded {
			continue // ready lasts milliseconds; running and succeeded stay
		}
		// The node shows the task's state or a later one (a task that ran briefly may be shown
		// succeeded by the time its running event is read here): either came live, since the
		// page never reloads. How soon is logged, not asserted; the wait is only bounded so a
		// page that stopped updating fails rather than hangs.
		sel := fmt.Sprintf(`svg#dag g.node[data-task="%s"]`, msg.Event.Task)
		shown := []string{"st-" + st}
		if st == lifecycle.TaskRunning {
			shown = append(shown, "st-"+lifecycle.TaskSucceeded)
		}
		a := b.do(map[string]any{"op": "waitClass", "selector": sel, "cls": shown, "timeout": 30000})
		if !a.OK {
			t.Errorf("task %s became %s, and its node did not change colour within 30 s: %s", msg.Event.Task, st, a.Error)
			continue
		}
		checked++
		if st == lifecycle.TaskSucceeded {
			succeeded++
		}
		worst = max(worst, a.MS)
	}
	t.Logf("%d node colour changes seen, slowest %.0f ms after the watcher heard of it", checked, worst)
	// The first tasks may start before the watch does; every success comes after.
	if succeeded != 6 || checked < 10 {
		t.Errorf("saw %d transitions, %d of them successes, want at least 10 and 6", checked, succeeded)
	}
	b.must(map[string]any{"op": "waitText", "selector": "#run-state", "contains": "succeeded", "timeout": 30000})
	b.must(map[string]any{"op": "goto", "path": "/runs/" + run.ID})
	// The run sealed as it succeeded; its bundle is exported and checked as `agora verify` would.
	if txt := b.must(map[string]any{"op": "text", "selector": "#seal"}).Text; txt != "sealed" {
		t.Errorf("seal shows %q, want sealed", txt)
	}
	// A page waits for the bundle's verification only verifyWait and otherwise says it is
	// verifying and to reload: reload, as a person would, until it is done.
	var verify string
	agoratest.WaitFor(t, time.Minute, "the run bundle's verification", func() bool {
		verify = b.must(map[string]any{"op": "text", "selector": "#verify"}).Text
		if !strings.Contains(verify, "Run bundle: verifying") {
			return true
		}
		b.must(map[string]any{"op": "goto", "path": "/runs/" + run.ID})
		return false
	})
	if !strings.Contains(verify, "Run bundle: verified") || !strings.Contains(verify, "tier tamper-detecting") {
		t.Errorf("the run bundle's verification shows %q, want verified at tier tamper-detecting", verify)
	}
	b.shot("run-succeeded")
	// The plan's learn task carries a visible badge in the tasks table, and only it.
	if txt := b.must(map[string]any{"op": "text", "selector": `table#tasks tr[data-task="docs"] .learn`}).Text; txt != "(learn)" {
		t.Errorf("the learn task's row shows %q, want a (learn) badge", txt)
	}
	if n := b.must(map[string]any{"op": "count", "selector": "table#tasks .learn"}).N; n != 1 {
		t.Errorf("%d tasks carry the learn badge, want 1 (docs)", n)
	}
	if a := b.must(map[string]any{"op": "click", "selector": `table#tasks tr[data-task="docs"] a`, "nav": true}); !strings.HasSuffix(a.URL, "/tasks/docs") {
		t.Errorf("the learn task's link went to %s", a.URL)
	}
	if txt := b.must(map[string]any{"op": "text", "selector": "#t-learn"}).Text; !strings.Contains(txt, "learn") {
		t.Errorf("the learn task's page shows %q, want its learn mark", txt)
	}
	if txt := b.must(map[string]any{"op": "text", "selector": "#d-learn"}).Text; !strings.Contains(txt, "would_deny") {
		t.Errorf("the learn task's latest attempt shows %q, want the dispatch's learn mark", txt)
	}
	b.shot("task-learn")
	b.must(map[string]any{"op": "goto", "path": "/runs/" + run.ID})

	// A node is a link to its task without an <a> around it.
	if a := b.must(map[string]any{"op": "click", "selector": `svg#dag g.node[data-task="build"]`, "nav": true}); !strings.HasSuffix(a.URL, "/runs/"+run.ID+"/tasks/build") {
		t.Errorf("clicking the node of build went to %s", a.URL)
	}
	if txt := b.must(map[string]any{"op": "text", "selector": "#patch"}).Text; !strings.Contains(txt, "diff --git") || !strings.Contains(txt, "+{") {
		t.Errorf("the patch shows %q, want a diff adding the task's file", txt)
	}
	if n := b.must(map[string]any{"op": "count", "selector": "#patch span.add"}).N; n == 0 {
		t.Error("the patch has no added line coloured")
	}
	if n := b.must(map[string]any{"op": "count", "selector": "table#calls th"}).N; n != 7 {
		t.Errorf("the tool-call table has %d columns, want 7", n)
	}
	if txt := b.must(map[string]any{"op": "text", "selector": "#stdout"}).Text; !strings.Contains(txt, "finished") {
		t.Errorf("stdout shows %q, want the worker's output", txt)
	}
	b.shot("task")
	b.must(map[string]any{"op": "goto", "path": "/runs/" + run.ID + "/tasks/build"})

	long := e.submit("long", "version: 1\nname: long\ntasks:\n  - {id: wait, subagent: forever}\n  - {id: after, subagent: slow, depends_on: [wait]}\n")
	b.must(map[string]any{"op": "goto", "path": "/runs/" + long.ID})
	b.must(map[string]any{"op": "waitClass", "selector": `svg#dag g.node[data-task="wait"]`, "cls": "st-running", "timeout": 30000})
	b.must(map[string]any{"op": "goto", "path": "/runs/" + long.ID + "/tasks/wait"})
	b.must(map[string]any{"op": "waitText", "selector": "#stdout", "contains": "waiting", "timeout": 30000})
	b.shot("task-live")
	if d := b.must(map[string]any{"op": "text", "selector": "#d-elapsed"}).Text; d == "" || d == "-" {
		t.Errorf("a running dispatch shows elapsed %q", d)
	}
	b.must(map[string]any{"op": "goto", "path": "/runs/" + long.ID})
	b.must(map[string]any{"op": "click", "selector": "#cancel-run", "nav": true})
	b.must(map[string]any{"op": "waitText", "selector": "#run-state", "contains": "cancelled", "timeout": 15000})
	b.shot("run-cancelled")
	b.must(map[string]any{"op": "goto", "path": "/audit?log=orch"})
	if txt := b.must(map[string]any{"op": "text", "selector": "table#audit"}).Text; !strings.Contains(txt, `"by":"web:operator"`) {
		t.Errorf("orch.db's audit log does not show the cancel by web:operator:\n%.3000s", txt)
	}
	if !strings.Contains(txt(b, "table#audit"), e.repo) {
		t.Errorf("an operator's orch audit page does not show the run's repository %s", e.repo)
	}
	b.shot("audit-orch")

	// A dispatch outside any run is cancelled from its own page; a read-only token cannot.
	cmd := exec.Command(agoraBin, "dispatch", "run", "--subagent", "forever", "--repo", e.repo, "--detach", "-o", "json")
	cmd.Env = e.vars
	out, err := cmd.Output()
	must(t, err)
	var lone struct {
		ID string `json:"id"`
	}
	must(t, json.Unmarshal(out, &lone))
	if code := post(t, e.base+"/dispatches/"+lone.ID+"/cancel", uiViewerToken); code != http.StatusForbidden {
		t.Errorf("a read-only token's cancel of a dispatch: status %d, want 403", code)
	}
	b.must(map[string]any{"op": "goto", "path": "/dispatches/" + lone.ID})
	b.must(map[string]any{"op": "waitText", "selector": "#stdout", "contains": "waiting", "timeout": 10000})
	b.shot("dispatch-live")
	b.must(map[string]any{"op": "click", "selector": "#cancel-dispatch", "nav": true})
	b.must(map[string]any{"op": "waitText", "selector": "#d-state", "contains": "cancelled", "timeout": 20000})
	b.shot("dispatch-cancelled")
	b.must(map[string]any{"op": "goto", "path": "/audit?kind=dispatch.cancel_requested"})
	if a := txt(b, "table#audit"); !strings.Contains(a, "web:operator") || !strings.Contains(a, lone.ID) {
		t.Errorf("agora.db's audit log does not show dispatch %s's cancel by web:operator:\n%.2000s", lone.ID, a)
	}
	// An attempt of a run is the engine's to cancel: the page offers no button and the
	// server refuses the request.
	b.must(map[string]any{"op": "goto", "path": "/dispatches/" + mustStatus(t, e, long.ID).Tasks[0].DispatchID})
	if n := b.must(map[string]any{"op": "count", "selector": "#cancel-dispatch"}).N; n != 0 {
		t.Error("a run's attempt offers its own cancel button")
	}
	if code := post(t, e.base+"/dispatches/"+mustStatus(t, e, long.ID).Tasks[0].DispatchID+"/cancel", uiOperatorToken); code != http.StatusConflict {
		t.Errorf("an operator's cancel of a run's attempt as a dispatch: status %d, want 409", code)
	}
	b.must(map[string]any{"op": "goto", "path": "/audit"})
	if txt := b.must(map[string]any{"op": "text", "selector": "#checkpoint"}).Text; !strings.Contains(txt, "entries") {
		t.Errorf("checkpoint status %q", txt)
	}
	b.shot("audit")
	for _, p := range []string{"runs", "dispatches", "catalog"} {
		b.must(map[string]any{"op": "goto", "path": "/" + p})
		b.shot(p)
	}
	if txt := b.must(map[string]any{"op": "text", "selector": "main"}).Text; !strings.Contains(txt, "forever") || !strings.Contains(txt, "slow") {
		t.Errorf("the catalog page lacks the subagents: %.500s", txt)
	}
	var rec struct {
		ID string `json:"id"`
	}
	st, err := e.client().Status(context.Background(), run.ID)
	must(t, err)
	rec.ID = st.Tasks[0].DispatchID
	b.must(map[string]any{"op": "goto", "path": "/dispatches/" + rec.ID})
	b.shot("dispatch")

	rep := b.must(map[string]any{"op": "report"})
	if len(rep.Offsite) > 0 {
		t.Errorf("pages asked for other origins: %v", rep.Offsite)
	}
	for _, c := range rep.Console {
		// The one 401 is the page asked for before logging in, above.
		if !strings.Contains(c, "status of 401") {
			t.Errorf("console error (a CSP violation shows here): %s", c)
		}
	}

	// A viewer reads but cannot act: no buttons, and a forged form is refused.
	v := newBrowser(t, e.base)
	v.login(uiViewerToken)
	v.must(map[string]any{"op": "goto", "path": "/runs/" + long.ID})
	if n := v.must(map[string]any{"op": "count", "selector": "#cancel-run"}).N; n != 0 {
		t.Error("a read-only login sees the cancel button")
	}
	// ... and sees no path on the serving host: not on the orch audit page, not in the API.
	v.must(map[string]any{"op": "goto", "path": "/audit?log=orch"})
	if a := txt(v, "table#audit"); strings.Contains(a, e.repo) || !strings.Contains(a, "(host path hidden)") {
		t.Errorf("a read-only login's orch audit page shows the repository path or no sign of hiding it:\n%.2000s", a)
	}
	v.shot("audit-orch-viewer")
	for _, p := range []string{"/api/runs", "/api/runs/" + long.ID, "/api/dispatches/" + lone.ID} {
		v.must(map[string]any{"op": "goto", "path": p})
		if a := txt(v, "body"); strings.Contains(a, e.repo) {
			t.Errorf("a read-only login's %s shows the repository path: %.500s", p, a)
		}
	}
	b.must(map[string]any{"op": "goto", "path": "/api/runs/" + long.ID})
	if a := txt(b, "body"); !strings.Contains(a, e.repo) {
		t.Errorf("an operator's /api/runs/%s lacks the repository path: %.500s", long.ID, a)
	}
}

func txt(b *browser, selector string) string {
	b.t.Helper()
	return b.must(map[string]any{"op": "text", "selector": selector}).Text
}

// post sends an action with a bearer token, as a script would, and returns the status.
func post(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func mustStatus(t *testing.T, e *uiEnv, id string) api.Run {
	t.Helper()
	r, err := e.client().Status(context.Background(), id)
	must(t, err)
	return r
}

// TestUI_RefusesEveryRoute asks the real binary for every page and API without a token, with
// a wrong token, a wrong Host and a cross-site Origin: each is refused.
func TestUI_RefusesEveryRoute(t *testing.T) {
	requireUI(t)
	e := newUIEnv(t)
	run := e.submit("one", "version: 1\nname: one\ntasks:\n  - {id: a, subagent: slow}\n")
	routes := []string{"GET /", "GET /runs", "GET /runs/" + run.ID, "GET /runs/" + run.ID + "/tasks/a", "GET /dispatches",
		"GET /catalog", "GET /audit", "GET /audit?log=orch", "GET /api/runs", "GET /api/runs/" + run.ID, "GET /api/runs/" + run.ID + "/events",
		"GET /static/app.js", "POST /runs/" + run.ID + "/cancel", "POST /runs/" + run.ID + "/retry",
		"POST /runs/" + run.ID + "/tasks/a/answer", "POST /dispatches/x/approvals/y/approve", "POST /dispatches/x/cancel", "POST /logout"}
	cases := []struct {
		name, auth, host, origin string
		want                     int
	}{
		{name: "no token", want: http.StatusUnauthorized},
		{name: "wrong token", auth: "Bearer not-a-token-0123456789abcdef0123456789abcdef", want: http.StatusUnauthorized},
		{name: "wrong host", auth: "Bearer " + uiOperatorToken, host: "rebound.example:80", want: http.StatusForbidden},
		{name: "cross-site origin", auth: "Bearer " + uiOperatorToken, origin: "http://evil.example", want: http.StatusForbidden},
	}
	for _, rt := range routes {
		method, path, _ := strings.Cut(rt, " ")
		for _, c := range cases {
			req, _ := http.NewRequest(method, e.base+path, nil)
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			if c.host != "" {
				req.Host = c.host
			}
			if c.origin != "" {
				req.Header.Set("Origin", c.origin)
			}
			resp, err := http.DefaultClient.Do(req)
			must(t, err)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("%s %s with %s: status %d, want %d", method, path, c.name, resp.StatusCode, c.want)
			}
		}
	}
	var end api.Run
	for msg := range watch(t, e, run.ID) {
		if msg.Run != nil && lifecycle.RunEnded(msg.Run.State) {
			end = *msg.Run
			break
		}
	}
	if end.CancelAsked || end.State != lifecycle.RunSucceeded {
		t.Errorf("the run ended %s (cancel requested %v), want succeeded: a refused request changed it", end.State, end.CancelAsked)
	}
	// Without --http there is no listener; with it and no token serve refuses to start (in a
	// home of its own, initialised: only 'agora init' makes one).
	env := append(os.Environ(), "AGORA_HOME="+filepath.Join(t.TempDir(), "h"), "AGORA_HTTP_TOKEN=", "AGORA_HTTP_TOKENS_FILE=")
	cmd := exec.Command(agoraBin, "init")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("agora init: %v\n%s", err, out)
	}
	cmd = exec.Command(agoraBin, "orch", "serve", "--http", agoratest.FreeAddr(t))
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no token") {
		t.Errorf("serve --http without a token: err %v, output %s", err, out)
	}
}

// BenchmarkUI_RunPage1000 loads the run page of a 1,000-task run (40 layers of 25 tasks
// below one held task, two dependencies each) in headless Chromium: ms is navigation to the
// load event with the graph in the DOM.
func BenchmarkUI_RunPage1000(b *testing.B) {
	requireUI(b)
	e := newUIEnv(b)
	var src strings.Builder
	src.WriteString("version: 1\nname: big\ntasks:\n  - {id: gate, subagent: forever}\n")
	for l := range 40 {
		for w := range 25 {
			if l*25+w >= 999 {
				break
			}
			deps := "[gate]"
			if l > 0 {
				deps = fmt.Sprintf("[l%02d-%02d, l%02d-%02d]", l-1, w, l-1, (w+7)%25)
			}
			fmt.Fprintf(&src, "  - {id: l%02d-%02d, subagent: slow, depends_on: %s}\n", l, w, deps)
		}
	}
	run := e.submit("big", src.String())
	b.Cleanup(func() { e.run("orch", "cancel", run.ID) })
	br := newBrowser(b, e.base)
	br.login(uiOperatorToken)
	path := "/runs/" + run.ID
	br.must(map[string]any{"op": "render", "path": path, "selector": "svg#dag g.node"})
	// Every task is in the layout, and only those in view are drawn: scrolling to the far
	// corner draws the last layer's.
	if n := br.must(map[string]any{"op": "attr", "selector": "svg#dag", "name": "data-nodes"}).Text; n != "1000" {
		b.Fatalf("the graph lays out %s nodes, want 1000", n)
	}
	drawn := br.must(map[string]any{"op": "count", "selector": "svg#dag g.node"}).N
	if drawn == 0 || drawn >= 1000 {
		b.Fatalf("%d nodes drawn at the top of a 1,000-task graph, want those in view", drawn)
	}
	if n := br.must(map[string]any{"op": "count", "selector": `svg#dag g.node[data-task="l39-23"]`}).N; n != 0 {
		b.Fatalf("the last layer is drawn before it is scrolled to")
	}
	br.must(map[string]any{"op": "scroll", "selector": "#graph", "x": 1 << 20, "y": 1 << 20})
	br.must(map[string]any{"op": "waitSelector", "selector": `svg#dag g.node[data-task="l39-23"]`, "timeout": 2000})
	if n := br.must(map[string]any{"op": "count", "selector": `svg#dag g.node[data-task="gate"]`}).N; n != 0 {
		b.Errorf("the first layer is still drawn after scrolling to the last")
	}
	b.Logf("%d of 1000 nodes drawn in view; scrolling draws the rest", drawn)
	br.shot("run-1000")
	// The server's share: the page fetched without a browser.
	var serverMS []float64
	var size int
	for range 5 {
		req, _ := http.NewRequest("GET", e.base+path, nil)
		req.Header.Set("Authorization", "Bearer "+uiOperatorToken)
		t0 := time.Now()
		resp, err := http.DefaultClient.Do(req)
		must(b, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		must(b, err)
		serverMS, size = append(serverMS, float64(time.Since(t0).Microseconds())/1000), len(body)
	}
	b.Logf("the server answers the page (%d bytes) in %v ms", size, serverMS)
	b.ResetTimer()
	// floor is the same measure of the runs page (one row): what navigation, the driver's
	// round trips and the machine's load cost any page, in the same run.
	var total, worst, floor float64
	for range b.N {
		a := br.must(map[string]any{"op": "render", "path": path, "selector": "svg#dag g.node"})
		f := br.must(map[string]any{"op": "render", "path": "/runs", "selector": "table#runs tbody tr"})
		total += a.MS
		floor += f.MS
		b.Logf("render %.0f ms, load event at %.0f ms; the runs page %.0f ms", a.MS, a.LoadMS, f.MS)
		worst = max(worst, a.MS)
	}
	b.ReportMetric(total/float64(b.N), "ms/render")
	b.ReportMetric(worst, "ms-worst")
	b.ReportMetric(floor/float64(b.N), "ms-floor")
}
