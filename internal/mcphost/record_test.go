package mcphost

import (
	"encoding/json"
	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/mcpserver"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/verdict"
)

// TestRecord_CarriesNoHostDetails: what the MCP view leaves out of a record.
func TestRecord_CarriesNoHostDetails(t *testing.T) {
	exit := 0
	now := time.Unix(1e9, 0).UTC()
	r := &dispatch.Record{
		ID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", State: lifecycle.DispatchNeedsInput, Subagent: "writer", SubagentDigest: digest.Digest("sha256:ab"),
		Envs: []dispatch.EnvRef{{Name: "demo", Digest: "sha256:cd"}}, Target: "local", Sandbox: "bwrap", Network: "none",
		Repo: "/home/alice/src/secret-project", Revision: "deadbeef", CallbackURL: "https://hooks.example.com/x?sig=abc",
		ProviderTaskID: "local:4242", Timeout: dispatch.Duration(90 * time.Second), ExitCode: &exit, CreatedAt: now,
		Result: &dispatch.Result{
			Patch:      &dispatch.Artifact{Digest: "sha256:ef", Size: 10},
			Outputs:    []dispatch.Output{{Path: "report.md", Digest: "sha256:01", Size: 3}},
			NeedsInput: &dispatch.NeedsInput{Question: "which?", Options: []string{"a"}, PartialState: json.RawMessage(`{"draft":"PARTIAL"}`)},
		},
		Events: []dispatch.Event{{Seq: 0, Kind: "accepted", At: now, Data: map[string]any{"input_digest": "sha256:99", "provider_task_id": "local:4242"}}},
	}
	got, err := json.Marshal(record(r))
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"/home/alice", "deadbeef", "hooks.example.com", "local:4242", "PARTIAL", "sha256:99"} {
		if strings.Contains(string(got), leak) {
			t.Errorf("the MCP record carries %q: %s", leak, got)
		}
	}
	for _, want := range []string{`"done":true`, `"subagent":"writer","subagent_digest":"sha256:ab"`, `"envs":[{"name":"demo","digest":"sha256:cd"}]`, `"timeout_seconds":90`,
		`"patch":{"digest":"sha256:ef","size":10}`, `"question":"which?"`, `"events":[{"kind":"accepted"`} {
		if !strings.Contains(string(got), want) {
			t.Errorf("the MCP record lacks %s: %s", want, got)
		}
	}
}

// TestRecord_WorkspaceWithoutPath: a workspace dispatch shows the workspace version and the
// commit, never the repository path, even where a failed checkout wrote it into the detail.
func TestRecord_WorkspaceWithoutPath(t *testing.T) {
	commit := strings.Repeat("ab", 20)
	r := &dispatch.Record{
		ID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", State: lifecycle.DispatchFailed, Reason: lifecycle.ReasonProviderFailed,
		Detail: "stage: clone /srv/src/secret-app: fatal: could not read /srv/src/secret-app/.git", Subagent: "writer",
		SubagentDigest: "sha256:ab", Repo: "/srv/src/secret-app", Revision: commit, Workspace: "app@sha256:" + strings.Repeat("0", 64),
	}
	got, err := json.Marshal(record(r))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got), "/srv/src") {
		t.Errorf("the MCP record carries the repository path: %s", got)
	}
	for _, want := range []string{`"workspace":"app@sha256:`, `"revision":"` + commit + `"`, `clone (host path hidden)`} {
		if !strings.Contains(string(got), want) {
			t.Errorf("the MCP record lacks %s: %s", want, got)
		}
	}
}

