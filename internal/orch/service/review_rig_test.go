package service_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
)

// A review is the reviewer's final answer (docs/adr/0001-a-review-is-the-reviewers-final-answer.md).
// The rig's reviewers are subagents of the openai runtime against one scripted model
// (openaitest), whose answers are computed from each request alone, so reviewers running at
// once never take each other's turn: the system prompt names the reviewer's style, the tool
// results so far say how far it got.

const reviewModelKey = "sk-review-test-not-a-real-key-0123456789"

// reviewerStyles are the reviewers' behaviours, by the style their system prompt names.
//
//	tests    reads the patch (cat), applies it in a scratch copy of the workspace and runs
//	         python3 -m unittest there; rejects a patch calling os.system, one whose code
//	         writes into $AGORA_OUT, and failing tests; else approves. Answers in a ```json
//	         fence.
//	approve  approves at once.
//	draft    reads the patch; approves it if it adds a line "draft" (ra of the quorum).
//	fixed    reads the patch; approves only fixed work, a line "fixed" (rc of the quorum).
//	prose    answers "LGTM, ship it." (no review object).
//	case     answers {"approve": true, "Approve": false}.
//	huge     answers an approval with a 70 000-byte reason (over the 64 KiB limit).
//	empty    answers nothing ("").
//	lying    writes an approving outputs/verdict.json and final.md, then answers a rejection.
//	probe    runs $PROBE (the plan input's "probe", through sh -c), then answers a rejection.
var reviewerStyles = []string{"tests", "approve", "draft", "fixed", "prose", "case", "huge", "empty", "lying", "probe"}

// runCmd is a run_command call of sh -c script.
func runCmd(script string) openaitest.Reply {
	args, _ := json.Marshal(map[string]any{"argv": []string{"sh", "-c", script}})
	return openaitest.Reply{ToolCalls: []openaitest.Call{{Name: "run_command", Arguments: string(args)}}}
}

// verdictJSON is a review as the reviewer writes it.
func verdictJSON(approve bool, reasons ...string) string {
	b, _ := json.Marshal(map[string]any{"approve": approve, "reasons": append([]string{}, reasons...)})
	return string(b)
}

// reviewerBrain answers one request of a reviewer of the rig.
func reviewerBrain(req openaitest.Request) openaitest.Reply {
	msgs := req.Body.Messages
	style := ""
	if len(msgs) > 0 {
		_, style, _ = strings.Cut(msgs[0].Text(), "style: ")
		style, _, _ = strings.Cut(style, ".")
	}
	var results []string
	for _, m := range msgs {
		if m.Role == "tool" {
			results = append(results, m.Text())
		}
	}
	say := func(s string) openaitest.Reply { return openaitest.Reply{Content: s} }
	const catPatch = `cat "$AGORA_INPUTS/patch/patch.diff"`
	switch style {
	case "tests":
		switch len(results) {
		case 0:
			return runCmd(catPatch)
		case 1:
			return runCmd(`rm -rf /tmp/rev && cp -a "$AGORA_WORKSPACE" /tmp/rev && cd /tmp/rev && git apply "$AGORA_INPUTS/patch/patch.diff" && python3 -m unittest 2>&1`)
		}
		patch, tests := results[0], results[1]
		var reasons []string
		if strings.Contains(patch, "os.system") {
			reasons = append(reasons, "the patch calls os.system")
		}
		if strings.Contains(patch, "AGORA_OUT") {
			reasons = append(reasons, "the patch's code writes into the reviewer's out directory")
		}
		if !strings.Contains(tests, "\nOK") {
			reasons = append(reasons, "the tests do not pass")
		}
		return say("```json\n" + verdictJSON(len(reasons) == 0, reasons...) + "\n```\n")
	case "approve":
		return say(`{"approve": true}`)
	case "draft", "fixed":
		if len(results) == 0 {
			return runCmd(catPatch)
		}
		if style == "draft" {
			return say(verdictJSON(strings.Contains(results[0], "\n+draft")))
		}
		if strings.Contains(results[0], "\n+fixed") {
			return say(verdictJSON(true))
		}
		return say(verdictJSON(false, "work.txt is only a draft"))
	case "prose":
		return say("LGTM, ship it.")
	case "case":
		return say(`{"approve": true, "Approve": false}`)
	case "huge":
		return say(verdictJSON(true, strings.Repeat("x", 70000)))
	case "empty":
		return say("")
	case "lying":
		if len(results) == 0 {
			return runCmd(`mkdir -p "$AGORA_OUT/outputs" && printf '{"approve": true}' > "$AGORA_OUT/outputs/verdict.json" && printf '{"approve": true}' > "$AGORA_OUT/outputs/final.md"`)
		}
		return say(verdictJSON(false, "rejected in the final answer"))
	case "probe":
		if len(results) == 0 {
			return runCmd(`printf '%s' "$AGORA_INPUT_JSON" | python3 -c 'import json,sys; print(json.load(sys.stdin)["input"]["probe"])' > /tmp/probe.sh && sh /tmp/probe.sh 2>&1`)
		}
		return say(verdictJSON(false, "probed"))
	}
	return openaitest.Reply{Status: 400, Message: "the rig knows no reviewer style " + fmt.Sprintf("%q", style)}
}

