package dispatch_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/provision"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
)

// approvalCLI runs the real agora binary on e's home, as a person at the host would, in a
// process of its own.
func (e *env) approvalCLI(args ...string) (string, error) {
	e.t.Helper()
	cmd := exec.Command(agoraBin, args...)
	cmd.Env = append(os.Environ(), "AGORA_HOME="+e.home.Dir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// awaitPending waits until dispatch id has a pending approval after seq, and returns it. It
// waits for the dispatch's own events: a held call, or its end (its timeout, runAsync's
// dispatchTimeout, ends it). The guard past that only catches a supervisor that hangs.
func (e *env) awaitPending(id string, after int) dispatch.Approval {
	e.t.Helper()
	deadline := time.Now().Add(dispatchTimeout + time.Minute)
	var last *dispatch.Record
	var lastErr error
	for time.Now().Before(deadline) {
		r, err := e.d.Records.Get(e.t.Context(), id)
		if err != nil {
			lastErr = err
		} else {
			last = r
			for _, a := range r.Approvals {
				if a.Seq > after && a.State == dispatch.ApprovalPending {
					if r.Phase != dispatch.PhaseAwaitingApproval {
						e.t.Errorf("a call is pending and the phase is %q, want %s", r.Phase, dispatch.PhaseAwaitingApproval)
					}
					return a
				}
			}
			if lifecycle.DispatchEnded(r.State) {
				e.t.Fatalf("dispatch %s ended (%s %s: %s) with no call pending", id, r.State, r.Reason, r.Detail)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if last != nil {
		e.t.Fatalf("dispatch %s: still %s (phase %q), no call held, %s past its timeout; last read error: %v", id, last.State, last.Phase, time.Minute, lastErr)
	}
	e.t.Fatalf("dispatch %s: never read: %v", id, lastErr)
	return dispatch.Approval{}
}

// dispatchTimeout is an approval test's dispatch's budget: only a bound for a run that hangs,
// so long enough for a loaded machine to reach every hold.
const dispatchTimeout = 3 * time.Minute

// runAsync accepts req and supervises it on a goroutine; the channel yields the final record.
// The test's cleanup waits for the supervisor's return, so that a test that ends early (a
// failed wait) reports the supervisor's error while it still can, and its stage is released
// before the test's directories are removed.
func (e *env) runAsync(req dispatch.Request) (string, <-chan *dispatch.Record) {
	e.t.Helper()
	req.Timeout, req.Actor = dispatchTimeout, "test"
	r, err := e.d.Accept(e.t.Context(), req)
	if err != nil {
		e.t.Fatal(err)
	}
	done := make(chan *dispatch.Record, 1)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		final, err := e.d.Supervise(e.t.Context(), r.ID, nil)
		if err != nil {
			e.t.Error(err)
		}
		done <- final
	}()
	e.t.Cleanup(func() {
		select {
		case <-returned:
		case <-time.After(2 * time.Minute):
			e.t.Errorf("dispatch %s: the supervisor did not return within 2m of the test's end", r.ID)
		}
	})
	return r.ID, done
}

// TestApproval_OpenAIEndToEnd: a capability marks write_file for approval. The model's
// first write is held, shown with its preview, and approved from another process (the real
// binary) with the digest the person read: it runs. The model then writes other arguments
// under the same call id: the earlier approval does not cover them, the call is held again,
// the old digest cannot approve it, and a denial's reason is what the model reads. Both
// decisions are audited with the person as the actor.
func TestApproval_OpenAIEndToEnd(t *testing.T) {
	e := newModelEnv(t)
	e.capability("files", "tools: [read_file, write_file]\napprove: [write_file]\n", nil)
	e.modelSubagent("writer", "openai", "files")
	srv := e.model(testAPIKey,
		openaitest.CallTools(openaitest.Call{ID: "call_same", Name: "write_file", Arguments: `{"path":"a.txt","content":"one"}`}),
		openaitest.Func(func(req openaitest.Request) openaitest.Reply {
			if got := lastToolResult(t, req); strings.Contains(got, "refused") {
				t.Errorf("the approved write came back %q", got)
			}
			return openaitest.Reply{ToolCalls: []openaitest.Call{{ID: "call_same", Name: "write_file", Arguments: `{"path":"a.txt","content":"two"}`}}}
		}),
		openaitest.Func(func(req openaitest.Request) openaitest.Reply {
			got := lastToolResult(t, req)
			if !strings.Contains(got, "approval denied by") || !strings.Contains(got, "keep the first version") {
				t.Errorf("the denied write came back %q, want the denial and its reason", got)
			}
			return openaitest.Reply{Content: "done"}
		}),
	)
	repo := gitRepo(t, map[string]string{"README.md": "# repo\n"})
	id, done := e.runAsync(dispatch.Request{Subagent: "writer", Envs: []string{"model"}, Repo: repo})

	first := e.awaitPending(id, 0)
	if first.CallID != "call_same" || first.Tool != "write_file" || !strings.Contains(first.Preview, `"content":"one"`) {
		t.Errorf("held call %+v, want call_same write_file with its arguments in the preview", first)
	}
	if out, err := e.approvalCLI("dispatch", "describe", id); err != nil || !strings.Contains(out, "phase:     awaiting_approval") || !strings.Contains(out, "call_same write_file pending") {
		t.Errorf("describe while held: %v\n%s", err, out)
	}
	if out, err := e.approvalCLI("dispatch", "approve", id, "call_same", "--digest", first.ArgsDigest); err != nil {
		t.Fatalf("approve: %v\n%s", err, out)
	}

	second := e.awaitPending(id, first.Seq)
	if second.ArgsDigest == first.ArgsDigest || !strings.Contains(second.Preview, `"content":"two"`) {
		t.Errorf("second held call %+v, want other arguments with another digest", second)
	}
	// The digest the person approved before does not approve the changed arguments.
	if out, err := e.approvalCLI("dispatch", "approve", id, "call_same", "--digest", first.ArgsDigest); err == nil || !strings.Contains(out, "no pending approval") {
		t.Errorf("approving the changed call with the old digest: %v\n%s", err, out)
	}
	if out, err := e.approvalCLI("dispatch", "deny", id, "call_same", "--reason", "keep the first version"); err != nil {
		t.Fatalf("deny: %v\n%s", err, out)
	}
	r := <-done
	wantFinished(t, r)
	if len(srv.Accepted()) != 3 {
		t.Fatalf("the model got %d requests, want 3", len(srv.Accepted()))
	}
	patch := e.blob(r.Result.Patch)
	if !strings.Contains(patch, "+one") || strings.Contains(patch, "two") {
		t.Errorf("patch %q, want the approved write only", patch)
	}
	if r.Phase != "" || len(r.Approvals) != 2 || r.Approvals[0].State != dispatch.ApprovalApproved || r.Approvals[1].State != dispatch.ApprovalDenied {
		t.Errorf("record phase %q approvals %+v, want approved then denied", r.Phase, r.Approvals)
	}
	wantCalls := []string{"write_file allowed granted", "write_file denied approval denied by " + r.Approvals[1].Actor + " (" + second.ArgsDigest + ")"}
	if got := e.toolCalls(r); strings.Join(got, "\n") != strings.Join(wantCalls, "\n") {
		t.Errorf("tool.call entries %q, want %q", got, wantCalls)
	}
	reqs, decs := e.audited(r, entry.ApprovalRequest), e.audited(r, entry.ApprovalDecision)
	if len(reqs) != 2 || len(decs) != 2 {
		t.Fatalf("got %d approval.request and %d approval.decision entries, want 2 each", len(reqs), len(decs))
	}
	for i, d := range decs {
		if d.Actor == "" || d.Actor == dispatch.SystemActor || d.Actor == "test" || d.Details["role"] != r.Subagent+"@"+string(r.SubagentDigest) {
			t.Errorf("decision %d by %q role %v, want the person who ran the CLI and the dispatch's role", i, d.Actor, d.Details["role"])
		}
	}
	if decs[0].Details["args_digest"] != first.ArgsDigest || decs[0].Details["decision"] != "approved" ||
		decs[1].Details["args_digest"] != second.ArgsDigest || decs[1].Details["decision"] != "denied" {
		t.Errorf("decisions %v / %v, want approved %s then denied %s", decs[0].Details, decs[1].Details, first.ArgsDigest, second.ArgsDigest)
	}
	bundle := t.TempDir() + "/audit.json"
	if out, err := e.approvalCLI("audit", "export", "--out", bundle, "--kind", "approval.*"); err != nil {
		t.Fatalf("audit export: %v\n%s", err, out)
	}
	if out, err := e.approvalCLI("verify", bundle, "--key", e.home.Dir+"/keys/audit.pub"); err != nil || !strings.Contains(out, "approval.decision") {
		t.Errorf("agora verify of a bundle with approval entries: %v\n%s", err, out)
	}
}

// TestApproval_ExpiryDenies: nobody answers; after the target's approval_timeout the call
// is denied as expired by the system, the model reads why, and nothing is written.
func TestApproval_ExpiryDenies(t *testing.T) {
	e := newModelEnv(t)
	target := e.d.Config.Targets["local"]
	target.ApprovalTimeout = time.Second
	e.d.Config.Targets["local"] = target
	e.capability("files", "tools: [write_file]\napprove: [write_file]\n", nil)
	e.modelSubagent("writer", "openai", "files")
	e.model(testAPIKey,
		openaitest.CallTool("write_file", `{"path":"a.txt","content":"unattended"}`),
		openaitest.Func(func(req openaitest.Request) openaitest.Reply {
			if got := lastToolResult(t, req); !strings.Contains(got, "approval expired by system") || !strings.Contains(got, "approval timeout (1s)") {
				t.Errorf("the expired write came back %q", got)
			}
			return openaitest.Reply{Content: "gave up"}
		}),
	)
	repo := gitRepo(t, map[string]string{"README.md": "# repo\n"})
	r := e.run(dispatch.Request{Subagent: "writer", Envs: []string{"model"}, Repo: repo})
	wantFinished(t, r)
	if len(r.Approvals) != 1 || r.Approvals[0].State != dispatch.ApprovalExpired || r.Approvals[0].Actor != dispatch.SystemActor {
		t.Fatalf("approvals %+v, want one expired by system", r.Approvals)
	}
	if r.Result.Patch != nil && r.Result.Patch.Size != 0 {
		t.Errorf("patch %q, want nothing written", e.blob(r.Result.Patch))
	}
	decs := e.audited(r, entry.ApprovalDecision)
	if len(decs) != 1 || decs[0].Actor != dispatch.SystemActor || decs[0].Details["decision"] != "expired" {
		t.Errorf("decision entries %+v, want one expiry by system", decs)
	}
	// Deciding after the expiry changes nothing.
	if out, err := e.approvalCLI("dispatch", "approve", r.ID, r.Approvals[0].CallID); err == nil || !strings.Contains(out, "already expired") {
		t.Errorf("approving an expired call: %v\n%s", err, out)
	}
}

// TestApproval_ClaudeCodeHook: the same hold for claude-code, in its PreToolUse hook (the
// fake claude runs hooks as claude does, their timeout included). The first Write is
// approved from another process and runs; the second is denied, claude does not run it, and
// the model reads the reason.
func TestApproval_ClaudeCodeHook(t *testing.T) {
	e := newModelEnv(t)
	m := newClaudeModel(t,
		"["+toolUse("toolu_01W", "Write", `{"file_path":"/agora/workspace/a.txt","content":"one"}`)+"]",
		"["+toolUse("toolu_01X", "Write", `{"file_path":"/agora/workspace/b.txt","content":"two"}`)+"]",
	)
	claudeEnv(e, m, "tools: [read_file, write_file]\napprove: [write_file]\n", nil, nil)
	repo := gitRepo(t, map[string]string{"README.md": "# demo\n"})
	id, done := e.runAsync(dispatch.Request{Subagent: "critic", Envs: []string{"anthropic"}, Repo: repo, Input: []byte(`{"prompt":"write"}`)})

	first := e.awaitPending(id, 0)
	if first.CallID != "toolu_01W" || first.Tool != "Write" || !strings.Contains(first.Preview, `"content":"one"`) {
		t.Errorf("held call %+v, want toolu_01W Write with its input in the preview", first)
	}
	if out, err := e.approvalCLI("dispatch", "approve", id, "toolu_01W"); err != nil {
		t.Fatalf("approve: %v\n%s", err, out)
	}
	second := e.awaitPending(id, first.Seq)
	if out, err := e.approvalCLI("dispatch", "deny", id, second.CallID, "--reason", "only one file please"); err != nil {
		t.Fatalf("deny: %v\n%s", err, out)
	}
	r := <-done
	wantFinished(t, r)
	if !strings.Contains(m.body(3), "only one file please") {
		t.Errorf("the model was not given the denial's reason: %s", m.body(3))
	}
	patch := e.blob(r.Result.Patch)
	if !strings.Contains(patch, "a.txt") || strings.Contains(patch, "b.txt") {
		t.Errorf("patch %q, want the approved Write only", patch)
	}
	calls := e.toolCalls(r)
	want := []string{
		"Write requested claude-code: about to run; claude's permission rules derived from the grant decide",
		"Write allowed claude-code: ran, allowed by the permission rules derived from the grant",
		"Write denied claude-code: approval denied by " + r.Approvals[1].Actor + " (" + second.ArgsDigest + ")",
	}
	if strings.Join(calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("tool.call entries:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
}

// A pending approval of a dispatch that ends (its supervisor died holding the call) expires
// with it, by system, and can no longer be decided: nothing waits for the decision.
// A reason over the limit and a system actor are refused too.
func TestRecords_DecideApprovalRefusals(t *testing.T) {
	e := newEnv(t)
	e.subagent("quiet", "true")
	r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "quiet", Timeout: time.Minute, Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	a, err := e.d.Records.RequestApproval(t.Context(), r.ID, dispatch.Approval{CallID: "call_1", Tool: "write_file",
		ArgsDigest: "sha256:" + strings.Repeat("a", 64), Preview: "{}", Rule: "write_file", Role: "r"}, `{"path":"p"}`, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if args, err := e.d.Records.ApprovalArgs(t.Context(), r.ID, a.Seq); err != nil || args != `{"path":"p"}` {
		t.Errorf("args of the pending call: %q, %v", args, err)
	}
	if _, err := e.d.Records.DecideApproval(t.Context(), r.ID, "call_1", true, "", dispatch.SystemActor, ""); err == nil {
		t.Error("the system actor approved a call")
	}
	if _, err := e.d.Records.DecideApproval(t.Context(), r.ID, "call_1", false, strings.Repeat("x", 2000), "alice", ""); err == nil {
		t.Error("a 2000-byte reason was taken")
	}
	if _, err := e.d.Records.DecideApproval(t.Context(), r.ID, "call_1", true, "", "alice", "sha256:"+strings.Repeat("b", 64)); err == nil || !strings.Contains(err.Error(), "with arguments sha256:bbbb") {
		t.Errorf("approving other arguments: %v", err)
	}
	if _, err := e.d.Records.Finish(t.Context(), r.ID, dispatch.Outcome{State: lifecycle.DispatchCancelled, Reason: lifecycle.ReasonCancelled}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.d.Records.DecideApproval(t.Context(), r.ID, "call_1", true, "", "alice", ""); err == nil || !strings.Contains(err.Error(), "already expired") {
		t.Errorf("approving a call of an ended dispatch: %v", err)
	}
	got, err := e.d.Records.Approval(t.Context(), r.ID, a.Seq)
	if err != nil || got.State != dispatch.ApprovalExpired || got.Actor != dispatch.SystemActor || !strings.Contains(got.Reason, "the dispatch ended (cancelled)") {
		t.Errorf("approval %+v, %v: want it expired by system with the dispatch", got, err)
	}
	// The whole arguments are kept only while someone may still decide.
	if args, err := e.d.Records.ApprovalArgs(t.Context(), r.ID, a.Seq); err != nil || args != "" {
		t.Errorf("args of the expired call: %q, %v, want none kept", args, err)
	}
	decs := e.audited(r, entry.ApprovalDecision)
	if len(decs) != 1 || decs[0].Actor != dispatch.SystemActor {
		t.Errorf("decision entries %+v, want the one expiry", decs)
	}
}

// The exec runtime cannot hold a call: an exec subagent whose command an approve rule marks
// is refused at accept (failed, denied) and never runs unheld.
func TestApproval_ExecRefused(t *testing.T) {
	e := newEnv(t)
	capDir := t.TempDir()
	os.WriteFile(capDir+"/capability.yaml", []byte("commands: [\"sh -c *\"]\napprove: [{command: \"sh -c *\"}]\n"), 0o644)
	pc, err := e.w.PrepareCapability("held", capDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.w.Register(t.Context(), "test", "register", pc); err != nil {
		t.Fatal(err)
	}
	p, err := e.w.PrepareSubagent(t.Context(), "pusher", provision.SubagentSpec{Command: []string{"sh", "-c", "touch ran"}, Capabilities: []string{"held"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.w.Register(t.Context(), "test", "register", p); err != nil {
		t.Fatal(err)
	}
	r := e.run(dispatch.Request{Subagent: "pusher"})
	if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonDenied || !strings.Contains(r.Detail, "exec runtime cannot hold a call") {
		t.Fatalf("got %s %s %q, want failed denied: the exec runtime cannot hold a call", r.State, r.Reason, r.Detail)
	}
}

// Codex runs with approval_policy "never": it cannot hold a call, so a codex subagent whose
// grant marks any call for approval is refused at accept, never audited after the fact.
func TestCheckCommand_CodexCannotHold(t *testing.T) {
	held := grant.Set{Tools: []string{"write_file"}, Approve: []grant.ApproveRule{{Tool: "write_file"}, {Command: "git push *"}}}
	got := dispatch.CheckCommand(catalog.SubagentDoc{Runtime: "codex"}, held)
	if !strings.Contains(got, "codex runtime cannot hold a call") || !strings.Contains(got, "write_file, command: git push *") {
		t.Errorf("codex with approve rules: %q, want a refusal naming the rules", got)
	}
	if got := dispatch.CheckCommand(catalog.SubagentDoc{Runtime: "codex"}, grant.Set{Tools: []string{"write_file"}}); got != "" {
		t.Errorf("codex without approve rules refused: %q", got)
	}
	if got := dispatch.CheckCommand(catalog.SubagentDoc{Runtime: "openai"}, held); got != "" {
		t.Errorf("openai with approve rules refused: %q (it holds calls)", got)
	}
}
