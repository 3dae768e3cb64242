package service_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// goToolchain is where the verify sandbox finds `go`: under /usr, which the local sandbox
// binds read-only.
const goToolchain = "/usr/local/go/bin"

// goRepo is a tiny Go module with a passing test.
func goRepo(t *testing.T) string {
	t.Helper()
	repo := t.TempDir()
	gitIn(t, repo, "init", "-q", "-b", "main")
	for name, content := range map[string]string{
		"go.mod":       "module example.com/calc\n\ngo 1.22\n",
		"calc.go":      "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
		"calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"Add(2, 3) != 5\")\n\t}\n}\n",
	} {
		must(t, os.WriteFile(filepath.Join(repo, name), []byte(content), 0o644))
	}
	gitIn(t, repo, "add", "-A")
	gitIn(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "base")
	return repo
}

// writeConfig writes agora.yaml.
func (e *env) writeConfig(cfg string) {
	must(e.t, os.WriteFile(filepath.Join(e.home, "agora.yaml"), []byte(cfg), 0o600))
}

// statusOf reads a run's status as JSON, tasks by id.
func (e *env) statusOf(run string) (api.Run, map[string]api.Task) {
	e.t.Helper()
	var r api.Run
	must(e.t, json.Unmarshal([]byte(e.run("orch", "status", run, "-o", "json")), &r))
	byID := map[string]api.Task{}
	for _, task := range r.Tasks {
		byID[task.ID] = task
	}
	return r, byID
}

// auditRun exports the run's bundle, checks agora verify passes it, and returns its orch
// entries' kinds with their details.
func (e *env) auditRun(run string) []verify.EntryFields {
	e.t.Helper()
	out := filepath.Join(e.t.TempDir(), "run.json")
	e.run("orch", "audit", run, "--out", out)
	code, stdout := verifyFile(e.t, out, filepath.Join(e.home, "keys", "audit.pub"))
	if code != 0 {
		e.t.Fatalf("agora verify of run %s: exit %d\n%s", run, code, stdout)
	}
	raw, err := os.ReadFile(out)
	must(e.t, err)
	b, err := verify.ParseRunBundle(strings.NewReader(string(raw)))
	must(e.t, err)
	var entries []verify.EntryFields
	for _, x := range b.Orch.Entries {
		f, err := verify.DecodeEntry(x.Entry)
		must(e.t, err)
		entries = append(entries, f)
	}
	return entries
}

func kinds(entries []verify.EntryFields, kind string) []verify.EntryFields {
	var out []verify.EntryFields
	for _, f := range entries {
		if f.Kind == kind {
			out = append(out, f)
		}
	}
	return out
}

