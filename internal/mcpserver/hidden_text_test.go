package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/agenttext"
	"github.com/agora-dev/agora/internal/mcpserver"
	"github.com/agora-dev/agora/internal/verdict"
)

// hostile is what an agent writes to make an MCP client show something else than what is
// there: a right-to-left override (invoice<U+202E>fdp.exe reads invoiceexe.pdf), a
// left-to-right isolate, a zero-width space, a C1 control (CSI, U+009B) and an ANSI sequence
// (ESC [ 2 J clears a terminal).
const hostile = "invoice\u202efdp.exe \u2066iso\u2069 zero\u200bwidth c1\u009b31m \x1b[2Jcleared"

// escaped is hostile as agenttext.Escape writes it, which is what every field must show.
const escaped = `invoice\u202efdp.exe \u2066iso\u2069 zero\u200bwidth c1\u009b31m \x1b[2Jcleared`

// hostileOrchestrator answers a run and schedules whose every agent- or sandbox-written field
// holds hostile.
type hostileOrchestrator struct{ fakeOrchestrator }

func (o *hostileOrchestrator) Status(context.Context, string) (json.RawMessage, error) {
	h, _ := json.Marshal(hostile)
	return json.RawMessage(fmt.Sprintf(`{"id":"run-1","state":"running","tasks":[`+
		`{"id":"t1","state":"failed","subagent":"w","attempts":1,"detail":%[1]s,"reason":"failed"},`+
		`{"id":"t2","state":"needs_input","subagent":"w","attempts":1,"question":%[1]s,"options":[%[1]s]},`+
		`{"id":"t3","state":"failed","subagent":"w","attempts":1,"review":{"approve":false,"reasons":[%[1]s]},`+
		`"verdict":{"passed":false,"detail":%[1]s,"exit":1,"command":["make"],"output_tail":%[1]s,"output_sha256":"x","output_bytes":1}}]}`, h)), nil
}

func (o *hostileOrchestrator) Watch(ctx context.Context, id string, _ time.Duration) (json.RawMessage, error) {
	return o.Status(ctx, id)
}

func (o *hostileOrchestrator) Schedules(context.Context) (json.RawMessage, error) {
	h, _ := json.Marshal(hostile)
	return json.RawMessage(`{"schedules":[{"name":"nightly","spec":"0 2 * * *","last_error":` + string(h) + `}]}`), nil
}

func (o *hostileOrchestrator) Schedule(context.Context, string) (json.RawMessage, error) {
	h, _ := json.Marshal(hostile)
	return json.RawMessage(`{"name":"nightly","spec":"0 2 * * *","last_error":` + string(h) + `}`), nil
}

