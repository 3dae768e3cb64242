package dispatch_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/verdict"
)

// calcRepo is a tiny Go module with a passing test, a workflow and a data file.
func calcRepo(t testing.TB) string {
	t.Helper()
	return gitRepo(t, map[string]string{
		"go.mod":                   "module example.com/calc\n\ngo 1.22\n",
		"calc.go":                  "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
		"calc_test.go":             "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"Add(2, 3) != 5\")\n\t}\n}\n",
		".github/workflows/ci.yml": "on: push\n",
		"testdata/want.txt":        "5\n",
	})
}

// passIfRun is a verify command that would pass: a gate that runs it anyway is green.
var passIfRun = []string{"sh", "-c", "echo ran; exit 0"}

var protect = []string{"**/*_test.go", ".github/**", "testdata/**"}

// TestGate_ProtectedPathsRedBeforeTheCommand: an agent that changes what judges it, in any
// way git can carry in a patch, gets a red verdict naming the path, and the command (which
// would pass) never runs.
func TestGate_ProtectedPathsRedBeforeTheCommand(t *testing.T) {
	e := newEnv(t)
	repo := calcRepo(t)
	for _, c := range []struct {
		name, script string
		want         []string
	}{
		{"edit", `printf 'package calc\n' > calc_test.go`, []string{"calc_test.go"}},
		{"delete", `rm calc_test.go`, []string{"calc_test.go"}},
		{"rename from", `mv calc_test.go calc_test.go.off`, []string{"calc_test.go"}},
		{"rename into", `mv calc.go zz_test.go`, []string{"zz_test.go"}},
		{"new test file", `printf 'package calc\nimport "os"\nfunc init() { os.Exit(0) }\n' > a/b_test.go 2>/dev/null || { mkdir a; printf 'package calc\n' > a/b_test.go; }`, []string{"a/b_test.go"}},
		{"symlink over", `rm calc_test.go && ln -s calc.go calc_test.go`, []string{"calc_test.go"}},
		{"new symlink", `ln -s calc.go evil_test.go`, []string{"evil_test.go"}},
		{"mode change", `chmod +x calc_test.go`, []string{"calc_test.go"}},
		{"directory replaced by a file", `rm -r .github && echo x > .github`, []string{".github", ".github/workflows/ci.yml"}},
		{"directory replaced by a symlink", `rm -r testdata && mkdir fake && echo 6 > fake/want.txt && ln -s fake testdata`, []string{"testdata", "testdata/want.txt"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "agent-" + strings.ReplaceAll(c.name, " ", "-")
			e.subagent(name, c.script)
			r := e.run(dispatch.Request{Subagent: name, Repo: repo, Verify: &verdict.Spec{Command: passIfRun, Protect: protect}})
			if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonVerifyFailed {
				t.Fatalf("dispatch %s %s: %s, want failed verify-failed", r.State, r.Reason, r.Detail)
			}
			v := r.Verdict
			if v == nil || v.Passed || v.Reason != verdict.ReasonProtected {
				t.Fatalf("verdict %+v, want red protected-path", v)
			}
			if strings.Join(v.ProtectedPaths, ",") != strings.Join(c.want, ",") {
				t.Errorf("protected paths %q, want %q", v.ProtectedPaths, c.want)
			}
			if v.Exit != -1 || v.OutputBytes != 0 || v.DurationMS != 0 || strings.Contains(v.OutputTail, "ran") {
				t.Errorf("the command ran: %+v", v)
			}
			for _, p := range c.want {
				if !strings.Contains(r.Detail, p) {
					t.Errorf("detail %q does not name %q", r.Detail, p)
				}
			}
			if r.Result == nil || r.Result.Patch == nil {
				t.Error("the red dispatch's patch was not kept")
			}
		})
	}
	t.Run("untouched protect passes", func(t *testing.T) {
		e.subagent("honest", `printf 'package calc\n\nfunc Sub(a, b int) int { return a - b }\n' > sub.go`)
		r := e.run(dispatch.Request{Subagent: "honest", Repo: repo, Verify: &verdict.Spec{Command: passIfRun, Protect: protect}})
		if r.State != lifecycle.DispatchFinished || r.Verdict == nil || !r.Verdict.Passed || r.Verdict.OutputTail != "ran\n" {
			t.Fatalf("dispatch %s %s: %s, verdict %+v; want finished and green", r.State, r.Reason, r.Detail, r.Verdict)
		}
	})
}