// reviewEnv is a served env whose gateways may reach the rig's model on loopback, with one
// openai reviewer subagent per style (named r-STYLE, holding read_file and run_command of
// sh -c) and the env bundle "model" pointing at the model. yaml is added to agora.yaml.
func reviewEnv(t *testing.T, yaml string) (*env, *openaitest.Server) {
	t.Helper()
	requireBwrap(t)
	srv := openaitest.New(t, openaitest.Repeat(openaitest.Func(reviewerBrain)))
	srv.RequireAPIKey(reviewModelKey)
	e := newEnvConfig(t, "egress:\n  allow_private: [127.0.0.1/32]\n"+yaml)
	e.vars = append(e.vars, "REVIEW_MODEL_KEY="+reviewModelKey)
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "caps", "review-tools"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "caps", "review-tools", "capability.yaml"),
		[]byte("description: reads and runs\ntools: [read_file, run_command]\ncommands: [\"sh -c *\"]\n"), 0o644))
	var m strings.Builder
	m.WriteString("version: 1\ncapabilities:\n  - {name: review-tools, from: caps/review-tools}\nsubagents:\n")
	for _, s := range reviewerStyles {
		fmt.Fprintf(&m, "  - name: r-%s\n    runtime: openai\n    model: test-model\n    system_prompt: \"You review work; style: %s.\"\n    capabilities: [review-tools]\n", s, s)
	}
	fmt.Fprintf(&m, "envs:\n  - name: model\n    values:\n      OPENAI_BASE_URL: %s\n    secrets:\n      OPENAI_API_KEY: {from_env: REVIEW_MODEL_KEY}\n", srv.URL())
	must(t, os.WriteFile(filepath.Join(dir, "agora-manifest.yaml"), []byte(m.String()), 0o644))
	e.run("apply", "-f", filepath.Join(dir, "agora-manifest.yaml"))
	serve := e.serve()
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	return e, srv
}

// submit submits plan (YAML) and waits for its run to end; it returns the CLI's output and
// whether it exited 0.
func (e *env) submit(plan string, args ...string) (string, bool) {
	e.t.Helper()
	p := filepath.Join(e.t.TempDir(), "plan.yaml")
	must(e.t, os.WriteFile(p, []byte(plan), 0o644))
	cmd := exec.Command(agoraBin, append([]string{"orch", "submit", p, "--wait"}, args...)...)
	cmd.Env = e.vars
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

// reviewedEntries are the run's orch.task.reviewed entries about task, from its signed audit
// bundle (which agora verify passes).
func (e *env) reviewedEntries(run, task string) []map[string]any {
	e.t.Helper()
	var out []map[string]any
	for _, f := range kinds(e.auditRun(run), "orch.task.reviewed") {
		if strings.HasSuffix(f.Subject, "/task/"+task) {
			out = append(out, f.Details)
		}
	}
	return out
}

// outputOf is the dispatch's output file name, read back through `agora dispatch outputs`
// ("" when it has none).
func (e *env) outputOf(dispatchID, name string) string {
	e.t.Helper()
	dir := filepath.Join(e.t.TempDir(), "out")
	e.run("dispatch", "outputs", dispatchID, "--to", dir)
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return ""
	}
	return string(b)
}

// wantRejectedBy checks that task's work was rejected by its reviewer rev, whose review is
// its own (not an invalid one) and holds reason, and that the signed audit says so.
func (e *env) wantRejectedBy(t *testing.T, run string, byID map[string]api.Task, task, rev, reason string) {
	t.Helper()
	w, r := byID[task], byID[task+".review-"+rev]
	if w.State != lifecycle.TaskFailed || w.Reason != "review-rejected" {
		t.Errorf("%s: %s %s (%s), want failed review-rejected", task, w.State, w.Reason, w.Detail)
	}
	if v := r.Review; v == nil || v.Approve || v.Invalid || !strings.Contains(strings.Join(v.Reasons, "; "), reason) {
		t.Errorf("%s's review %+v (%s %s: %s), want its own rejection with %q", r.ID, v, r.State, r.Reason, r.Detail, reason)
	}
	reviewed := e.reviewedEntries(run, task)
	if len(reviewed) != 1 || reviewed[0]["approved"] != false {
		t.Errorf("%s: orch.task.reviewed entries %v, want one with approved: false", task, reviewed)
	}
}
