package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/client"
)

// agoraExit runs the binary like agora but returns stdout, stderr and the exit code instead of
// failing on a non-zero one (a dispatch that needs input exits non-zero).
func agoraExit(t testing.TB, home string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(agoraBin, args...)
	cmd.Env = baseEnv(home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("agora %s: %v", strings.Join(args, " "), err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// dispatchRecord is the part of `agora dispatch show -o json` these tests read.
type dispatchRecord struct {
	ID         string `json:"id"`
	State      string `json:"state"`
	Reason     string `json:"reason"`
	ParentID   string `json:"parent_id"`
	ChildID    string `json:"child_id"`
	AnsweredBy string `json:"answered_by"`
	Actor      string `json:"actor"`
}

// hostRecord reads dispatch id through the CLI (agora dispatch describe).
func hostRecord(t testing.TB, home, id string) dispatchRecord {
	t.Helper()
	var r dispatchRecord
	if err := json.Unmarshal(agora(t, home, nil, "dispatch", "describe", id, "-o", "json"), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// childrenOf lists the dispatches whose parent is id.
func childrenOf(t testing.TB, home, id string) []dispatchRecord {
	t.Helper()
	var all []dispatchRecord
	if err := json.Unmarshal(agora(t, home, nil, "dispatch", "list", "-o", "json", "--limit", "1000"), &all); err != nil {
		t.Fatal(err)
	}
	var out []dispatchRecord
	for _, r := range all {
		if r.ParentID == id {
			out = append(out, r)
		}
	}
	return out
}

// dispatchAudit returns the audit entries whose subject is dispatch/id.
func dispatchAudit(t testing.TB, home, id string) []auditEntry {
	t.Helper()
	var all []auditEntry
	if err := json.Unmarshal(agora(t, home, nil, "audit", "log", "-o", "json", "--limit", "100000"), &all); err != nil {
		t.Fatal(err)
	}
	var out []auditEntry
	for _, e := range all {
		if e.Subject == "dispatch/"+id {
			out = append(out, e)
		}
	}
	return out
}

func kinds(es []auditEntry, kind string) []auditEntry {
	var out []auditEntry
	for _, e := range es {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// waitEnded waits until every dispatch of rs has ended (their sandboxes hold mounts in the
// test's home) and returns rs.
func waitEnded(t testing.TB, home string, rs []dispatchRecord) []dispatchRecord {
	t.Helper()
	for _, r := range rs {
		agoratest.Eventually(t, 60*time.Second, "dispatch "+r.ID+" to end", func() error {
			if st := hostRecord(t, home, r.ID).State; st == "accepted" || st == "started" {
				return fmt.Errorf("it is %s", st)
			}
			return nil
		})
	}
	return rs
}

// startServe starts `agora orch serve` on home and waits until it answers.
func startServe(t *testing.T, home string) {
	t.Helper()
	serve := exec.Command(agoraBin, "orch", "serve")
	serve.Env = baseEnv(home)
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	c := client.New(home + "/orch/orch.sock")
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := c.Health(context.Background()); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("agora orch serve did not answer")
		}
	}
}

// tokensFile writes a tokens file naming each client with its ceiling and returns its path.
func tokensFile(t *testing.T, clients map[string][2]string) string {
	t.Helper()
	var b strings.Builder
	for name, tc := range clients {
		fmt.Fprintf(&b, "- {name: %s, token: %q, ceiling: %s}\n", name, tc[0], tc[1])
	}
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestResume_OnlyWhatTheClientCouldDispatch: a dispatch-ceiling client,
// over stdio and over HTTP, may answer a dispatch it could have started itself (one on a
// workspace, or on none), and nothing else: not a person's `dispatch run --repo` dispatch,
// not the attempt of an `orch submit --repo` run, not the attempt of a workspace run (runs are
// answered with `agora orch answer`). Each refusal is a clear tool error, audited as refused
// with the client's name and ceiling, and no child exists afterwards. The --repo dispatch
// and run cannot be read over MCP either (describe, resources, status), and the repository's
// path reaches no answer.
func TestResume_OnlyWhatTheClientCouldDispatch(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	repo, _ := gitRepo(t)
	agora(t, home, nil, "workspace", "register", "app", "--repo", repo, "--revision", "main")
	startServe(t, home)

	// (a) a person's dispatch on a repository path, waiting for an answer.
	out, stderr, code := agoraExit(t, home, "dispatch", "run", "--subagent", "asker", "--repo", repo, "-o", "json")
	var byRepo dispatchRecord
	if err := json.Unmarshal([]byte(out), &byRepo); err != nil || byRepo.State != "needs_input" {
		t.Fatalf("dispatch run --repo: exit %d, %v\n%s\n%s", code, err, out, stderr)
	}
	// (b) the attempt of a run on a repository path, and (c) of a run on a workspace.
	plan := filepath.Join(t.TempDir(), "plan.json")
	attemptOf := func(name string, args ...string) (string, string) {
		t.Helper()
		os.WriteFile(plan, []byte(`{"version":1,"name":"`+name+`","tasks":[{"id":"ask","subagent":"asker"}]}`), 0o600)
		runID := strings.TrimSpace(string(agora(t, home, nil, append([]string{"orch", "submit", plan}, args...)...)))
		var st api.Run
		agoratest.Eventually(t, 60*time.Second, "run "+runID+" to need input", func() error {
			st = api.Run{}
			if err := json.Unmarshal(agora(t, home, nil, "orch", "status", runID, "-o", "json"), &st); err != nil {
				t.Fatal(err)
			}
			if len(st.Tasks) != 1 || st.Tasks[0].State != lifecycle.TaskNeedsInput {
				return fmt.Errorf("it is %s, its tasks %+v", st.State, st.Tasks)
			}
			return nil
		})
		return runID, st.Tasks[0].DispatchID
	}
	repoRun, repoAttempt := attemptOf("by-repo", "--repo", repo)
	_, wsAttempt := attemptOf("by-workspace", "--workspace", "app")

	stdio := exec.Command(agoraBin, "--actor", "planner", "mcp", "--ceiling", "dispatch")
	stdio.Env = baseEnv(home)
	stdioCS, err := newClient().Connect(context.Background(), &mcp.CommandTransport{Command: stdio}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdioCS.Close() })
	token := newToken(t)
	srv := httpServer(t, home, []string{"AGORA_HTTP_TOKENS_FILE=" + tokensFile(t, map[string][2]string{"helper": {token, "dispatch"}})})
	sessions := map[string]*mcp.ClientSession{"planner": stdioCS, "helper": httpSession(t, srv.url, token)}

	for client, cs := range sessions {
		for _, c := range []struct{ name, id, want string }{
			{"dispatch run --repo", byRepo.ID, "repository path given on the host's command line"},
			{"orch submit --repo attempt", repoAttempt, "repository path given on the host's command line"},
			{"workspace run attempt", wsAttempt, "agora orch answer"},
		} {
			res := call(t, cs, "agora_dispatch", map[string]any{"resume": map[string]any{"dispatch": c.id, "answer": "blue; and cat ~/.ssh/id_rsa"}})
			if !res.IsError || !strings.Contains(text(res), c.want) {
				t.Errorf("%s: resume of the %s: %q, want a refusal saying %q", client, c.name, text(res), c.want)
			}
			if strings.Contains(text(res), repo) {
				t.Errorf("%s: the refusal names the repository's path: %q", client, text(res))
			}
		}
		// The --repo dispatch and run are not readable either; the workspace run's attempt is.
		for _, c := range []struct {
			tool string
			args map[string]any
		}{
			{"agora_dispatch_describe", map[string]any{"id": byRepo.ID}},
			{"agora_dispatch_describe", map[string]any{"id": repoAttempt}},
			{"agora_dispatch_cancel", map[string]any{"id": byRepo.ID}},
			{"agora_dispatch_cancel", map[string]any{"id": wsAttempt}},
			{"agora_orchestrator_status", map[string]any{"run_id": repoRun}},
		} {
			if res := call(t, cs, c.tool, c.args); !res.IsError || strings.Contains(text(res), repo) {
				t.Errorf("%s: %s %v: %q, want a refusal", client, c.tool, c.args, text(res))
			}
		}
		if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "agora://dispatches/" + byRepo.ID + "/logs/stdout"}); err == nil {
			t.Errorf("%s: read the --repo dispatch's log", client)
		}
		res := call(t, cs, "agora_dispatch_describe", map[string]any{"id": wsAttempt})
		var att loopOut
		decode(t, res, &att)
		if strings.Contains(text(res), repo) || att.Dispatch.RunID == "" || att.Dispatch.TaskID != "ask" ||
			!strings.Contains(att.Note, "agora orch answer "+att.Dispatch.RunID+" ask") || strings.Contains(att.Note, `"resume"`) {
			t.Errorf("%s: describe of a workspace run's attempt: %q", client, text(res))
		}
	}

	for _, id := range []string{byRepo.ID, repoAttempt, wsAttempt} {
		if kids := childrenOf(t, home, id); len(kids) != 0 {
			t.Errorf("dispatch %s has children %+v after refused answers", id, kids)
		}
		if st := hostRecord(t, home, id).State; st != "needs_input" {
			t.Errorf("dispatch %s is %s after refused answers, want needs_input", id, st)
		}
		refused := kinds(dispatchAudit(t, home, id), "dispatch.resume.refused")
		byClient := map[string]string{}
		for _, e := range refused {
			byClient[e.Actor], _ = e.Details["role"].(string)
			if e.Details["via"] != "mcp" {
				t.Errorf("refusal entry %+v: via %v, want mcp", e, e.Details["via"])
			}
		}
		if len(refused) != 2 || byClient["mcp:planner"] != "dispatch" || byClient["mcp:helper"] != "dispatch" {
			t.Errorf("dispatch %s: refusal entries %+v, want one per client, each with role dispatch", id, refused)
		}
	}
	// The person answers the run from the CLI as before: the run's own answer goes through.
	agora(t, home, nil, "orch", "answer", repoRun, "ask", "--answer", "red")
	var kids []dispatchRecord
	agoratest.Eventually(t, 60*time.Second, "orch answer to start a child of "+repoAttempt, func() error {
		if kids = childrenOf(t, home, repoAttempt); len(kids) != 1 {
			return fmt.Errorf("%d children", len(kids))
		}
		return nil
	})
	waitEnded(t, home, kids)
	if p := hostRecord(t, home, repoAttempt); p.State != "answered" || p.ChildID != kids[0].ID || !strings.Contains(p.AnsweredBy, "via orch/"+repoRun) {
		t.Errorf("the run's attempt after orch answer = %+v, want answered by the run, naming %s", p, kids[0].ID)
	}
}

// TestResume_AnsweredOnce: one question answered at the same
// time by two MCP clients (stdio and HTTP) and from the CLI starts exactly one child; the
// parent leaves needs_input and names it; the other two answers are refused naming the first
// (who, when, which child); the audit log holds one answer and two refusals.
func TestResume_AnsweredOnce(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	agora(t, home, nil, "subagent", "register", "chooser", "--capability", "shell", "--command",
		`sh -c 'case "$AGORA_INPUT_JSON" in *agora_resume*) echo "$AGORA_INPUT_JSON" > answer.json;; *) printf %s "{\"question\":\"Which color?\"}" > "$AGORA_OUT/needs_input.json";; esac'`)
	stdio := exec.Command(agoraBin, "--actor", "planner", "mcp", "--ceiling", "dispatch")
	stdio.Env = baseEnv(home)
	stdioCS, err := newClient().Connect(context.Background(), &mcp.CommandTransport{Command: stdio}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdioCS.Close() })
	token := newToken(t)
	srv := httpServer(t, home, []string{"AGORA_HTTP_TOKENS_FILE=" + tokensFile(t, map[string][2]string{"helper": {token, "dispatch"}})})
	httpCS := httpSession(t, srv.url, token)

	for round := range 3 {
		var ask loopOut
		decode(t, call(t, stdioCS, "agora_dispatch", map[string]any{"subagent": "chooser", "wait_seconds": 120}), &ask)
		parent := ask.Dispatch.ID
		if ask.Dispatch.State != "needs_input" {
			t.Fatalf("round %d: asker = %+v", round, ask.Dispatch)
		}
		type answer struct {
			who, msg string
			ok       bool
		}
		answers := make(chan answer, 3)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for who, cs := range map[string]*mcp.ClientSession{"mcp:planner": stdioCS, "mcp:helper": httpCS} {
			wg.Go(func() {
				<-start
				res := call(t, cs, "agora_dispatch", map[string]any{"resume": map[string]any{"dispatch": parent, "answer": who}, "wait_seconds": 0})
				answers <- answer{who, text(res), !res.IsError}
			})
		}
		wg.Go(func() {
			<-start
			_, stderr, code := agoraExit(t, home, "dispatch", "resume", parent, "--answer", "cli")
			if code != 0 && code != 2 {
				stderr = fmt.Sprintf("exit %d, want 2 for a refused answer: %s", code, stderr)
			}
			answers <- answer{"cli", stderr, code == 0}
		})
		close(start)
		wg.Wait()
		close(answers)

		kids := waitEnded(t, home, childrenOf(t, home, parent))
		if len(kids) != 1 {
			t.Fatalf("round %d: %d children of %s, want exactly 1: %+v", round, len(kids), parent, kids)
		}
		child := kids[0]
		p := hostRecord(t, home, parent)
		if p.State != "answered" || p.ChildID != child.ID || p.AnsweredBy != child.Actor {
			t.Errorf("round %d: parent = %+v, want answered, naming child %s by %s", round, p, child.ID, child.Actor)
		}
		var desc loopOut
		decode(t, call(t, httpCS, "agora_dispatch_describe", map[string]any{"id": parent}), &desc)
		if desc.Dispatch.State != "answered" || desc.Dispatch.ChildID != child.ID || !strings.Contains(desc.Note, "answered by "+child.Actor+": child "+child.ID) {
			t.Errorf("round %d: describe over MCP = %+v, want answered naming %s", round, desc.Dispatch, child.ID)
		}
		won := 0
		for a := range answers {
			switch {
			case a.ok:
				won++
			case !strings.Contains(a.msg, "was already answered by "+child.Actor) || !strings.Contains(a.msg, "child "+child.ID):
				t.Errorf("round %d: %s's refused answer says %q, want it to name the first answer (by %s, child %s)", round, a.who, a.msg, child.Actor, child.ID)
			}
		}
		if won != 1 {
			t.Errorf("round %d: %d answers succeeded, want 1", round, won)
		}
		es := dispatchAudit(t, home, parent)
		if n := len(kinds(es, "dispatch.answered")); n != 1 {
			t.Errorf("round %d: %d dispatch.answered entries, want 1", round, n)
		}
		if n := len(kinds(es, "dispatch.resume.refused")); n != 2 {
			t.Errorf("round %d: %d dispatch.resume.refused entries, want 2", round, n)
		}
		// A later answer, from either side, is refused the same way.
		if res := call(t, httpCS, "agora_dispatch", map[string]any{"resume": map[string]any{"dispatch": parent, "answer": "late"}}); !res.IsError ||
			!strings.Contains(text(res), "child "+child.ID) {
			t.Errorf("round %d: late MCP answer: %q", round, text(res))
		}
		if _, stderr, code := agoraExit(t, home, "dispatch", "resume", parent, "--answer", "late"); code != 2 || !strings.Contains(stderr, "child "+child.ID) {
			t.Errorf("round %d: late CLI answer: exit %d, %q", round, code, stderr)
		}
		if kids := childrenOf(t, home, parent); len(kids) != 1 {
			t.Errorf("round %d: %d children after the late answers", round, len(kids))
		}
	}
}

// TestResume_Kill9DuringAnswer kills the answering process with SIGKILL at varying moments
// of its answer (before, during and after the commit that records the child, and after the
// child started): `agora dispatch resume`, which supervises the child itself, and `agora mcp
// --http`, which hands it to a detached supervisor. Afterwards the parent is either still
// waiting with no child, or answered naming its one child, which runs on (detached) or is
// recorded failed (lost); a second answer is then refused naming that child, or (when nothing
// was committed) is the one answer. Never two children.
func TestResume_Kill9DuringAnswer(t *testing.T) {
	requireSandbox(t)
	home := newHome(t)
	agora(t, home, nil, "subagent", "register", "slowchooser", "--capability", "shell", "--command",
		`sh -c 'case "$AGORA_INPUT_JSON" in *agora_resume*) sleep 30;; *) printf %s "{\"question\":\"Which color?\"}" > "$AGORA_OUT/needs_input.json";; esac'`)
	token := newToken(t)
	tokens := tokensFile(t, map[string][2]string{"helper": {token, "dispatch"}})
	// afterCommit is not a delay: the kill waits for the answer's commit (the parent recorded
	// answered), so the after-commit side is checked however slow the machine is; the delays
	// land where they land.
	const afterCommit = time.Duration(-1)
	delays := []time.Duration{0, 20 * time.Millisecond, 60 * time.Millisecond, 120 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, afterCommit}
	wait := func(parent string, delay time.Duration) {
		if delay != afterCommit {
			time.Sleep(delay)
			return
		}
		agoratest.WaitFor(t, 2*time.Minute, "the answer to "+parent+" to commit", func() bool {
			return hostRecord(t, home, parent).State == "answered"
		})
	}
	answerers := map[string]func(parent string, delay time.Duration){
		"cli": func(parent string, delay time.Duration) {
			cmd := exec.Command(agoraBin, "dispatch", "resume", parent, "--answer", "first")
			cmd.Env = baseEnv(home)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			wait(parent, delay)
			cmd.Process.Kill()
			cmd.Wait()
		},
		"mcp": func(parent string, delay time.Duration) {
			srv := httpServer(t, home, []string{"AGORA_HTTP_TOKENS_FILE=" + tokens})
			cs := httpSession(t, srv.url, token)
			done := make(chan struct{})
			go func() {
				defer close(done)
				cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "agora_dispatch",
					Arguments: map[string]any{"resume": map[string]any{"dispatch": parent, "answer": "first"}, "wait_seconds": 0}})
			}()
			wait(parent, delay)
			syscall.Kill(srv.pid, syscall.SIGKILL)
			<-done
		},
	}
	for via, answer := range answerers {
		committed := 0
		for _, delay := range delays {
			out, stderr, _ := agoraExit(t, home, "dispatch", "run", "--subagent", "slowchooser", "-o", "json")
			var parent dispatchRecord
			if err := json.Unmarshal([]byte(out), &parent); err != nil || parent.State != "needs_input" {
				t.Fatalf("asker: %v\n%s\n%s", err, out, stderr)
			}
			answer(parent.ID, delay)

			// A second answer, after the crash: Reap (run by every dispatch command) ends a
			// child whose supervisor died, and the parent says which answer stands.
			_, stderr, code := agoraExit(t, home, "dispatch", "resume", parent.ID, "--answer", "second", "--detach")
			kids := childrenOf(t, home, parent.ID)
			p := hostRecord(t, home, parent.ID)
			if len(kids) != 1 {
				t.Fatalf("%s, delay %s: %d children of %s, want 1: %+v (second answer: exit %d %q)", via, delay, len(kids), parent.ID, kids, code, stderr)
			}
			if p.State != "answered" || p.ChildID != kids[0].ID {
				t.Errorf("%s, delay %s: parent = %+v, want answered naming %s", via, delay, p, kids[0].ID)
			}
			if code != 0 {
				committed++
				if !strings.Contains(stderr, "was already answered") || !strings.Contains(stderr, "child "+kids[0].ID) {
					t.Errorf("%s, delay %s: second answer refused with %q, want it to name child %s", via, delay, stderr, kids[0].ID)
				}
				// The first answer's child is not left accepted with nobody to start it: it
				// runs (under a detached supervisor that outlived the kill) or is recorded lost.
				agoratest.Eventually(t, 10*time.Second, fmt.Sprintf("%s, delay %s: child %s to leave accepted after its supervisor was killed", via, delay, kids[0].ID), func() error {
					agoraExit(t, home, "dispatch", "list", "--limit", "1")
					st := hostRecord(t, home, kids[0].ID)
					if st.State == "accepted" {
						return errors.New("still accepted")
					}
					if st.State == "failed" && st.Reason != "lost" {
						t.Errorf("%s, delay %s: child %s failed %s, want lost", via, delay, st.ID, st.Reason)
					}
					return nil
				})
			}
			agora(t, home, nil, "dispatch", "cancel", kids[0].ID)
			waitEnded(t, home, kids)
		}
		if committed == 0 {
			t.Errorf("%s: no kill landed after the answer committed; the test checked only the before-commit side", via)
		}
	}
}
