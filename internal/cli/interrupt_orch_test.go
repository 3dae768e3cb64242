package cli_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

var (
	realBinOnce    sync.Once
	realBin        string
	realBinCleanup func() // removes realBin's directory; TestMain calls it
	realBinErr     error
)

// builtAgora is the agora binary built from this tree (or copied from make build's, see
// agoratest.BuildBinary), with agora-full and agora-worker beside it, made once for the
// package: what the scripts, the interrupt tests and the tests of orchestrated work run.
func builtAgora(t *testing.T) string {
	t.Helper()
	bin, err := builtAgoraErr()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// builtAgoraErr is builtAgora for a caller with no *testing.T (testscript's Setup).
func builtAgoraErr() (string, error) {
	realBinOnce.Do(func() { realBin, realBinCleanup, realBinErr = agoratest.BuildBinary() })
	return realBin, realBinErr
}

// TestInterrupt_OrchWatch: orch watch off a terminal prints a running task's phase and last
// output line as they come (-o json: JSON lines); Ctrl-C stops watching, says the run keeps
// running in serve and that nothing changed, and it does keep running.
func TestInterrupt_OrchWatch(t *testing.T) {
	env := sandboxHome(t)
	bin := builtAgora(t)
	run := func(args ...string) *exec.Cmd {
		c := exec.Command(bin, args...)
		c.Env = []string{"PATH=" + os.Getenv("PATH")}
		for k, v := range env {
			c.Env = append(c.Env, k+"="+v)
		}
		return c
	}
	serve := run("orch", "serve")
	startServing(t, serve)
	defer func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() }()
	plan := filepath.Join(t.TempDir(), "plan.yaml")
	writeFiles(t, map[string]string{plan: "version: 1\nname: slow\ntasks:\n  - id: work\n    subagent: slow\n"})
	out, err := run("orch", "submit", plan).Output()
	if err != nil {
		t.Fatalf("submit: %v\n%s", err, exitStderr(err))
	}
	id := strings.TrimSpace(string(out))
	defer func() {
		// Cancel, then wait for the detached supervisor to release the stage (as root it
		// unmounts the dispatch's disk quota), or the temporary home cannot be removed.
		run("orch", "cancel", id).Run()
		agoratest.Eventually(t, 30*time.Second, "the cancelled dispatch's stage to be released", func() error {
			if held, _ := filepath.Glob(filepath.Join(env["AGORA_HOME"], "dispatches", "*", "disk")); len(held) > 0 {
				return fmt.Errorf("still held: %v", held)
			}
			return nil
		})
	}()

	watch := run("orch", "watch", id, "-o", "json")
	stdout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errOut := &syncBuffer{}
	watch.Stderr = errOut
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(60*time.Second, func() { watch.Process.Kill() })
	defer timer.Stop()
	var progress []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var l struct {
			Progress []struct {
				Task     string `json:"task"`
				Phase    string `json:"phase"`
				LastLine string `json:"last_line"`
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("not a JSON line: %q", sc.Text())
		}
		for _, p := range l.Progress {
			progress = append(progress, p.Task+" "+p.Phase+" "+p.LastLine)
			if p.Phase == "agent" && p.LastLine == "working on it" {
				watch.Process.Signal(syscall.SIGINT)
			}
		}
	}
	err = watch.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != cmdutil.ExitInterrupted {
		t.Fatalf("watch: %v, want exit %d; progress seen %q\n%s", err, cmdutil.ExitInterrupted, progress, errOut.String())
	}
	want := "agora: interrupted: stopped watching; nothing changed: run " + id + " keeps running in 'agora orch serve'"
	if !strings.Contains(errOut.String(), want) || strings.Contains(errOut.String(), "context canceled") {
		t.Errorf("stderr %q, want %q", errOut.String(), want)
	}
	out, err = run("orch", "status", id, "-o", "json").Output()
	var st struct{ State string }
	if err != nil || json.Unmarshal(out, &st) != nil || st.State != "running" {
		t.Errorf("after the interrupted watch the run is %q (%v), want still running", st.State, err)
	}
	t.Logf("progress lines: %q", progress)
}
