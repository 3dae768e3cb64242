package orch

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// TestOrchValidate_GateWarnings: validate warns on stderr, never failing, about a gate
// without changes and a glob naming a directory of the base tree without /**: the tree of
// --repo, else of the repository the current directory is in; -o json carries the warnings.
func TestOrchValidate_GateWarnings(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: git not installed")
	}
	repo := t.TempDir()
	for _, p := range []string{"src/calc.py", "tests/test_calc.py", "README.md"} {
		if err := os.MkdirAll(filepath.Join(repo, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, p), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	planFile := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(planFile, []byte(`version: 1
name: p
tasks:
  - {id: a, subagent: s, verify: {command: [make, test], protect: [tests]}}
  - {id: b, subagent: s, verify: {command: [make, test], changes: ['src/**']}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	run := func(dir string, args ...string) (string, string, error) {
		t.Helper()
		t.Chdir(dir)
		var out, errb bytes.Buffer
		f := cmdutil.NewFactory(&cmdutil.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errb}, func(k string) string {
			if k == "AGORA_HOME" {
				return home
			}
			return ""
		})
		cmd := &cobra.Command{Use: "agora", SilenceErrors: true, SilenceUsage: true}
		cmd.AddCommand(NewCmd(f))
		cmd.SetArgs(args)
		cmd.SetOut(&out)
		cmd.SetErr(&errb)
		err := cmd.Execute()
		return out.String(), errb.String(), err
	}
	noChanges := "agora: warning: " + planFile + ": tasks[0].verify: no changes: the gate admits any path protect does not name"
	dirWarning := "agora: warning: " + planFile + `: tasks[0].verify.protect[0]: "tests" matches "tests", a directory of the base tree, as that path alone and none of the files under it: write "tests/**"`

	// Inside the repository (a subdirectory of it): its HEAD is the base tree.
	out, errOut, err := run(filepath.Join(repo, "src"), "orch", "validate", planFile)
	if err != nil {
		t.Fatalf("validate: %v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, noChanges) || !strings.Contains(errOut, dirWarning) || strings.Count(errOut, "agora: warning:") != 2 {
		t.Errorf("stderr:\n%s", errOut)
	}
	if !strings.Contains(out, "plan p is valid: 2 tasks") || !strings.Contains(out, "gate globs checked against "+repo+"@HEAD") || strings.Contains(out, "warning") {
		t.Errorf("stdout: %s", out)
	}

	// Outside any repository: only the gate without changes, and stdout says so.
	out, errOut, err = run(t.TempDir(), "orch", "validate", planFile)
	if err != nil || !strings.Contains(errOut, noChanges) || strings.Contains(errOut, "directory of the base tree") || !strings.Contains(out, "not checked against a tree") {
		t.Errorf("outside a repository: %v\nstdout %s\nstderr %s", err, out, errOut)
	}

	// --repo names the tree; -o json carries the warnings.
	out, _, err = run(t.TempDir(), "orch", "validate", planFile, "--repo", repo+"@main", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var res validateResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !res.Valid || res.BaseTree != repo+"@main" || len(res.Warnings) != 2 || res.Warnings[1].Path != "tasks[0].verify.protect[0]" {
		t.Errorf("json: %s", out)
	}
	// A --repo that cannot be read is an error.
	if _, _, err := run(t.TempDir(), "orch", "validate", planFile, "--repo", repo+"@nosuch"); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("--repo at a missing revision: %v", err)
	}
}