// TestServe_FixLoopGoTest: a plan whose first attempt fails `go test` in its verify gate is
// fixed by its fix loop and green on the second verify, through the real binary, serve and
// bubblewrap, with scripted exec agents: the fix starts from the red work (applied before it
// runs) and reads its verdict (verify.json and the failing output), its patch holds both, the task's dependent and `orch patches` take the fix's patch,
// and the run's audit bundle, with the whole lineage, passes agora verify.
func TestServe_FixLoopGoTest(t *testing.T) {
	requireBwrap(t)
	if _, err := os.Stat(goToolchain + "/go"); err != nil {
		t.Skipf("SKIP: no Go toolchain at %s to run `go test` in the verify sandbox", goToolchain)
	}
	e := newEnv(t)
	cache := agoratest.VerifyGoCache(t, goToolchain)
	e.writeConfig("targets:\n  local:\n    verify_path: [" + goToolchain + "]\n    verify_cache: " + cache + "\n")
	serve := e.serve()
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	repo := goRepo(t)
	e.editors(map[string]string{
		"breaker": `sed -i 's/a + b/a - b/' calc.go`,
		// The fixer needs the red work in its workspace: without it, it fails.
		"fixer": `grep -q 'a - b' calc.go || { echo "the rejected work is not in the workspace" >&2; exit 3; }; ` +
			`test -f "$AGORA_INPUTS/patch/patch.diff" || exit 4; grep -q 'Add(2, 3) != 5' "$AGORA_INPUTS/verify/output.txt" || exit 5; ` +
			`grep -q '"reason":"exit-status"' "$AGORA_INPUTS/verify/verify.json" || exit 6; sed -i 's/a - b/a + b/' calc.go; printf 'fixed\n' > FIXED`,
	})
	planPath := filepath.Join(t.TempDir(), "plan.yaml")
	must(t, os.WriteFile(planPath, []byte(`version: 1
name: fixloop
tasks:
  - id: impl
    subagent: breaker
    verify: {command: [go, test, ./...], protect: ["**/*_test.go"], timeout: 5m}
    on_fail: {fix: {subagent: fixer, max_attempts: 2}}
  - id: after
    subagent: worker
    needs: {work: {from: impl, select: patch}}
`), 0o644))
	e.run("orch", "submit", planPath, "--repo", repo, "--wait")

	run, byID := e.statusOf("fixloop")
	impl, fix, after := byID["impl"], byID["impl.fix-1"], byID["after"]
	if run.State != lifecycle.RunSucceeded || impl.State != lifecycle.TaskSucceeded || fix.State != lifecycle.TaskSucceeded || after.State != lifecycle.TaskSucceeded {
		t.Fatalf("run %s: impl %s, impl.fix-1 %s, after %s (%s: %s)", run.State, impl.State, fix.State, after.State, fix.Reason, fix.Detail)
	}
	if _, extra := byID["impl.fix-2"]; extra || run.Total != 3 {
		t.Errorf("%d tasks: %v; want one fix", run.Total, taskIDs(run))
	}
	if impl.Verdict == nil || impl.Verdict.Passed || !strings.Contains(impl.Verdict.OutputTail, "Add(2, 3) != 5") {
		t.Errorf("impl's verdict %+v, want red with the failing test", impl.Verdict)
	}
	if fix.Verdict == nil || !fix.Verdict.Passed || fix.Added == nil || fix.Added.Cause != "fix" || fix.Added.Task != "impl" {
		t.Errorf("fix: verdict %+v, added %+v", fix.Verdict, fix.Added)
	}
	if impl.Product != fix.DispatchID {
		t.Errorf("impl's product %q, want its fix's dispatch %s", impl.Product, fix.DispatchID)
	}
	// The fix's patch is taken against the run's commit: the red work and its undoing cancel
	// out in calc.go, and what the fixer added remains.
	patch := e.run("dispatch", "patch", fix.DispatchID)
	if !strings.Contains(patch, "+fixed") || strings.Contains(patch, "calc.go") {
		t.Errorf("the fix's patch:\n%s", patch)
	}
	if combined := e.run("orch", "patches", "fixloop", "--combined"); !strings.Contains(combined, "+fixed") || strings.Contains(combined, "a - b") {
		t.Errorf("orch patches --combined takes the red work or misses the fix:\n%s", combined)
	}
	// The dependent received the fix's patch.
	var desc struct {
		Inputs []struct {
			Key          string `json:"key"`
			FromDispatch string `json:"from_dispatch"`
		} `json:"inputs"`
	}
	must(t, json.Unmarshal([]byte(e.run("dispatch", "describe", after.DispatchID, "-o", "json")), &desc))
	if len(desc.Inputs) != 1 || desc.Inputs[0].FromDispatch != fix.DispatchID {
		t.Errorf("after's inputs %+v, want the fix's patch %s", desc.Inputs, fix.DispatchID)
	}

	entries := e.auditRun("fixloop")
	ext := kinds(entries, "orch.run.extended")
	if len(ext) != 1 || ext[0].Details["cause"] != "fix" || ext[0].Details["from_dispatch"] != impl.DispatchID {
		t.Errorf("extension entries %+v", ext)
	}
	if rej := kinds(entries, "orch.task.rejected"); len(rej) != 1 || rej[0].Details["reason"] != "verify-failed" {
		t.Errorf("rejected entries %+v", rej)
	}
	if v := kinds(entries, "orch.task.verified"); len(v) != 2 {
		t.Errorf("%d orch.task.verified entries, want the red and the green", len(v))
	}
}

func taskIDs(r api.Run) []string {
	var out []string
	for _, t := range r.Tasks {
		out = append(out, t.ID)
	}
	return out
}