// TestRecord_BudgetAndUsage: the MCP view carries the dispatch's budget and usage.
func TestRecord_BudgetAndUsage(t *testing.T) {
	r := &dispatch.Record{ID: "d", State: lifecycle.DispatchFailed, Reason: lifecycle.ReasonBudgetExceeded,
		Budget: &budget.Budget{Tokens: 100, USD: 0.5},
		Usage:  &budget.Usage{InputTokens: 90, OutputTokens: 20, CachedTokens: 5, ModelCalls: 3, CostUSD: 0.01}}
	out := record(r)
	if out.Reason != "budget-exceeded" || out.Budget == nil || out.Budget.Tokens != 100 || out.Budget.USD != 0.5 {
		t.Errorf("budget %+v reason %s", out.Budget, out.Reason)
	}
	if out.Usage == nil || *out.Usage != (mcpserver.Usage{InputTokens: 90, OutputTokens: 20, CachedTokens: 5, ModelCalls: 3, CostUSD: 0.01}) {
		t.Errorf("usage %+v", out.Usage)
	}
	if record(&dispatch.Record{ID: "e"}).Usage != nil {
		t.Error("usage on a record without any")
	}
}

// TestRecord_AwaitingApproval: an orchestrator sees why a dispatch waits (the held call's
// tool and redacted preview), and only the pending calls.
func TestRecord_AwaitingApproval(t *testing.T) {
	r := &dispatch.Record{ID: "d", State: lifecycle.DispatchStarted, Phase: dispatch.PhaseAwaitingApproval,
		Approvals: []dispatch.Approval{
			{Seq: 1, CallID: "call_1", Tool: "write_file", ArgsDigest: "sha256:aa", Preview: `{"path":"a"}`, State: dispatch.ApprovalApproved, Actor: "alice"},
			{Seq: 2, CallID: "call_2", Tool: "write_file", Rule: "write_file", ArgsDigest: "sha256:bb", ArgsBytes: 12, Preview: `{"path":"b"}`, State: dispatch.ApprovalPending},
		}}
	out := record(r)
	if out.Phase != "awaiting_approval" || len(out.AwaitingApproval) != 1 || out.AwaitingApproval[0].CallID != "call_2" || out.AwaitingApproval[0].Preview != `{"path":"b"}` {
		t.Errorf("phase %q held %+v, want call_2 only", out.Phase, out.AwaitingApproval)
	}
	// The same fields as 'agora dispatch approval list': the rule and the size.
	if h := out.AwaitingApproval; len(h) == 1 && (h[0].Rule != "write_file" || h[0].ArgsBytes != 12) {
		t.Errorf("held call %+v, want its rule and the size of its arguments", h[0])
	}
	b, _ := json.Marshal(record(&dispatch.Record{ID: "e"}))
	if strings.Contains(string(b), "approval") || strings.Contains(string(b), "phase") {
		t.Errorf("a record holding no call mentions approvals: %s", b)
	}
}

// TestRecord_Verdict: the MCP view carries the gate and its verdict, with the repository's
// path masked in the tail and the detail.
func TestRecord_Verdict(t *testing.T) {
	repo := "/home/alice/src/secret-project"
	spec := &verdict.Spec{Command: []string{"go", "test", "./..."}, Timeout: verdict.DefaultTimeout}
	v := verdict.Red(verdict.ReasonExit, "exit status 1 in "+repo, 1, spec.Command, time.Second,
		verdict.TailText{Text: "--- FAIL " + repo + "/calc_test.go:7\n", Total: 64})
	r := &dispatch.Record{ID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", State: lifecycle.DispatchFailed, Reason: lifecycle.ReasonVerifyFailed,
		Repo: repo, Verify: spec, Verdict: &v}
	got := record(r)
	if got.Verify == nil || got.Verdict == nil || got.Verdict.Passed || got.Verdict.OutputSHA256 != v.OutputSHA256 {
		t.Fatalf("MCP record verify %+v verdict %+v", got.Verify, got.Verdict)
	}
	b, _ := json.Marshal(got)
	if strings.Contains(string(b), "/home/alice") {
		t.Errorf("the verdict names the repository's path: %s", b)
	}
	if !strings.Contains(got.Verdict.OutputTail, "--- FAIL (host path hidden):7") || !strings.Contains(string(b), `"verdict":{"passed":false,"reason":"exit-status"`) {
		t.Errorf("verdict over MCP: %s", b)
	}
}
