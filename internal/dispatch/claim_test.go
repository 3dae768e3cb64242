package dispatch_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute/host"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// TestSupervise_ClaimBySupervisor: Supervise runs an accepted dispatch only when it may
// claim it. A dispatch accepted by this very process is not claimed again (one
// write transaction fewer); one recorded as another live process's is still refused, and
// one whose recorded supervisor is gone is still taken over.
func TestSupervise_ClaimBySupervisor(t *testing.T) {
	e := newEnv(t)
	noopSubagent(t, e)
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	type claimCase struct {
		name, supervisor string
		wantState        string
	}
	cases := []claimCase{
		{"this process", dispatch.SelfSupervisor(), lifecycle.DispatchFinished},
		// Start time 0 matches any: the process runs, so it holds the dispatch.
		{"another live process", fmt.Sprintf("%d:0", other.Process.Pid), lifecycle.DispatchAccepted},
		{"a process that is gone", "2147483646:1", lifecycle.DispatchFinished},
	}
	// This very process's pid and start time in a record of an earlier boot: after a reboot
	// the name can match a new process (this one), which must not take it for its own or
	// for another live holder's; it is gone, so the dispatch is taken over.
	if boot, err := host.BootID(); err == nil {
		pidStart, _ := strings.CutSuffix(dispatch.SelfSupervisor(), ":"+boot)
		cases = append(cases, claimCase{"this process's pid and start in an earlier boot", pidStart + ":0123456789abcdef0123456789abcdef", lifecycle.DispatchFinished})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			r, err := e.d.Accept(ctx, dispatch.Request{Subagent: "noop", Actor: "test"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.home.DB.SQL().ExecContext(ctx, `UPDATE dispatches SET supervisor = ? WHERE id = ?`, c.supervisor, r.ID); err != nil {
				t.Fatal(err)
			}
			got, err := e.d.Supervise(ctx, r.ID, nil)
			if err != nil {
				t.Fatalf("Supervise: %v", err)
			}
			if got.State != c.wantState {
				t.Fatalf("state %s (%s: %s), want %s", got.State, got.Reason, got.Detail, c.wantState)
			}
			if c.wantState == lifecycle.DispatchAccepted && got.ProviderTaskID != "" {
				t.Errorf("a dispatch another process holds was started here (task %q)", got.ProviderTaskID)
			}
		})
	}
}

// TestSupervise_ClaimClearsAHalfMadeStage: a supervisor that died while it staged an
// accepted dispatch (a leader's pod killed, and started again on the same volume) left a
// half-made stage; the supervisor that claims the dispatch next clears it and stages anew,
// where it failed with "stage capability files: mkdir ...: file exists" and a task run once
// was lost.
func TestSupervise_ClaimClearsAHalfMadeStage(t *testing.T) {
	e := newEnv(t)
	noopSubagent(t, e)
	ctx := t.Context()
	r, err := e.d.Accept(ctx, dispatch.Request{Subagent: "noop", Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.home.DB.SQL().ExecContext(ctx, `UPDATE dispatches SET supervisor = ? WHERE id = ?`, "2147483646:1", r.ID); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.d.StateDir, r.ID)
	for _, sub := range []string{wire.BundleDir, wire.WorkspaceDir, wire.CapabilityFilesDir} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, wire.WorkspaceDir, "left.txt"), []byte("the dead supervisor's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := e.d.Supervise(ctx, r.ID, nil)
	if err != nil {
		t.Fatalf("Supervise: %v", err)
	}
	if got.State != lifecycle.DispatchFinished {
		t.Fatalf("state %s (%s: %s), want finished", got.State, got.Reason, got.Detail)
	}
	if got.Result != nil && got.Result.Patch != nil && strings.Contains(e.blob(got.Result.Patch), "left.txt") {
		t.Errorf("the dead supervisor's file reached the patch")
	}
}
