package cli_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/compute/local"
)

// agoraProcess is the real agora binary (builtAgora), with agora-worker beside it.
func agoraProcess(t *testing.T, env map[string]string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(builtAgora(t), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// interruptWhen starts cmd, sends it SIGINT once a line of its stderr contains marker, and
// returns its exit code, stdout and stderr.
func interruptWhen(t *testing.T, cmd *exec.Cmd, marker string) (int, string, string) {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout = &out
	pr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var errOut strings.Builder
	sent := false
	timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		errOut.WriteString(sc.Text() + "\n")
		if !sent && strings.Contains(sc.Text(), marker) {
			cmd.Process.Signal(syscall.SIGINT)
			sent = true
		}
	}
	io.Copy(io.Discard, pr)
	err = cmd.Wait()
	if !sent {
		t.Fatalf("%v never printed %q; stderr:\n%s", cmd.Args, marker, errOut.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

func sandboxHome(t *testing.T) map[string]string {
	t.Helper()
	if err := local.Available(); err != nil {
		t.Skipf("SKIP: bubblewrap sandbox not available here (apt-get install bubblewrap): %v", err)
	}
	dir := t.TempDir()
	env := map[string]string{"AGORA_HOME": filepath.Join(dir, "agora"), "HOME": dir, "USER": "tester"}
	capDir := filepath.Join(dir, "caps", "shell")
	writeFiles(t, map[string]string{filepath.Join(capDir, "capability.yaml"): "commands: [\"sh -c *\"]\n"})
	for _, args := range [][]string{
		{"init"},
		{"capability", "register", "shell", "--from", capDir},
		{"subagent", "register", "slow", "--runtime", "exec", "--command", "sh -c 'echo working on it; sleep 60'", "--capability", "shell"},
	} {
		if r := runAgora(t, env, args...); r.code != cmdutil.ExitOK {
			t.Fatalf("agora %v: exit %d\n%s", args, r.code, r.stderr)
		}
	}
	return env
}

// TestInterrupt_DispatchRun: Ctrl-C on a running dispatch stops its sandbox, records the
// end, and says so (not "context canceled"); -o json still prints the record as one
// document, and --progress showed the phases and the worker's last line on stderr.
func TestInterrupt_DispatchRun(t *testing.T) {
	env := sandboxHome(t)
	cmd := agoraProcess(t, env, "dispatch", "run", "--subagent", "slow", "--progress", "-o", "json")
	code, stdout, stderr := interruptWhen(t, cmd, "| working on it")
	if code != cmdutil.ExitInterrupted {
		t.Fatalf("exit %d, want %d\n%s", code, cmdutil.ExitInterrupted, stderr)
	}
	if strings.Contains(stderr, "context canceled") || !strings.Contains(stderr, "agora: interrupted: dispatch ") ||
		!strings.Contains(stderr, "was cancelled: the sandbox was stopped and the end recorded") {
		t.Errorf("stderr does not say what happened:\n%s", stderr)
	}
	for _, phase := range []string{" staging\n", " sandbox\n", " agent\n", " capture\n"} {
		if !strings.Contains(stderr, phase) {
			t.Errorf("phase%q not shown:\n%s", strings.TrimSpace(phase), stderr)
		}
	}
	var rec struct{ ID, State string }
	if err := json.Unmarshal([]byte(stdout), &rec); err != nil || rec.ID == "" {
		t.Fatalf("stdout is not the record as one JSON document (%v):\n%s", err, stdout)
	}
	r := runAgora(t, env, "dispatch", "describe", rec.ID, "-o", "json")
	var got struct{ State, Reason string }
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatal(err)
	}
	if got.State != rec.State || got.State == "started" || got.State == "accepted" {
		t.Errorf("recorded %s/%s, printed %s: the interrupted dispatch must be recorded ended", got.State, got.Reason, rec.State)
	}
	t.Logf("interrupted dispatch recorded %s/%s; stderr:\n%s", got.State, got.Reason, stderr)
}

// TestInterrupt_ReadNothingChanged: Ctrl-C on a command that only reads says nothing changed.
func TestInterrupt_ReadNothingChanged(t *testing.T) {
	env := sandboxHome(t)
	run := agoraProcess(t, env, "dispatch", "run", "--subagent", "slow")
	runOut := &syncBuffer{}
	run.Stdout = runOut
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { run.Process.Signal(syscall.SIGINT); run.Wait() }()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(runOut.String(), "\n") && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	id := strings.TrimSpace(runOut.String())
	cmd := agoraProcess(t, env, "dispatch", "logs", id, "-f")
	// logs -f prints the worker's stdout; interrupt it once it has printed something.
	out := &syncBuffer{}
	cmd.Stdout = out
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	agoratest.WaitFor(t, 30*time.Second, "logs -f to print the worker's first line", func() bool { return strings.Contains(out.String(), "working on it") })
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != cmdutil.ExitInterrupted {
		t.Fatalf("logs -f: %v, want exit %d\n%s", err, cmdutil.ExitInterrupted, errOut.String())
	}
	if got := errOut.String(); got != "agora: interrupted: nothing changed\n" {
		t.Errorf("stderr %q, want the one line saying nothing changed", got)
	}
}

// syncBuffer: a process writes it while the test reads it.
type syncBuffer = agoratest.SyncBuffer
