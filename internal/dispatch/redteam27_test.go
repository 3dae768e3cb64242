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

// TestRedTeam27_VerifyTimeoutWithinTargetLimit: a target's timeout is the longest anything of
// a dispatch may run on it. A verify gate's command runs in a sandbox of that target, so its
// timeout is held to the same limit: a longer one is refused at accept, as a longer dispatch
// timeout is, and the default (10m) is cut to a shorter limit.
func TestRedTeam27_VerifyTimeoutWithinTargetLimit(t *testing.T) {
	e := newEnv(t)
	short := e.home.Config.Targets["local"]
	short.Timeout = 2 * time.Minute
	e.home.Config.Targets["short"] = short
	e.subagent("honest", `echo ok > ok.txt`)
	req := dispatch.Request{Subagent: "honest", Target: "short", Timeout: time.Minute, Actor: "test",
		Verify: &verdict.Spec{Command: []string{"sleep", "86000"}, Timeout: 24 * time.Hour}}
	r, err := e.d.Accept(t.Context(), req)
	var re *dispatch.RequestError
	if err == nil {
		t.Fatalf("a 24h verify gate on a target of at most 2m was accepted (its record holds %s)", r.Verify.Timeout)
	}
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "short") || !strings.Contains(err.Error(), "2m0s") {
		t.Fatalf("accept: %v; want a request error naming the target and its limit", err)
	}
	req.Verify = &verdict.Spec{Command: []string{"true"}}
	r, err = e.d.Accept(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verify == nil || r.Verify.Timeout != 2*time.Minute {
		t.Fatalf("default verify timeout on a 2m target: %+v, want 2m0s", r.Verify)
	}
}
