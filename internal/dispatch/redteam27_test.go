package dispatch_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/verdict"
)

// TestRedTeam27_VerifyOnUnsandboxedTargetRefused: a verify gate's command is the plan
// author's (a model over MCP included) and is judged against no grant, on the ground that it
// runs with nothing to misuse: no network, no secret, a throwaway tree. On a `sandbox: none`
// target none of that holds: the command would run on the host as agora's own user, with the
// host's network and every file agora can read. So a gate is refused there at accept, as on
// a Kubernetes target, and nothing of the command runs.
func TestRedTeam27_VerifyOnUnsandboxedTargetRefused(t *testing.T) {
	e := newEnv(t)
	nobox := e.home.Config.Targets["local"]
	nobox.Sandbox = compute.SandboxNone
	e.home.Config.Targets["nobox"] = nobox
	e.subagent("honest", `echo ok > ok.txt`)
	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("host-only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := []string{"sh", "-c", "cat " + secret}
	r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "honest", Target: "nobox", Timeout: 30 * time.Second, Actor: "test",
		Verify: &verdict.Spec{Command: cmd}})
	var re *dispatch.RequestError
	if err == nil {
		if !dispatch.IsTerminal(r.State) {
			if r, err = e.d.Supervise(t.Context(), r.ID, nil); err != nil {
				t.Fatal(err)
			}
		}
		t.Fatalf("a verify gate on a sandbox: none target was accepted (%s %s, verdict %+v): its command ran on the host", r.State, r.Reason, r.Verdict)
	}
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "none") || !strings.Contains(err.Error(), "nobox") {
		t.Fatalf("accept: %v; want a request error naming the target and its sandbox", err)
	}
	// The same gate on a sandboxed target runs, and cannot read the host's file.
	e.subagent("honest2", `echo ok > ok.txt`)
	got := e.run(dispatch.Request{Subagent: "honest2", Verify: &verdict.Spec{Command: cmd}})
	if got.Verdict == nil || got.Verdict.Passed || strings.Contains(got.Verdict.OutputTail, "host-only") {
		t.Fatalf("sandboxed gate: %s %s, verdict %+v; want red without the host file", got.State, got.Reason, got.Verdict)
	}
}
