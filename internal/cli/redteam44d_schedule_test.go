package cli_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// TestRedTeam44D_PlanFileRefusalsExitInvalid drives the real binary: `orch schedule add` and
// `orch submit` given a plan path that is a FIFO (no writer ever comes), a link to one, a
// device, or a dangling link refuse it as invalid input (exit 7) before reaching serve, and
// a cron spec naming its zone with TZ= exits 7 too. Failed before: the FIFO was opened
// blocking, so the command hung for good, and SIGTERM did not end it.
func TestRedTeam44D_PlanFileRefusalsExitInvalid(t *testing.T) {
	bin := builtAgora(t)
	dir := t.TempDir()
	env := []string{"PATH=/usr/bin:/bin", "AGORA_HOME=" + filepath.Join(dir, "agora"), "HOME=" + dir, "USER=tester"}
	fifo := filepath.Join(dir, "plan.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("SKIP: mkfifo: %v", err)
	}
	link, dangling := filepath.Join(dir, "link.yaml"), filepath.Join(dir, "dangling.yaml")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "gone.yaml"), dangling); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.yaml")
	writeFiles(t, map[string]string{good: "version: 1\nname: good\ntasks:\n  - {id: a, subagent: s}\n"})
	agora := func(t *testing.T, args ...string) (int, string) {
		t.Helper()
		// A deadline only so a hang fails the test instead of stalling it.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = env
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		err := cmd.Run()
		if ctx.Err() != nil {
			t.Fatalf("agora %v still ran after 60 s (killed)", args)
		}
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), errOut.String()
		}
		if err != nil {
			t.Fatalf("agora %v: %v", args, err)
		}
		return 0, errOut.String()
	}
	if code, out := agora(t, "init"); code != 0 {
		t.Fatalf("init: %d %s", code, out)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"schedule a FIFO", []string{"orch", "schedule", "add", "x", "--cron", "@daily", fifo}, "not a regular file"},
		{"schedule a link to a FIFO", []string{"orch", "schedule", "add", "x", "--cron", "@daily", link}, "not a regular file"},
		{"schedule a device", []string{"orch", "schedule", "add", "x", "--cron", "@daily", os.DevNull}, "not a regular file"},
		{"schedule a dangling link", []string{"orch", "schedule", "add", "x", "--cron", "@daily", dangling}, "read plan: "},
		{"schedule TZ= in the spec", []string{"orch", "schedule", "add", "x", "--cron", "TZ=UTC @daily", good}, "--tz"},
		{"submit a FIFO", []string{"orch", "submit", fifo}, "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := agora(t, tc.args...)
			first, _, _ := strings.Cut(out, "\n")
			if code != cmdutil.ExitInvalid || !strings.Contains(first, tc.want) {
				t.Errorf("exit %d, want %d with %q:\n%s", code, cmdutil.ExitInvalid, tc.want, out)
			}
		})
	}
}
