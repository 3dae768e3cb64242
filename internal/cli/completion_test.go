package cli_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// completions runs cobra's hidden __complete as a shell does and returns the candidates
// (the last line, ":N", is the directive).
func completions(t *testing.T, env map[string]string, args ...string) []string {
	t.Helper()
	r := runAgora(t, env, append([]string{"__complete"}, args...)...)
	if r.code != cmdutil.ExitOK {
		t.Fatalf("__complete %v: exit %d\n%s", args, r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], ":") {
		t.Fatalf("__complete %v: no directive line in %q", args, r.stdout)
	}
	return lines[:len(lines)-1]
}

// TestCompletion_FromHome: names, targets and dispatch ids complete from AGORA_HOME through
// cobra's __complete, filtered by what was typed; without a home nothing completes and no
// home is created.
func TestCompletion_FromHome(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"AGORA_HOME": filepath.Join(dir, "agora"), "HOME": dir, "USER": "tester"}
	if got := completions(t, env, "subagent", "show", ""); len(got) != 0 {
		t.Errorf("without a home: %v, want nothing", got)
	}
	if _, err := os.Stat(env["AGORA_HOME"]); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("completing created AGORA_HOME (%v)", err)
	}
	capDir := filepath.Join(dir, "caps", "tools")
	writeFiles(t, map[string]string{filepath.Join(capDir, "capability.yaml"): "commands: [\"sh -c *\"]\n"})
	repo := initRepo(t, filepath.Join(dir, "repo"))
	if r := runAgora(t, env, "init"); r.code != cmdutil.ExitOK {
		t.Fatalf("init: %s", r.stderr)
	}
	if err := os.WriteFile(filepath.Join(env["AGORA_HOME"], "agora.yaml"), []byte("targets:\n  gpu: {timeout: 1h}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"capability", "register", "tools", "--from", capDir},
		{"subagent", "register", "lint", "--runtime", "exec", "--command", "sh -c 'make lint'", "--capability", "tools"},
		{"subagent", "register", "linker", "--runtime", "exec", "--command", "sh -c 'make lint'", "--capability", "tools"},
		{"subagent", "register", "denied", "--runtime", "exec", "--command", "sh -c 'echo hi'"},
		{"env", "register", "ci", "--value", "LOG_LEVEL=debug"},
		{"workspace", "register", "app", "--repo", repo, "--revision", "main"},
	} {
		if r := runAgora(t, env, args...); r.code != cmdutil.ExitOK {
			t.Fatalf("agora %v: exit %d\n%s", args, r.code, r.stderr)
		}
	}
	r := runAgora(t, env, "dispatch", "run", "--subagent", "denied")
	id := strings.TrimSpace(r.stdout)
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"SubagentArg", []string{"subagent", "show", "lin"}, []string{"linker", "lint"}},
		{"SubagentArgOnlyFirst", []string{"subagent", "show", "lint", ""}, nil},
		{"CapabilityArg", []string{"capability", "history", ""}, []string{"tools"}},
		{"SubagentFlag", []string{"dispatch", "run", "--subagent", "d"}, []string{"denied"}},
		{"EnvFlag", []string{"dispatch", "run", "--env", ""}, []string{"ci"}},
		{"WorkspaceFlag", []string{"orch", "submit", "plan.yaml", "--workspace", ""}, []string{"app"}},
		{"TargetFlag", []string{"dispatch", "run", "--target", ""}, []string{"gpu", "local"}},
		{"DispatchID", []string{"dispatch", "describe", id[:4]}, []string{id}},
		{"RunsWithoutServe", []string{"orch", "status", ""}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := completions(t, env, tt.args...); !slices.Equal(got, tt.want) {
				t.Errorf("__complete %v = %q, want %q", tt.args, got, tt.want)
			}
		})
	}
}