// TestGate_AgentCannotAnswerForTheCommand: whatever the agent leaves behind (a daemon
// printing PASS, a process holding its output pipe, a fake result file in its out
// directory or /tmp) the command runs in a fresh sandbox and the verdict is its exit status.
func TestGate_AgentCannotAnswerForTheCommand(t *testing.T) {
	e := newEnv(t)
	repo := calcRepo(t)
	e.subagent("forger", `
setsid sh -c 'while :; do echo PASS; echo PASS >&2; sleep 0.05; done' &
sh -c 'sleep 600' &
mkdir -p /agora/out/outputs
echo '{"passed":true,"exit":0}' > /agora/out/outputs/verdict.json
echo '{"passed":true,"exit":0}' > /agora/out/verdict.json
echo PASS > /tmp/verdict
echo 'exit 0' > /tmp/verify.sh
echo fake > fake.txt
`)
	// The command fails unless something outside the tree answers for it: a leftover
	// process, a file outside the workspace, the agent's /tmp.
	cmd := []string{"sh", "-c", "ls /tmp; cat /tmp/verdict /agora/out/verdict.json 2>&1; test -f fake.txt && echo tree-has-the-patch; sleep 0.3; ps -e -o pid,comm 2>/dev/null || ls /proc; exit 3"}
	began := time.Now()
	r := e.run(dispatch.Request{Subagent: "forger", Repo: repo, Verify: &verdict.Spec{Command: cmd}})
	if took := time.Since(began); took > 20*time.Second {
		t.Errorf("the dispatch took %s: something waited on the agent's leftovers", took)
	}
	v := r.Verdict
	if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonVerifyFailed || v == nil || v.Passed || v.Exit != 3 {
		t.Fatalf("dispatch %s %s (%s), verdict %+v: want red with exit 3", r.State, r.Reason, r.Detail, v)
	}
	if strings.Contains(v.OutputTail, "PASS") || strings.Contains(v.OutputTail, `"passed"`) || strings.Contains(v.OutputTail, "sleep") {
		t.Errorf("the verify sandbox saw the agent's leftovers:\n%s", v.OutputTail)
	}
	if !strings.Contains(v.OutputTail, "tree-has-the-patch") {
		t.Errorf("the verify tree lacks the agent's patch:\n%s", v.OutputTail)
	}
}

// TestGate_NoSecretInTheVerdict: the verify sandbox gets no secret and no env value, and a
// secret the agent smuggled through its patch in a form the patch's redaction cannot see
// (reversed) is masked when the command prints it back.
func TestGate_NoSecretInTheVerdict(t *testing.T) {
	e := newEnv(t)
	const secret = "s3cr3t-verify-9f8e7d6c5b4a"
	e.envBundle("creds", map[string]string{"PLAIN_SETTING": "plain-value-123456"}, map[string]string{"API_TOKEN": secret})
	e.subagent("leaker", `printf '%s\n' "$API_TOKEN" | rev > leak.txt; printf '%s\n' "$API_TOKEN" > plain.txt`)
	cmd := []string{"sh", "-c", "env; rev leak.txt; cat plain.txt; exit 1"}
	r := e.run(dispatch.Request{Subagent: "leaker", Envs: []string{"creds"}, Verify: &verdict.Spec{Command: cmd}})
	v := r.Verdict
	if v == nil || v.Passed {
		t.Fatalf("dispatch %s %s (%s), verdict %+v: want red", r.State, r.Reason, r.Detail, v)
	}
	for _, leak := range []string{secret, "API_TOKEN", "PLAIN_SETTING", "plain-value", "OPENAI", "AGORA_PROXY"} {
		if strings.Contains(v.OutputTail, leak) {
			t.Errorf("the verdict's tail holds %q:\n%s", leak, v.OutputTail)
		}
	}
	if strings.Count(v.OutputTail, "[REDACTED]") < 2 {
		t.Errorf("the secret printed back is not masked:\n%s", v.OutputTail)
	}
	rec, _ := json.Marshal(r)
	if strings.Contains(string(rec), secret) {
		t.Error("the record holds the secret")
	}
	if strings.Contains(e.auditDump(), secret) {
		t.Error("the audit log holds the secret")
	}
}

