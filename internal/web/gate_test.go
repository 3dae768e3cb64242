package web

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/verdict"
)

// TestServer_VerdictShown: the run page's task table, the task page and the dispatch page
// show a verify gate and its verdict (the tail escaped, its hash, the protected paths).
func TestServer_VerdictShown(t *testing.T) {
	spec := &verdict.Spec{Command: []string{"go", "test", "./..."}, Timeout: verdict.DefaultTimeout, Protect: []string{"**/*_test.go"}}
	red := verdict.Red(verdict.ReasonExit, "exit status 1", 1, spec.Command, 2*time.Second,
		// Total is what the command wrote: at least the tail (the run page reads verdicts
		// through verdict.Parse, which refuses a tail longer than the output).
		verdict.TailText{Text: "--- FAIL: TestAdd <script>alert(1)</script>\nFAIL\n", Total: 49})
	prot := verdict.Protected(spec.Command, []string{"calc_test.go"})
	allow := &verdict.Spec{Command: []string{"make", "test"}, Timeout: verdict.DefaultTimeout, Changes: []string{"src/**"}, Expect: &verdict.Expect{JUnit: "junit.xml", MinTests: 2}}
	outside := verdict.OutsideChanges(allow.Command, allow.Changes, []verdict.Offence{{Path: "GNUmakefile", Why: "outside changes"}})
	green := verdict.Green(allow.Command, time.Second, verdict.TailText{})
	green.Evidence = &verdict.Evidence{Report: "junit.xml", Tests: 3, Skipped: 1}
	o := newFakeOrch(
		api.Task{ID: "a", State: lifecycle.TaskFailed, Subagent: "coder", DispatchID: "d1", Dispatches: []string{"d1"}, Reason: "verify-failed", Verify: spec, Verdict: &red},
		api.Task{ID: "b", State: lifecycle.TaskPending, Subagent: "coder", Verify: spec},
		api.Task{ID: "c", State: lifecycle.TaskPending, Subagent: "coder"})
	now := time.Now()
	recs := map[string]*dispatch.Record{
		"d1": {ID: "d1", State: lifecycle.DispatchFailed, Reason: lifecycle.ReasonVerifyFailed, Subagent: "coder", CreatedAt: now, EndedAt: &now, Verify: spec, Verdict: &red},
		"d2": {ID: "d2", State: lifecycle.DispatchFailed, Reason: lifecycle.ReasonVerifyFailed, Subagent: "alone", CreatedAt: now, EndedAt: &now, Verify: spec, Verdict: &prot},
		"d3": {ID: "d3", State: lifecycle.DispatchFailed, Reason: lifecycle.ReasonVerifyFailed, Subagent: "alone", CreatedAt: now, EndedAt: &now, Verify: allow, Verdict: &outside},
		"d4": {ID: "d4", State: lifecycle.DispatchFinished, Subagent: "alone", CreatedAt: now, EndedAt: &now, Verify: allow, Verdict: &green},
	}
	e := startWith(t, Sources{Orch: o, Dispatches: fakeDispatches{recs}})
	c, _ := login(t, e, readToken)
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/runs/run1", []string{`<span class="state st-failed">exit-status</span>`, "<th>Verify</th>", `<td class="gate-cell">pending</td>`, `<td class="gate-cell">-</td>`}},
		{"/runs/run1/tasks/a", []string{`id="t-gate"`, `id="verdict-tail"`, "failed: exit-status (exit 1, 2s)", "&lt;script&gt;", red.OutputSHA256}},
		{"/dispatches/d2", []string{`id="protected"`, "<code>calc_test.go</code>", "protected-path"}},
		{"/dispatches/d3", []string{`id="outside"`, "<code>GNUmakefile</code>", "outside-changes", "changes <code>src/**</code>", "expect <code>junit.xml</code> with at least 2 test(s)"}},
		{"/dispatches/d4", []string{`id="evidence"`, "3 tests, 0 failures, 0 errors, 1 skipped"}},
	} {
		resp, err := c.Get(e.base + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, w := range tc.want {
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), w) {
				t.Errorf("GET %s: status %d, body lacks %q", tc.path, resp.StatusCode, w)
			}
		}
		if strings.Contains(string(b), "<script>alert") {
			t.Errorf("GET %s: the tail is not escaped", tc.path)
		}
	}
}
