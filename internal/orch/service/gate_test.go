package service_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// TestRunBundle_Verdicts: a plan with verify gates through the real binary and service: a
// green task succeeds, a red one fails verify-failed; orch status shows both verdicts; the
// run's bundle holds dispatch.verified and orch.task.verified and verifies; a bundle with
// either removed fails agora verify, even with its selection re-signed by the key holder.
func TestRunBundle_Verdicts(t *testing.T) {
	e := servedEnv(t)
	planPath := filepath.Join(t.TempDir(), "p.yaml")
	must(t, os.WriteFile(planPath, []byte(`version: 1
name: gated
defaults:
  verify: {command: [sh, -c, 'test -f task.json && echo green'], protect: ['**/*_test.go']}
tasks:
  - {id: good, subagent: worker, input: {n: 1}}
  - {id: bad, subagent: worker, input: {n: 2}, verify: {command: [sh, -c, 'echo broken >&2; exit 1'], timeout: 30s}}
`), 0o644))
	cmd := exec.Command(agoraBin, "orch", "submit", planPath, "--wait")
	cmd.Env = e.vars
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("a run with a red gate succeeded:\n%s", out)
	}
	var run api.Run
	must(t, json.Unmarshal([]byte(e.run("orch", "status", "gated", "-o", "json")), &run))
	byID := map[string]api.Task{}
	for _, task := range run.Tasks {
		byID[task.ID] = task
	}
	good, bad := byID["good"], byID["bad"]
	if good.State != lifecycle.TaskSucceeded || good.Verdict == nil || !good.Verdict.Passed || good.Verdict.OutputTail != "green\n" {
		t.Errorf("good: %s, verdict %+v", good.State, good.Verdict)
	}
	if bad.State != lifecycle.TaskFailed || bad.Reason != "verify-failed" || bad.Verdict == nil || bad.Verdict.Exit != 1 || bad.Verdict.OutputTail != "broken\n" {
		t.Errorf("bad: %s %s, verdict %+v", bad.State, bad.Reason, bad.Verdict)
	}
	if human := e.run("orch", "status", "gated"); !strings.Contains(human, "failed: exit-status") || !strings.Contains(human, "passed") {
		t.Errorf("orch status lacks the verdicts:\n%s", human)
	}

	out := filepath.Join(t.TempDir(), "run.json")
	e.run("orch", "audit", "gated", "--out", out)
	pub := filepath.Join(e.home, "keys", "audit.pub")
	code, stdout := verifyFile(t, out, pub)
	if code != 0 || !strings.Contains(stdout, "every one of the run's 2 verdicts is recorded in both logs") {
		t.Fatalf("untouched bundle: exit %d\n%s", code, stdout)
	}
	raw, err := os.ReadFile(out)
	must(t, err)
	skey, err := os.ReadFile(filepath.Join(e.home, "keys", "audit.key"))
	must(t, err)
	signer, err := note.NewSigner(strings.TrimSpace(string(skey)))
	must(t, err)

	for _, tt := range []struct {
		name string
		kind string
		part func(*verify.RunBundle) *verify.Bundle
		want string // a failed row
	}{
		{"dispatch.verified removed", "dispatch.verified", func(b *verify.RunBundle) *verify.Bundle { return b.Dispatches }, "run dispatches"},
		{"orch.task.verified removed", "orch.task.verified", func(b *verify.RunBundle) *verify.Bundle { return b.Orch }, "verdicts"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := verify.ParseRunBundle(bytes.NewReader(raw))
			must(t, err)
			part := tt.part(b)
			var kept []verify.Entry
			removed := 0
			for _, x := range part.Entries {
				f, err := verify.DecodeEntry(x.Entry)
				must(t, err)
				if f.Kind == tt.kind && removed == 0 {
					removed++
					continue
				}
				kept = append(kept, x)
			}
			if removed == 0 {
				t.Fatalf("the bundle holds no %s entry", tt.kind)
			}
			part.Entries, part.Selection.Count = kept, len(kept)
			must(t, verify.SignSelection(part, signer))
			path := filepath.Join(t.TempDir(), "tampered.json")
			var buf bytes.Buffer
			must(t, verify.WriteRunBundle(&buf, b))
			must(t, os.WriteFile(path, buf.Bytes(), 0o600))
			code, stdout := verifyFile(t, path, pub)
			if code != 5 {
				t.Errorf("agora verify exit %d, want 5\n%s", code, stdout)
			}
			failed := false
			for _, line := range strings.Split(stdout, "\n") {
				if f := strings.Split(line, "\t"); len(f) == 3 && f[1] == "FAIL" && strings.HasPrefix(f[0], tt.want) {
					failed = true
				}
			}
			if !failed {
				t.Errorf("no %q row failed:\n%s", tt.want, stdout)
			}
		})
	}
}

