package mcpserver_test

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// cliError runs agora with args in home and returns the first line of its error, without the
// "agora: error: " prefix, and its exit code.
func cliError(t *testing.T, home string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(agoraBin, args...)
	cmd.Env = baseEnv(home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	var ee *exec.ExitError
	if err := cmd.Run(); !errors.As(err, &ee) {
		t.Fatalf("agora %s: %v, want it to fail\n%s", strings.Join(args, " "), err, stderr.String())
	}
	first, _, _ := strings.Cut(stderr.String(), "\n")
	return strings.TrimPrefix(first, "agora: error: "), ee.ExitCode()
}

// TestNotFound_OneWording: a name that names nothing reads the same over MCP as
// on the CLI, `KIND "ID" not found` (the CLI exits 6 with it): an unknown dispatch id to
// describe, an unknown subagent to dispatch, an unknown run and schedule to read.
func TestNotFound_OneWording(t *testing.T) {
	home := newHome(t)
	cs := stdioSession(t, home)

	cliMsg, code := cliError(t, home, "dispatch", "describe", "01ARZ3NDEKTSV4RRFFQ69G5FAV")
	res := call(t, cs, "agora_dispatch_describe", map[string]any{"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"})
	if want := `dispatch "01ARZ3NDEKTSV4RRFFQ69G5FAV" not found`; cliMsg != want || code != 6 || !res.IsError || text(res) != want {
		t.Errorf("unknown dispatch: CLI %q (exit %d), MCP %q (error %v); want both %q, exit 6", cliMsg, code, text(res), res.IsError, want)
	}

	cliMsg, code = cliError(t, home, "dispatch", "run", "--subagent", "nope")
	res = call(t, cs, "agora_dispatch", map[string]any{"subagent": "nope"})
	if !strings.HasPrefix(cliMsg, `subagent "nope" not found; known: `) || code != 6 || !res.IsError || !strings.HasSuffix(text(res), ": "+cliMsg) {
		t.Errorf("unknown subagent: CLI %q (exit %d), MCP %q (error %v); want the same sentence, exit 6", cliMsg, code, text(res), res.IsError)
	}

	serveOrch(t, home)
	for _, tt := range []struct {
		cli  []string
		tool string
		args map[string]any
		want string
	}{
		{[]string{"orch", "status", "nope"}, "agora_orchestrator_status", map[string]any{"run_id": "nope"}, `run "nope" not found`},
		{[]string{"orch", "schedule", "show", "nope"}, "agora_orchestrator_schedule_show", map[string]any{"name": "nope"}, `schedule "nope" not found`},
	} {
		cliMsg, code := cliError(t, home, tt.cli...)
		res := call(t, cs, tt.tool, tt.args)
		if cliMsg != tt.want || code != 6 || !res.IsError || text(res) != tt.want {
			t.Errorf("%s: CLI %q (exit %d), MCP %q (error %v); want both %q, exit 6", tt.tool, cliMsg, code, text(res), res.IsError, tt.want)
		}
	}
}