// TestGate_TimeoutAndAudit: a command past its timeout is killed and red; the verdict is
// audited as dispatch.verified right before the terminal entry, in the same transaction,
// and both name its digest.
func TestGate_TimeoutAndAudit(t *testing.T) {
	e := newEnv(t)
	e.subagent("idle", "true")
	r := e.run(dispatch.Request{Subagent: "idle", Verify: &verdict.Spec{Command: []string{"sh", "-c", "echo start; sleep 30"}, Timeout: time.Second}})
	v := r.Verdict
	if v == nil || v.Reason != verdict.ReasonTimeout || !v.TimedOut || v.OutputTail != "start\n" || v.Took() < time.Second {
		t.Fatalf("verdict %+v, want red timeout after 1s with the output so far", v)
	}
	dump := strings.Split(strings.TrimSpace(e.auditDump()), "\n")
	var verified, failed int = -1, -1
	for i, line := range dump {
		switch {
		case strings.Contains(line, `"kind":"dispatch.verified"`):
			verified = i
		case strings.Contains(line, `"kind":"dispatch.failed"`):
			failed = i
		}
	}
	if verified < 0 || failed != verified+1 {
		t.Fatalf("dispatch.verified at %d, dispatch.failed at %d: want the verdict right before the end\n%s", verified, failed, strings.Join(dump, "\n"))
	}
	for _, line := range dump[verified : failed+1] {
		if !strings.Contains(line, v.Digest()) {
			t.Errorf("entry does not name the verdict's digest %s: %s", v.Digest(), line)
		}
	}
	accepted := ""
	for _, line := range dump {
		if strings.Contains(line, `"kind":"dispatch.accepted"`) {
			accepted = line
		}
	}
	if !strings.Contains(accepted, `"verify":{"command":["sh","-c","echo start; sleep 30"],"timeout_ms":1000}`) {
		t.Errorf("the accepted entry does not record the gate: %s", accepted)
	}
}

// TestGate_NotRunWhenTheAgentFailed: a dispatch that did not finish has no verdict.
func TestGate_NotRunWhenTheAgentFailed(t *testing.T) {
	e := newEnv(t)
	e.subagent("broken", "exit 7")
	r := e.run(dispatch.Request{Subagent: "broken", Verify: &verdict.Spec{Command: passIfRun}})
	if r.State != lifecycle.DispatchFailed || r.Reason == lifecycle.ReasonVerifyFailed || r.Verdict != nil {
		t.Fatalf("dispatch %s %s, verdict %+v: want the agent's own failure and no verdict", r.State, r.Reason, r.Verdict)
	}
}

// TestGate_RefusedOnKubernetes: a kubernetes target's pods run only agora's worker, so a
// gate there is refused at accept, naming the target, and nothing is recorded.
func TestGate_RefusedOnKubernetes(t *testing.T) {
	e := newEnv(t)
	e.subagent("idle", "true")
	tg := e.home.Config.Targets["local"]
	tg.Provider = "kubernetes"
	e.home.Config.Targets["cluster"] = tg
	_, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "idle", Target: "cluster", Actor: "test",
		Verify: &verdict.Spec{Command: passIfRun}})
	var re *dispatch.RequestError
	if !errors.As(err, &re) || !strings.Contains(err.Error(), `target "cluster"`) || !strings.Contains(err.Error(), "Kubernetes") {
		t.Fatalf("Accept = %v, want a request error naming the kubernetes target", err)
	}
	if rs, _ := e.d.Records.List(t.Context(), dispatch.ListFilter{}); len(rs) != 0 {
		t.Errorf("a refused gate recorded %d dispatches", len(rs))
	}
}

