package dispatch_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
)

// docsPushCapability is docs/runtimes.md's Approvals capability.
const docsPushCapability = `tools: [read_file, write_file, run_command]
commands: ["git **"]
approve:
  - write_file
  - {command: "git push *"}
`

// TestApproval_OpenAIHoldsEveryPush: under the docs' capability the
// model pushes to a repository in its workspace in every way git allows: a longer argument
// list, a global -c, an alias on the command line, an alias set in the repository's config,
// send-pack. Each call is held for a person before it runs (an approval request, never
// "run_command allowed" first); the denied ones never reach the remote, and the one the
// person approves does.
func TestApproval_OpenAIHoldsEveryPush(t *testing.T) {
	e := newModelEnv(t)
	e.capability("gitpush", docsPushCapability, nil)
	e.modelSubagent("pusher", "openai", "gitpush")
	call := func(id string, argv ...string) openaitest.Call {
		return openaitest.Call{ID: id, Name: "run_command", Arguments: mustJSON(t, map[string]any{"argv": argv})}
	}
	pushes := []openaitest.Call{
		call("call_plain", "git", "push", "r.git", "HEAD:refs/heads/x"),
		call("call_c", "git", "-c", "x.y=z", "push", "r.git", "HEAD:refs/heads/y"),
		call("call_alias", "git", "-c", "alias.p=push", "p", "r.git", "HEAD:refs/heads/z"),
		call("call_config", "git", "config", "alias.pp", "push"),
		call("call_repoalias", "git", "pp", "r.git", "HEAD:refs/heads/w"),
		call("call_sendpack", "git", "-C", ".", "send-pack", "r.git", "HEAD:refs/heads/v"),
	}
	script := []openaitest.Step{openaitest.CallTools(call("call_init", "git", "init", "-q", "--bare", "r.git"))}
	for _, c := range pushes {
		script = append(script, openaitest.Func(func(req openaitest.Request) openaitest.Reply {
			return openaitest.Reply{ToolCalls: []openaitest.Call{c}}
		}))
	}
	script = append(script, openaitest.Func(func(req openaitest.Request) openaitest.Reply {
		return openaitest.Reply{Content: "done"}
	}))
	srv := e.model(testAPIKey, script...)
	repo := gitRepo(t, map[string]string{"README.md": "# repo\n"})
	id, done := e.runAsync(dispatch.Request{Subagent: "pusher", Envs: []string{"model"}, Repo: repo})

	seq := 0
	for i, c := range pushes {
		a := e.awaitPending(id, seq)
		seq = a.Seq
		if a.CallID != c.ID || a.Tool != "run_command" || a.Rule != "command: git push *" {
			t.Errorf("held call %+v, want %s run_command under the rule command: git push *", a, c.ID)
		}
		if i == 0 {
			if out, err := e.approvalCLI("dispatch", "approve", id, c.ID, "--digest", a.ArgsDigest); err != nil {
				t.Fatalf("approve: %v\n%s", err, out)
			}
			continue
		}
		if out, err := e.approvalCLI("dispatch", "deny", id, c.ID, "--reason", "no pushes"); err != nil {
			t.Fatalf("deny %s: %v\n%s", c.ID, err, out)
		}
	}
	r := <-done
	wantFinished(t, r)
	if got := len(srv.Accepted()); got != len(pushes)+2 {
		t.Fatalf("the model got %d requests, want %d", got, len(pushes)+2)
	}
	for i, req := range srv.Accepted()[3:] {
		if got := lastToolResult(t, req); !strings.Contains(got, "approval denied by") || !strings.Contains(got, "no pushes") {
			t.Errorf("call %s came back %q, want the denial", pushes[i+1].ID, got)
		}
	}
	want := []string{"run_command allowed granted", "run_command allowed granted"}
	for range pushes[1:] {
		want = append(want, "run_command denied approval denied by ")
	}
	got := e.toolCalls(r)
	if len(got) != len(want) {
		t.Fatalf("tool.call entries %q, want %d", got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("tool.call %d: %q, want %q...", i, got[i], want[i])
		}
	}
	if reqs := e.audited(r, entry.ApprovalRequest); len(reqs) != len(pushes) {
		t.Errorf("%d approval.request entries, want %d", len(reqs), len(pushes))
	}
	patch := e.blob(r.Result.Patch)
	if !strings.Contains(patch, "r.git/refs/heads/x") {
		t.Errorf("the approved push did not reach r.git: patch %q", patch)
	}
	for _, ref := range []string{"y", "z", "w", "v"} {
		if strings.Contains(patch, "r.git/refs/heads/"+ref) {
			t.Errorf("the denied push to refs/heads/%s reached r.git", ref)
		}
	}
	if strings.Contains(patch, "alias") {
		t.Errorf("the denied git config alias.pp push changed the config: %q", patch)
	}
}

// The exec runtime cannot hold a call, so an exec command any approve rule holds is refused
// at accept, whatever global options or aliases it is spelt with.
func TestCheckCommand_ExecHeldForms(t *testing.T) {
	g := grant.Set{Commands: []string{"git **"}, Approve: []grant.ApproveRule{{Command: "git push *"}}}
	for _, argv := range [][]string{
		{"git", "push", "r.git", "HEAD:refs/heads/x"},
		{"git", "-c", "x.y=z", "push", "r.git"},
		{"git", "-c", "alias.p=push", "p", "r.git"},
		{"git", "pp"},
	} {
		if got := dispatch.CheckCommand(catalog.SubagentDoc{Runtime: "exec", Command: argv}, g); !strings.Contains(got, "exec runtime cannot hold a call") {
			t.Errorf("exec %q: %q, want the refusal", argv, got)
		}
	}
	if got := dispatch.CheckCommand(catalog.SubagentDoc{Runtime: "exec", Command: []string{"git", "status"}}, g); got != "" {
		t.Errorf("exec git status refused: %q", got)
	}
}
