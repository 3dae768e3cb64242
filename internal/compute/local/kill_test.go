package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
)

// sleepMarker returns a sleep duration unique to this test run, so the test can find
// its own processes on the host by command line.
func sleepMarker(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("1000.%d%d", os.Getpid(), time.Now().UnixNano()%1e6)
}

func TestProvider_Start_TimeoutKillsTree(t *testing.T) {
	requireBwrap(t)
	p := newProvider(t, Options{})
	for _, sandbox := range []string{compute.SandboxBwrap, compute.SandboxNone} {
		t.Run(sandbox, func(t *testing.T) {
			marker := sleepMarker(t)
			// The second sleep escapes into its own session: only the cgroup or the
			// pid namespace can still reach it.
			script := fmt.Sprintf("sleep %s & setsid sleep %s & sleep %s & wait", marker, marker, marker)
			var out syncBuffer
			h, err := p.Start(t.Context(), compute.Spec{
				ID: "timeout", Sandbox: sandbox, Argv: []string{"sh", "-c", script},
				Env: []string{"PATH=/usr/bin:/bin"}, Stdout: &out, Stderr: &out,
				Limits: compute.Limits{Timeout: 500 * time.Millisecond},
			})
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			agoratest.WaitFor(t, 5*time.Second, "the sleeps to start", func() bool { return len(procsWith(marker)) >= 3 })
			exit, err := h.Wait()
			if err != nil {
				t.Fatalf("Wait: %v", err)
			}
			if !exit.TimedOut || exit.Cancelled || exit.Code != -1 || exit.Signal != "killed" {
				t.Errorf("exit = %+v, want timed out and killed", exit)
			}
			if exit.Duration < 500*time.Millisecond || exit.Duration > 5*time.Second {
				t.Errorf("duration = %v, want about the 500ms timeout", exit.Duration)
			}
			if left := procsWith(marker); len(left) > 0 {
				if sandbox == compute.SandboxNone && p.cgroupParent == "" {
					t.Skip("SKIP: no cgroup v2 here, so sandbox none cannot reach a setsid grandchild")
				}
				t.Errorf("processes left after the timeout: %v", left)
			}
		})
	}
}

func TestProvider_Start_ContextCancel(t *testing.T) {
	requireBwrap(t)
	p := newProvider(t, Options{})
	marker := sleepMarker(t)
	ctx, cancel := context.WithCancel(t.Context())
	h, err := p.Start(ctx, compute.Spec{ID: "ctx", Argv: []string{"sleep", marker}, Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	agoratest.WaitFor(t, 5*time.Second, "the sleep to start", func() bool { return len(procsWith(marker)) > 0 })
	cancel()
	exit, err := h.Wait()
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if !exit.Cancelled || exit.TimedOut || exit.Signal != "killed" {
		t.Errorf("exit = %+v, want cancelled and killed", exit)
	}
	if left := procsWith(marker); len(left) > 0 {
		t.Errorf("processes left after cancel: %v", left)
	}
}

func TestProvider_Cancel(t *testing.T) {
	requireBwrap(t)
	p := newProvider(t, Options{})
	for _, sandbox := range []string{compute.SandboxBwrap, compute.SandboxNone} {
		t.Run(sandbox+"/FromAnotherProvider", func(t *testing.T) {
			marker := sleepMarker(t)
			h, err := p.Start(t.Context(), compute.Spec{
				ID: "cancel", Sandbox: sandbox, Argv: []string{"sh", "-c", "sleep " + marker + " & sleep " + marker},
				Env: []string{"PATH=/usr/bin:/bin"},
			})
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			agoratest.WaitFor(t, 5*time.Second, "the sleeps to start", func() bool { return len(procsWith(marker)) >= 2 })
			// A fresh provider knows nothing about h, like `agora dispatch cancel` in
			// another process.
			other := newProvider(t, Options{})
			if err := other.Cancel(t.Context(), h.TaskID()); err != nil {
				t.Fatalf("Cancel: %v", err)
			}
			exit, err := h.Wait()
			if err != nil {
				t.Fatalf("Wait: %v", err)
			}
			if exit.Signal != "killed" || exit.Code != -1 {
				t.Errorf("exit = %+v, want killed", exit)
			}
			agoratest.WaitFor(t, 5*time.Second, "the sandbox's processes to die", func() bool { return len(procsWith(marker)) == 0 })
			for _, c := range []*Provider{other, p} {
				if err := c.Cancel(t.Context(), h.TaskID()); err != nil {
					t.Errorf("second Cancel = %v, want nil", err)
				}
			}
		})
	}
	t.Run("SameProviderMarksCancelled", func(t *testing.T) {
		h, err := p.Start(t.Context(), compute.Spec{ID: "cancel", Argv: []string{"sleep", "1000"}, Env: []string{"PATH=/usr/bin:/bin"}})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		if err := p.Cancel(t.Context(), h.TaskID()); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		exit, _ := h.Wait()
		if !exit.Cancelled || exit.Signal != "killed" {
			t.Errorf("exit = %+v, want cancelled and killed", exit)
		}
	})
	t.Run("StaleTaskIDSparesUnrelatedProcess", func(t *testing.T) {
		for _, session := range []bool{false, true} {
			unrelated := exec.Command("sleep", "1000")
			if session {
				unrelated = exec.Command("setsid", "sleep", "1000")
			}
			if err := unrelated.Start(); err != nil {
				t.Fatal(err)
			}
			pid := unrelated.Process.Pid
			st, err := readProcStat(pid)
			if err != nil {
				t.Fatal(err)
			}
			// Same pid, another start time: what a recorded task id looks like once the
			// pid has been reused.
			stale := taskID{pid: pid, start: st.start - 1}.String()
			if err := p.Cancel(t.Context(), stale); err != nil {
				t.Errorf("Cancel(stale) = %v, want nil", err)
			}
			// The right start time on a process that is no session leader is refused.
			if !session {
				if err := p.Cancel(t.Context(), taskID{pid: pid, start: st.start}.String()); err == nil {
					t.Errorf("Cancel of a non-leader process = nil, want a refusal")
				}
			}
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/stat"); err != nil {
				t.Errorf("unrelated process %d is gone", pid)
			}
			if s, _ := readProcStat(pid); s.start != st.start {
				t.Errorf("unrelated process %d was replaced", pid)
			}
			state, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
			if strings.Contains(string(state), "zombie") {
				t.Errorf("unrelated process %d was killed", pid)
			}
			unrelated.Process.Kill()
			unrelated.Wait()
		}
	})
	t.Run("MalformedTaskID", func(t *testing.T) {
		if err := p.Cancel(t.Context(), "docker:abc"); !errors.Is(err, ErrBadTaskID) {
			t.Errorf("Cancel(docker:abc) = %v, want ErrBadTaskID", err)
		}
	})
}
