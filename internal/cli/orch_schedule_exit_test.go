package cli_test

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// TestOrchScheduleAdd_RefusalExitCodes drives the real binary against a real `agora orch
// serve`: each way `orch schedule add` refuses (a cron spec or zone it cannot read, a plan file
// that is not there or not a file, a plan that does not parse or names nothing, an unknown
// workspace, a name in use) exits 7, invalid input, as README's table says, and adds nothing;
// a name the command line gets wrong exits 2. Failed before: the spec, the zone, the plan
// file and the name in use exited 1, as if agora itself had failed.
func TestOrchScheduleAdd_RefusalExitCodes(t *testing.T) {
	bin := builtAgora(t)
	dir := t.TempDir()
	env := []string{"PATH=/usr/bin:/bin", "AGORA_HOME=" + filepath.Join(dir, "agora"), "HOME=" + dir, "USER=tester"}
	agora := func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), errOut.String()
		}
		if err != nil {
			t.Fatalf("agora %v: %v", args, err)
		}
		return 0, errOut.String()
	}
	writeFiles(t, map[string]string{
		filepath.Join(dir, "sub.yaml"):     "runtime: exec\ncommand: [\"true\"]\n",
		filepath.Join(dir, "good.yaml"):    "version: 1\nname: good\ntasks:\n  - {id: a, subagent: s}\n",
		filepath.Join(dir, "bogus.yaml"):   "version: 1\nname: bogus\ntasks:\n  - {id: a, subagent: s, bogus: 1}\n",
		filepath.Join(dir, "nobody.yaml"):  "version: 1\nname: nobody\ntasks:\n  - {id: a, subagent: nobody}\n",
		filepath.Join(dir, "broken.yaml"):  "version: 1\ntasks: [\n",
		filepath.Join(dir, "notask.yaml"):  "version: 1\nname: empty\ntasks: []\n",
		filepath.Join(dir, "dir", "x.txt"): "x\n",
	})
	if code, out := agora("init"); code != 0 {
		t.Fatalf("init: %d %s", code, out)
	}
	if code, out := agora("subagent", "register", "s", "--from", filepath.Join(dir, "sub.yaml")); code != 0 {
		t.Fatalf("subagent register: %d %s", code, out)
	}
	serve := exec.Command(bin, "orch", "serve")
	serve.Env = env
	var serveLog bytes.Buffer
	serve.Stderr = &serveLog
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() }()
	// The first add waits for serve to listen; it is the one that succeeds.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, out := agora("orch", "schedule", "add", "taken", "--cron", "@daily", filepath.Join(dir, "good.yaml"))
		if code == 0 {
			break
		}
		if time.Now().After(deadline) || !strings.Contains(out, "not running") {
			t.Fatalf("the first schedule add: exit %d\n%s\nserve: %s", code, out, serveLog.String())
		}
	}
	good := filepath.Join(dir, "good.yaml")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stderr's first line
	}{
		{"fields", []string{"x", "--cron", "bad", good}, cmdutil.ExitInvalid, `cron spec "bad" has 1 fields`},
		{"every", []string{"x", "--cron", "@every 1m", good}, cmdutil.ExitInvalid, `cron spec "@every 1m": unknown descriptor`},
		{"never", []string{"x", "--cron", "0 0 30 2 *", good}, cmdutil.ExitInvalid, `never fires`},
		{"seconds", []string{"x", "--cron", "0 0 0 * * *", good}, cmdutil.ExitInvalid, `has 6 fields`},
		{"zone", []string{"x", "--cron", "@daily", "--tz", "Mars/Olympus", good}, cmdutil.ExitInvalid, `time zone "Mars/Olympus": not in the IANA time zone database`},
		{"local zone", []string{"x", "--cron", "@daily", "--tz", "Local", good}, cmdutil.ExitInvalid, `time zone "Local"`},
		{"no plan file", []string{"x", "--cron", "@daily", filepath.Join(dir, "missing.yaml")}, cmdutil.ExitInvalid, "read plan: "},
		{"plan is a directory", []string{"x", "--cron", "@daily", filepath.Join(dir, "dir")}, cmdutil.ExitInvalid, "read plan: "},
		{"unknown field", []string{"x", "--cron", "@daily", filepath.Join(dir, "bogus.yaml")}, cmdutil.ExitInvalid, `tasks[0].bogus: unknown field "bogus"`},
		{"unknown subagent", []string{"x", "--cron", "@daily", filepath.Join(dir, "nobody.yaml")}, cmdutil.ExitInvalid, `subagent "nobody" not found`},
		{"invalid yaml", []string{"x", "--cron", "@daily", filepath.Join(dir, "broken.yaml")}, cmdutil.ExitInvalid, "invalid YAML"},
		{"no tasks", []string{"x", "--cron", "@daily", filepath.Join(dir, "notask.yaml")}, cmdutil.ExitInvalid, "notask.yaml"},
		{"unknown workspace", []string{"x", "--cron", "@daily", "--workspace", "nows", good}, cmdutil.ExitInvalid, `workspace "nows" not found`},
		{"name in use", []string{"taken", "--cron", "@hourly", good}, cmdutil.ExitInvalid, `schedule exists: "taken"`},
		{"bad name", []string{"Bad!", "--cron", "@daily", good}, cmdutil.ExitUsage, `invalid schedule name "Bad!"`},
		{"no cron", []string{"x", good}, cmdutil.ExitUsage, "--cron SPEC is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := agora(append([]string{"orch", "schedule", "add"}, tc.args...)...)
			first, _, _ := strings.Cut(out, "\n")
			if code != tc.code || !strings.Contains(first, tc.want) {
				t.Errorf("exit %d, want %d with %q:\n%s", code, tc.code, tc.want, out)
			}
		})
	}
	cmd := exec.Command(bin, "orch", "schedule", "list", "-o", "json")
	cmd.Env = env
	list, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(list), `"name":`) != 1 || !strings.Contains(string(list), `"name": "taken"`) {
		t.Errorf("a refused add added a schedule, or the first is gone:\n%s", list)
	}
}