// TestRunBundle_GateChangesExpect: a plan's changes and expect through the real binary and
// service: the worker's task.json outside changes is red outside-changes naming it, before
// the command runs; a gate admitting it whose command writes no report is red no-evidence;
// one that writes its report is green with the counts; orch status shows them, and the run's
// bundle, whose verdicts carry outside_paths and evidence, verifies.
func TestRunBundle_GateChangesExpect(t *testing.T) {
	e := servedEnv(t)
	planPath := filepath.Join(t.TempDir(), "p.yaml")
	must(t, os.WriteFile(planPath, []byte(`version: 1
name: allowed
defaults:
  verify: {command: [sh, -c, 'echo ran'], changes: ['src/**']}
tasks:
  - {id: outside, subagent: worker, input: {n: 1}}
  - id: silent
    subagent: worker
    input: {n: 2}
    verify: {command: [sh, -c, 'echo ran'], changes: [task.json], expect: {junit: junit.xml}}
  - id: evidenced
    subagent: worker
    input: {n: 3}
    verify:
      command: [sh, -c, 'printf "<testsuite><testcase/><testcase/></testsuite>" > /agora/report/junit.xml']
      changes: [task.json]
      expect: {junit: junit.xml, min_tests: 2}
`), 0o644))
	validate := exec.Command(agoraBin, "orch", "validate", planPath)
	validate.Env, validate.Dir = e.vars, t.TempDir()
	var verr bytes.Buffer
	validate.Stderr = &verr
	if err := validate.Run(); err != nil || verr.Len() != 0 {
		t.Errorf("orch validate of a plan whose gates all name changes: %v\n%s", err, verr.String())
	}
	cmd := exec.Command(agoraBin, "orch", "submit", planPath, "--wait")
	cmd.Env = e.vars
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("a run with red gates succeeded:\n%s", out)
	}
	var run api.Run
	must(t, json.Unmarshal([]byte(e.run("orch", "status", "allowed", "-o", "json")), &run))
	byID := map[string]api.Task{}
	for _, task := range run.Tasks {
		byID[task.ID] = task
	}
	if v := byID["outside"].Verdict; byID["outside"].Reason != "verify-failed" || v == nil || v.Reason != "outside-changes" ||
		strings.Join(v.OutsidePaths, ",") != "task.json" || v.OutputBytes != 0 {
		t.Errorf("outside: %s, verdict %+v", byID["outside"].State, v)
	}
	if v := byID["silent"].Verdict; v == nil || v.Reason != "no-evidence" || !strings.Contains(v.Detail, "wrote no /agora/report/junit.xml") {
		t.Errorf("silent: %s, verdict %+v", byID["silent"].State, v)
	}
	if v := byID["evidenced"].Verdict; byID["evidenced"].State != lifecycle.TaskSucceeded || v == nil || !v.Passed || v.Evidence == nil || v.Evidence.Tests != 2 {
		t.Errorf("evidenced: %s, verdict %+v", byID["evidenced"].State, v)
	}
	if human := e.run("orch", "status", "allowed"); !strings.Contains(human, "outside-changes") || !strings.Contains(human, "no-evidence") {
		t.Errorf("orch status lacks the verdicts:\n%s", human)
	}
	out := filepath.Join(t.TempDir(), "run.json")
	e.run("orch", "audit", "allowed", "--out", out)
	code, stdout := verifyFile(t, out, filepath.Join(e.home, "keys", "audit.pub"))
	if code != 0 || !strings.Contains(stdout, "every one of the run's 3 verdicts is recorded in both logs") {
		t.Fatalf("bundle: exit %d\n%s", code, stdout)
	}
}