// TestHiddenText_EscapedOverMCP: a scrub that makes text one line and masks paths and
// tokens is not enough; it must not leave any bidirectional, invisible and
// control character that is not whitespace as it was, in error text and in an approval's and a
// question's text; the other fields an agent or its sandbox writes (logs' tails, final.md and
// the patch inline, outputs' names, a verdict's output, a reviewer's reasons, the hosts its
// proxy refused) were not scrubbed at all. A client of the official SDK reads every tool
// answer here, structured content and text, and a tool error: each field holds hostile and
// shows escaped, and no string anywhere in an answer holds a character agenttext hides.
func TestHiddenText_EscapedOverMCP(t *testing.T) {
	f := newFixture()
	rec := record(dispatchID, "needs_input")
	rec.Detail, rec.Reason = hostile, hostile
	rec.NeedsInput = &mcpserver.NeedsInput{Question: hostile, Options: []string{hostile, "plain"}}
	rec.Outputs = []mcpserver.Output{{Path: "final.md", Digest: "sha256:final", Size: int64(len(hostile))}, {Path: hostile, Digest: "sha256:out", Size: 1}}
	rec.Stdout = &mcpserver.Artifact{Digest: "sha256:stdout", Size: int64(len(hostile))}
	rec.Stderr = &mcpserver.Artifact{Digest: "sha256:stderr", Size: int64(len(hostile))}
	rec.Patch = &mcpserver.Artifact{Digest: "sha256:patch", Size: 1}
	rec.Truncated = []string{hostile}
	rec.AwaitingApproval = []mcpserver.HeldCall{{CallID: "c1", Tool: hostile, Rule: hostile, Preview: hostile, ExpiresAt: time.Unix(2e9, 0).UTC()}}
	rec.Net = &mcpserver.Net{Refused: map[string]int{hostile: 1}}
	rec.Verdict = &verdict.Verdict{Detail: hostile, OutputTail: hostile, ProtectedPaths: []string{hostile}, Command: []string{"make"}}
	patch := "--- a/" + hostile + "\n+++ b/" + hostile + "\n@@ -1 +1 @@\n-x\n+" + hostile + "\n"
	f.disp.content = map[string][]byte{"sha256:final": []byte(hostile), "sha256:stdout": []byte(hostile), "sha256:stderr": []byte(hostile), "sha256:patch": []byte(patch)}
	rec.Patch.Size = int64(len(patch))
	f.disp.get = func(context.Context, string) (*mcpserver.Record, error) { return rec, nil }
	f.disp.dispatch = func(context.Context, mcpserver.DispatchRequest) (*mcpserver.Record, error) {
		return nil, &mcpserver.RequestError{Msg: "unknown subagent " + hostile}
	}
	f.orch = &hostileOrchestrator{}
	cs := f.stdio(t, mcpserver.Principal{Client: "tester", Ceiling: mcpserver.CeilingDispatch}, mcpserver.Limits{})

	res := call(t, cs, "agora_dispatch_describe", map[string]any{"id": dispatchID})
	var d struct {
		Dispatch struct {
			Detail     string `json:"detail"`
			Reason     string `json:"reason"`
			NeedsInput struct {
				Question string   `json:"question"`
				Options  []string `json:"options"`
			} `json:"needs_input"`
			Outputs          []struct{ Path string }          `json:"outputs"`
			Truncated        []string                         `json:"truncated"`
			AwaitingApproval []map[string]any                 `json:"awaiting_approval"`
			Net              struct{ Refused map[string]int } `json:"net"`
			Verdict          struct {
				Detail         string   `json:"detail"`
				OutputTail     string   `json:"output_tail"`
				ProtectedPaths []string `json:"protected_paths"`
			} `json:"verdict"`
		} `json:"dispatch"`
		Results struct {
			Patch      struct{ Text string }        `json:"patch"`
			Final      struct{ Text string }        `json:"final"`
			Outputs    []struct{ Path, URI string } `json:"outputs"`
			StdoutTail string                       `json:"stdout_tail"`
			StderrTail string                       `json:"stderr_tail"`
		} `json:"results"`
	}
	decode(t, res, &d)
	noHidden(t, "describe (structured)", res.StructuredContent)
	noHidden(t, "describe (text)", text(res))
	dd, rr := d.Dispatch, d.Results
	for name, got := range map[string]string{
		"detail": dd.Detail, "reason": dd.Reason, "question": dd.NeedsInput.Question, "options[0]": dd.NeedsInput.Options[0],
		"outputs[1].path": dd.Outputs[1].Path, "truncated[0]": dd.Truncated[0],
		"awaiting_approval.tool": fmt.Sprint(dd.AwaitingApproval[0]["tool"]), "awaiting_approval.rule": fmt.Sprint(dd.AwaitingApproval[0]["rule"]),
		"awaiting_approval.preview": fmt.Sprint(dd.AwaitingApproval[0]["preview"]),
		"verdict.detail":            dd.Verdict.Detail, "verdict.output_tail": dd.Verdict.OutputTail, "verdict.protected_paths[0]": dd.Verdict.ProtectedPaths[0],
		"results.final.text": rr.Final.Text, "results.outputs[1].path": rr.Outputs[1].Path,
		"results.stdout_tail": rr.StdoutTail, "results.stderr_tail": rr.StderrTail,
	} {
		if !strings.Contains(got, escaped) {
			t.Errorf("describe: %s = %q, want it to show %q", name, got, escaped)
		}
	}
	if _, ok := dd.Net.Refused[escaped]; !ok || len(dd.Net.Refused) != 1 {
		t.Errorf("describe: net.refused = %v, want the host escaped", dd.Net.Refused)
	}
	if !strings.Contains(rr.Patch.Text, "+"+escaped+"\n") || !strings.HasPrefix(rr.Patch.Text, "--- a/"+escaped+"\n") {
		t.Errorf("describe: the patch inline = %q, want its lines escaped, newlines kept", rr.Patch.Text)
	}
	// The output's resource is still named by its name's bytes.
	if !strings.Contains(rr.Outputs[1].URI, "%E2%80%AEfdp.exe") {
		t.Errorf("describe: the output's URI %q no longer names the output", rr.Outputs[1].URI)
	}

	// A question's options over agora_dispatch's answer too (the same record, another path).
	f.disp.resume = func(context.Context, string, string, string) (*mcpserver.Record, error) { return rec, nil }
	res = call(t, cs, "agora_dispatch", map[string]any{"resume": map[string]any{"dispatch": dispatchID, "answer": "a"}, "wait_seconds": 0})
	noHidden(t, "dispatch resume", res.StructuredContent)
	if !strings.Contains(text(res), strings.ReplaceAll(escaped, `\`, `\\`)) {
		t.Errorf("dispatch resume: the answer does not show the escapes: %s", text(res))
	}

	for _, tool := range []string{"agora_orchestrator_status", "agora_orchestrator_watch"} {
		res = call(t, cs, tool, map[string]any{"run_id": "run-1"})
		var r struct {
			Run struct {
				Tasks []struct {
					Detail, Question string
					Options          []string
					Review           *struct{ Reasons []string }
					Verdict          *struct {
						Detail     string `json:"detail"`
						OutputTail string `json:"output_tail"`
					}
				}
			}
		}
		decode(t, res, &r)
		noHidden(t, tool+" (structured)", res.StructuredContent)
		noHidden(t, tool+" (text)", text(res))
		ts := r.Run.Tasks
		if len(ts) != 3 || ts[2].Review == nil || ts[2].Verdict == nil {
			t.Fatalf("%s: %+v", tool, r)
		}
		for name, got := range map[string]string{
			"detail": ts[0].Detail, "question": ts[1].Question, "options[0]": ts[1].Options[0],
			"review.reasons[0]": ts[2].Review.Reasons[0], "verdict.detail": ts[2].Verdict.Detail, "verdict.output_tail": ts[2].Verdict.OutputTail,
		} {
			if !strings.Contains(got, escaped) {
				t.Errorf("%s: %s = %q, want it to show %q", tool, name, got, escaped)
			}
		}
	}
	for _, c := range []struct {
		tool string
		args map[string]any
	}{{"agora_orchestrator_schedules_list", map[string]any{}}, {"agora_orchestrator_schedule_show", map[string]any{"name": "nightly"}}} {
		res = call(t, cs, c.tool, c.args)
		noHidden(t, c.tool, res.StructuredContent)
		if !strings.Contains(text(res), strings.ReplaceAll(escaped, `\`, `\\`)) {
			t.Errorf("%s: last_error does not show the escapes: %s", c.tool, text(res))
		}
	}

	// A tool error: a refusal's text names what the agent (or a caller) wrote.
	res = call(t, cs, "agora_dispatch", map[string]any{"subagent": "w"})
	if !res.IsError || !strings.Contains(text(res), escaped) {
		t.Errorf("a refusal's text = %q, want it to show %q", text(res), escaped)
	}
	noHidden(t, "a refusal", text(res))
}

// noHidden fails t when any string in v (a decoded JSON value or a text) holds a character
// agenttext hides other than newline and tab, or is not UTF-8.
func noHidden(t *testing.T, what string, v any) {
	t.Helper()
	switch v := v.(type) {
	case string:
		if !utf8.ValidString(v) {
			t.Errorf("%s: not UTF-8: %q", what, v)
		}
		for _, r := range v {
			if agenttext.Hidden(r) {
				t.Errorf("%s: holds %U: %q", what, r, v)
				return
			}
		}
	case map[string]any:
		for k, x := range v {
			noHidden(t, what, k)
			noHidden(t, what, x)
		}
	case []any:
		for _, x := range v {
			noHidden(t, what, x)
		}
	case nil, bool, float64, json.Number:
	default:
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var x any
		if err := json.Unmarshal(b, &x); err != nil {
			t.Fatal(err)
		}
		noHidden(t, what, x)
	}
}

var _ mcpserver.Orchestrator = (*hostileOrchestrator)(nil)