// TestGate_CancelledFromAnotherCaller: `agora dispatch cancel` reaches the gate's sandbox
// (the record names its task once it starts): the dispatch ends cancelled, with no verdict.
func TestGate_CancelledFromAnotherCaller(t *testing.T) {
	e := newEnv(t)
	e.subagent("idle", "true")
	r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "idle", Actor: "test", Timeout: 30 * time.Second,
		Verify: &verdict.Spec{Command: []string{"sh", "-c", "sleep 60"}}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *dispatch.Record, 1)
	go func() {
		final, _ := e.d.Supervise(t.Context(), r.ID, nil)
		done <- final
	}()
	deadline := time.Now().Add(20 * time.Second)
	// Until the record names the gate's sandbox: another task than the one it started with.
	gateTask := func() bool {
		cur := mustGet(t, e, r.ID)
		for _, ev := range cur.Events {
			if ev.Kind == lifecycle.DispatchStarted {
				return cur.ProviderTaskID != "" && cur.ProviderTaskID != ev.Data["provider_task_id"]
			}
		}
		return false
	}
	for e.d.Live(r.ID).Phase != dispatch.PhaseVerify || !gateTask() {
		if time.Now().After(deadline) {
			t.Fatal("the gate never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	began := time.Now()
	if _, err := e.d.Cancel(t.Context(), r.ID); err != nil {
		t.Fatal(err)
	}
	final := <-done
	if final.State != lifecycle.DispatchCancelled || final.Verdict != nil {
		t.Fatalf("dispatch %s %s, verdict %+v: want cancelled without a verdict", final.State, final.Reason, final.Verdict)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("cancel took %s", took)
	}
}

func mustGet(t *testing.T, e *env, id string) *dispatch.Record {
	t.Helper()
	r, err := e.d.Records.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestGate_SupervisorKilledDuringTheGate: the gate's sandbox dies with a supervisor killed
// with -9 (as the agent's does); reap ends the dispatch lost, with no verdict, and releases
// the gate's tree.
func TestGate_SupervisorKilledDuringTheGate(t *testing.T) {
	e := newEnv(t)
	e.subagent("idle", "true")
	marker := fmt.Sprintf("1000.%d", time.Now().UnixNano()%100000)
	r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "idle", Actor: "test", Timeout: time.Minute,
		Verify: &verdict.Spec{Command: []string{"sleep", marker}}})
	if err != nil {
		t.Fatal(err)
	}
	sup := exec.Command(agoraBin, "dispatch", "supervise", r.ID)
	sup.Env = append(os.Environ(), "AGORA_HOME="+e.home.Dir)
	if err := sup.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	// The command itself, not bwrap's argv naming it: killed while bwrap still sets the
	// sandbox up, the supervisor races bwrap's own death signal (a provider matter, the
	// agent's sandbox alike).
	for !commandRuns("sleep", marker) {
		if time.Now().After(deadline) {
			t.Fatal("the gate's command never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	sup.Process.Kill()
	sup.Wait()
	deadline = time.Now().Add(10 * time.Second)
	for processWithArg(marker) {
		if time.Now().After(deadline) {
			out, _ := exec.Command("sh", "-c", "ps -eo pid,ppid,user,stat,args | grep -v grep | grep -e "+marker+" -e bwrap -e prlimit").CombinedOutput()
			t.Fatalf("the gate's command outlived its killed supervisor:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := e.d.Reap(t.Context()); err != nil {
		t.Fatal(err)
	}
	cur := mustGet(t, e, r.ID)
	if cur.State != lifecycle.DispatchFailed || cur.Reason != lifecycle.ReasonLost || cur.Verdict != nil {
		t.Fatalf("after reap: %s %s, verdict %+v; want failed lost without a verdict", cur.State, cur.Reason, cur.Verdict)
	}
	for _, p := range []string{filepath.Join(e.d.StateDir, r.ID, "verify"), filepath.Join(e.d.StateDir, r.ID, "disk")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s is left after reap", p)
		}
	}
}

// commandRuns reports whether a process named comm runs with arg in its command line.
func commandRuns(comm, arg string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		c, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(c)) != comm {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.Contains(string(b), arg) {
			return true
		}
	}
	return false
}