// TestServe_ReviewQuorum: three model reviewers judge a task's work, each answering its
// review as its final answer. At approve: 2, two approvals pass it; at approve: 3 the same
// reviews send it to its fix loop (an exec fixer), whose work all three approve (r-fixed
// approves only fixed work, which it reads in the patch it is given). Both bundles pass agora
// verify.
func TestServe_ReviewQuorum(t *testing.T) {
	e, _ := reviewEnv(t, "")
	e.editors(map[string]string{
		"coder": `printf 'draft\n' > work.txt`,
		"fixer": `mkdir -p "$AGORA_OUT/outputs"; printf '%s' "$AGORA_INPUT_JSON" > "$AGORA_OUT/outputs/input.json"; test -f work.txt || exit 3; printf 'fixed\n' >> work.txt`,
	})
	for _, tt := range []struct {
		name, review string
		fixes        bool
	}{
		{"quorum-two", "{subagents: [r-draft, r-approve, r-fixed], approve: 2}", false},
		{"quorum-three", "{subagents: [r-draft, r-approve, r-fixed], approve: 3}", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e.run("orch", "submit", writePlan(t, tt.name, "version: 1\nname: "+tt.name+"\ndefaults: {env: [model]}\ntasks:\n  - id: work\n    subagent: coder\n    review: "+tt.review+
				"\n    on_fail: {fix: {subagent: fixer, max_attempts: 1}}\n"), "--wait")
			run, byID := e.statusOf(tt.name)
			if run.State != lifecycle.RunSucceeded {
				t.Fatalf("run %s: %v", run.State, byID)
			}
			rc := byID["work.review-r-fixed"]
			if rc.Review == nil || rc.Review.Approve || rc.Review.Invalid || rc.Review.Reasons[0] != "work.txt is only a draft" || rc.Added == nil || rc.Added.Cause != "review" {
				t.Errorf("r-fixed's review of the draft: %+v, added %+v", rc.Review, rc.Added)
			}
			for _, r := range []string{"r-draft", "r-approve"} {
				if v := byID["work.review-"+r].Review; v == nil || !v.Approve {
					t.Errorf("%s's review: %+v", r, v)
				}
			}
			fix, hasFix := byID["work.fix-1"]
			if hasFix != tt.fixes {
				t.Fatalf("fix loop ran: %v, want %v (%v)", hasFix, tt.fixes, taskIDs(run))
			}
			entries := e.auditRun(tt.name)
			reviewed := kinds(entries, "orch.task.reviewed")
			if !tt.fixes {
				if len(reviewed) != 1 || reviewed[0].Details["approved"] != true || run.Total != 4 {
					t.Errorf("reviewed %+v, %d tasks", reviewed, run.Total)
				}
				return
			}
			if fix.State != lifecycle.TaskSucceeded || byID["work"].Product != fix.DispatchID || run.Total != 8 {
				t.Errorf("fix %s, work's product %q, %d tasks", fix.State, byID["work"].Product, run.Total)
			}
			if v := byID["work.fix-1.review-r-fixed"].Review; v == nil || !v.Approve {
				t.Errorf("r-fixed's review of the fix: %+v", v)
			}
			if len(reviewed) != 2 || reviewed[0].Details["approved"] != false || reviewed[1].Details["approved"] != true {
				t.Errorf("reviewed entries %+v", reviewed)
			}
			var in struct {
				Reasons []string `json:"reasons"`
			}
			must(t, json.Unmarshal([]byte(e.outputOf(fix.DispatchID, "input.json")), &in))
			if len(in.Reasons) != 1 || in.Reasons[0] != "work.review-r-fixed: work.txt is only a draft" {
				t.Errorf("the fix was given reasons %q", in.Reasons)
			}
		})
	}
}

// TestServe_ReviewAttacks: a reviewer whose final answer is no review object (approve twice
// in two cases, prose, nothing, over the 64 KiB limit) is a rejection saying why; one that
// left approving verdict.json and final.md files but answered a rejection rejects (no file
// is read as a review); an honest approval counts. At approve: 2 the task fails
// review-rejected naming each.
func TestServe_ReviewAttacks(t *testing.T) {
	e, _ := reviewEnv(t, "")
	e.editors(map[string]string{"coder": `printf 'x\n' > x.txt`})
	out, ok := e.submit(`version: 1
name: attacks
defaults: {env: [model]}
tasks:
  - id: work
    subagent: coder
    review: {subagents: [r-case, r-prose, r-empty, r-huge, r-lying, r-approve], approve: 2}
`)
	if ok {
		t.Fatalf("the work passed a review of one honest approval:\n%s", out)
	}
	run, byID := e.statusOf("attacks")
	work := byID["work"]
	if run.State != lifecycle.RunFailed || work.State != lifecycle.TaskFailed || work.Reason != "review-rejected" {
		t.Fatalf("run %s, work %s %s: %s", run.State, work.State, work.Reason, work.Detail)
	}
	for id, want := range map[string]string{
		"work.review-r-case":  "final answer: read review:",
		"work.review-r-prose": `final answer: it starts "LGTM, ship it.", not with the review object; want only {"approve": true|false, "reasons": ["..."]}`,
		"work.review-r-empty": "final answer: empty",
		"work.review-r-huge":  "final answer: 70",
	} {
		v := byID[id].Review
		if v == nil || v.Approve || !v.Invalid || !strings.Contains(v.Reasons[0], want) {
			t.Errorf("%s: review %+v, want an invalid rejection with %q", id, v, want)
		}
		if !strings.Contains(work.Detail, id+": ") {
			t.Errorf("work's detail does not name %s: %s", id, work.Detail)
		}
	}
	if v := byID["work.review-r-lying"].Review; v == nil || v.Approve || v.Invalid || v.Reasons[0] != "rejected in the final answer" {
		t.Errorf("the reviewer whose files approve and whose answer rejects: %+v", v)
	}
	if v := byID["work.review-r-approve"].Review; v == nil || !v.Approve {
		t.Errorf("the honest approval: %+v", v)
	}
	if reviewed := e.reviewedEntries("attacks", "work"); len(reviewed) != 1 || reviewed[0]["approved"] != false || fmt.Sprint(reviewed[0]["approvals"]) != "1" {
		t.Errorf("orch.task.reviewed %v", reviewed)
	}
}
