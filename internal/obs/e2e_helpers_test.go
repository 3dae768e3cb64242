package obs_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/client"
)

var agoraBin string

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Getenv("OBS_NO_BINARY") != "" {
		os.Exit(agoratest.NoLeaks(m.Run()))
	}
	os.Exit(agoratest.NoLeaks(agoratest.RunWithBinary(m, &agoraBin)))
}

// secretValue is an env bundle's secret: it must appear in no metric, log line or span.
const secretValue = "obs-secret-4f1c9a7e2b8d6035a1c4"

// home is one AGORA_HOME with a catalog: worker (succeeds), failer (prints the secret and
// fails), both with the env bundle holding secretValue.
type home struct {
	t    *testing.T
	dir  string
	vars []string
}

func newHome(t *testing.T, extraEnv ...string) *home {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("SKIP: bubblewrap (bwrap) is not installed; the test runs real sandboxed workers (apt-get install bubblewrap)")
	}
	dir := t.TempDir()
	h := &home{t: t, dir: filepath.Join(dir, "home")}
	h.vars = append(append(os.Environ(), "AGORA_HOME="+h.dir, "OBS_SECRET="+secretValue), extraEnv...)
	cat := filepath.Join(dir, "catalog")
	write(t, filepath.Join(cat, "caps", "shell", "capability.yaml"), "description: a shell\ncommands: [\"sh -c *\"]\n")
	write(t, filepath.Join(cat, "worker.yaml"), `description: writes its input into the workspace
runtime: exec
command: [sh, -c, 'printf "%s\n" "$AGORA_INPUT_JSON" > task.json; echo working; sleep 0.2']
capabilities: [shell]
`)
	write(t, filepath.Join(cat, "failer.yaml"), `description: prints its secret and fails
runtime: exec
command: [sh, -c, 'echo "token $OBS_TOKEN" >&2; exit 3']
capabilities: [shell]
`)
	write(t, filepath.Join(cat, "agora-manifest.yaml"), `version: 1
capabilities:
  - {name: shell, from: caps/shell}
subagents:
  - {name: worker, from: worker.yaml}
  - {name: failer, from: failer.yaml}
`)
	h.run("init")
	h.run("apply", "-f", filepath.Join(cat, "agora-manifest.yaml"))
	h.run("env", "register", "creds", "--secret", "OBS_TOKEN=env:OBS_SECRET")
	return h
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (h *home) run(args ...string) string {
	h.t.Helper()
	cmd := exec.Command(agoraBin, args...)
	cmd.Env = h.vars
	out, err := cmd.CombinedOutput()
	if err != nil {
		h.t.Fatalf("agora %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// served is a running `agora orch serve --log-format json --metrics 127.0.0.1:0`.
type served struct {
	cmd     *exec.Cmd
	logPath string
	metrics string // http://HOST:PORT
}

// serve starts serve and waits until the orchestrator and the metrics listener answer.
func (h *home) serve() *served {
	h.t.Helper()
	s := &served{logPath: filepath.Join(h.dir, "..", "serve.log")}
	cmd := exec.Command(agoraBin, "orch", "serve", "--log-format", "json", "--metrics", "127.0.0.1:0")
	cmd.Env = h.vars
	log, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		h.t.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	s.cmd = cmd
	h.t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	c := h.client()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if hl, err := c.Health(context.Background()); err == nil && hl.PID == cmd.Process.Pid {
			for _, l := range s.logLines(h.t) {
				if l["msg"] == "metrics listening" {
					s.metrics = "http://" + l["addr"].(string)
				}
			}
			if s.metrics != "" {
				return s
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(s.logPath)
			h.t.Fatalf("serve did not answer within 30s:\n%s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *home) client() *client.Client {
	return client.New(filepath.Join(h.dir, "orch", "orch.sock"))
}

// logLines parses serve's log: every line must be one JSON object.
func (s *served) logLines(t *testing.T) []map[string]any {
	t.Helper()
	f, err := os.Open(s.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "{") {
			continue // serve's own banner lines ("agora: orchestrator serving on ...")
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %v\n%s", err, line)
		}
		out = append(out, m)
	}
	return out
}

func (s *served) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(s.metrics + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	if _, err := bufio.NewReader(resp.Body).WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b.String()
}

// submit submits a plan and waits for its run to end.
func (h *home) submitAndWait(src string, limit time.Duration) api.Run {
	h.t.Helper()
	path := filepath.Join(h.t.TempDir(), "plan.yaml")
	write(h.t, path, src)
	return h.waitRun(strings.TrimSpace(strings.Split(h.run("orch", "submit", path), "\n")[0]), limit)
}

// waitRun waits for run runID to end.
func (h *home) waitRun(runID string, limit time.Duration) api.Run {
	h.t.Helper()
	c := h.client()
	deadline := time.Now().Add(limit)
	for {
		run, err := c.Status(context.Background(), runID)
		if err != nil {
			h.t.Fatal(err)
		}
		if lifecycle.RunEnded(run.State) {
			return run
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("run %s still %s after %s: %v", runID, run.State, limit, run.Counts)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// obsPlan: a -> b, c and d hold the exclusive lock pool (one waits), f fails twice (one retry).
func obsPlan(name string) string {
	return fmt.Sprintf(`version: 1
name: %s
concurrency: 4
defaults:
  env: [creds]
  retry: {max_attempts: 2, initial_backoff: 50ms, max_backoff: 100ms}
tasks:
  - {id: a, subagent: worker, input: {n: 1}}
  - {id: b, subagent: worker, input: {n: 2}, depends_on: [a]}
  - {id: c, subagent: worker, input: {n: 3}, locks: [pool]}
  - {id: d, subagent: worker, input: {n: 4}, locks: [pool]}
  - {id: f, subagent: failer, input: {n: 5}}
`, name)
}
