package service_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestDispatchRun_VerifyGoTest is the CLI's gate end to end with the real binary, real
// bubblewrap and the real Go toolchain: `agora dispatch run --verify 'go test ./...'` on a
// tiny module whose agent breaks the code exits 3, failed/verify-failed, the failing test in
// the verdict's tail, the verdict audited (agora audit log) and in describe -o json.
func TestDispatchRun_VerifyGoTest(t *testing.T) {
	const toolchain = "/usr/local/go/bin"
	if _, err := os.Stat(toolchain + "/go"); err != nil {
		t.Skipf("SKIP: no Go toolchain at %s to run `go test` in the verify sandbox", toolchain)
	}
	requireBwrap(t)
	e := newEnv(t)
	f, err := os.OpenFile(filepath.Join(e.home, "agora.yaml"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	must(t, err)
	_, err = f.WriteString("targets:\n  local:\n    verify_path: [" + toolchain + "]\n    verify_cache: " + agoratest.VerifyGoCache(t, toolchain) + "\n")
	must(t, err)
	must(t, f.Close())
	cat := filepath.Join(t.TempDir(), "cat")
	must(t, os.MkdirAll(filepath.Join(cat, "caps", "shell"), 0o755))
	must(t, os.WriteFile(filepath.Join(cat, "caps", "shell", "capability.yaml"), []byte("description: a shell\ncommands: [\"sh -c *\"]\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(cat, "breaker.yaml"), []byte(`description: breaks Add
runtime: exec
command: [sh, -c, "sed -i 's/a + b/a - b/' calc.go"]
capabilities: [shell]
`), 0o644))
	must(t, os.WriteFile(filepath.Join(cat, "agora-manifest.yaml"), []byte(`version: 1
capabilities:
  - {name: shell, from: caps/shell}
subagents:
  - {name: breaker, from: breaker.yaml}
`), 0o644))
	e.run("apply", "-f", filepath.Join(cat, "agora-manifest.yaml"))
	repo := t.TempDir()
	for name, body := range map[string]string{
		"go.mod":       "module example.com/calc\n\ngo 1.22\n",
		"calc.go":      "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
		"calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal(\"Add(2, 3) != 5\")\n\t}\n}\n",
	} {
		must(t, os.WriteFile(filepath.Join(repo, name), []byte(body), 0o644))
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}

	cmd := exec.Command(agoraBin, "dispatch", "run", "--subagent", "breaker", "--repo", repo,
		"--verify", "go test ./...", "--protect", "**/*_test.go", "--timeout", "5m", "-o", "json")
	cmd.Env = e.vars
	out, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("dispatch run: %v, want exit 3\n%s", err, out)
	}
	var r dispatch.Record
	must(t, json.Unmarshal(out, &r))
	v := r.Verdict
	if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonVerifyFailed || v == nil || v.Passed || v.Exit == 0 {
		t.Fatalf("dispatch %s %s (%s), verdict %+v", r.State, r.Reason, r.Detail, v)
	}
	if !strings.Contains(v.OutputTail, "Add(2, 3) != 5") || r.Result == nil || r.Result.Patch == nil {
		t.Errorf("verdict tail %q, patch %+v: want the failing test and the patch kept", v.OutputTail, r.Result)
	}
	human := e.run("dispatch", "describe", r.ID)
	if !strings.Contains(human, "verdict failed: exit-status") || !strings.Contains(human, "| --- FAIL: TestAdd") {
		t.Errorf("describe lacks the verdict:\n%s", human)
	}
	log := e.run("audit", "log", "-o", "json")
	if !strings.Contains(log, `"dispatch.verified"`) || !strings.Contains(log, v.Digest()) {
		t.Errorf("the audit log lacks dispatch.verified with the verdict's digest")
	}
}
