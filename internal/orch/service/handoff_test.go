package service_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/callerctx"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/peercred"
)

// handoffEnv is a served env with subagents for every way a one-shot dispatch ends.
func handoffEnv(t *testing.T) (*env, *exec.Cmd) {
	t.Helper()
	requireBwrap(t)
	e := newEnv(t)
	e.applySubagents(map[string]string{
		"ok":      "runtime: exec\ncommand: [sh, -c, 'echo fine']\ncapabilities: [shell]\n",
		"failing": "runtime: exec\ncommand: [sh, -c, 'echo bad >&2; exit 3']\ncapabilities: [shell]\n",
		"refused": "runtime: exec\ncommand: [cat, /etc/hostname]\ncapabilities: [shell]\n",
		"slow":    "runtime: exec\ncommand: [sh, -c, 'echo working on it; sleep 60']\ncapabilities: [shell]\n",
	})
	serve := e.serve()
	t.Cleanup(func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() })
	return e, serve
}

// applySubagents registers one subagent per entry (name: its yaml but the description).
func (e *env) applySubagents(subagents map[string]string) {
	e.t.Helper()
	cat := filepath.Join(e.t.TempDir(), "catalog")
	must(e.t, os.MkdirAll(cat, 0o755))
	manifest := "version: 1\nsubagents:\n"
	for _, name := range slices.Sorted(maps.Keys(subagents)) {
		must(e.t, os.WriteFile(filepath.Join(cat, name+".yaml"), []byte("description: "+name+"\n"+subagents[name]), 0o644))
		manifest += fmt.Sprintf("  - {name: %s, from: %s.yaml}\n", name, name)
	}
	path := filepath.Join(cat, "agora-manifest.yaml")
	must(e.t, os.WriteFile(path, []byte(manifest), 0o644))
	e.run("apply", "-f", path)
}

// handoffs counts the hand-offs serve took, from its log.
func (e *env) handoffs() int {
	b, _ := os.ReadFile(filepath.Join(e.home, "..", "serve.log"))
	return strings.Count(string(b), `msg="hand-off taken"`)
}

// oneShot runs `agora dispatch run ARGS` and returns its exit code and streams.
func (e *env) oneShot(extraEnv []string, args ...string) (int, string, string) {
	e.t.Helper()
	cmd := exec.Command(agoraBin, append([]string{"dispatch", "run"}, args...)...)
	cmd.Env = append(slices.Clone(e.vars), extraEnv...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// detachedState is the line a detached dispatch's CLI prints of how far it got.
var detachedState = regexp.MustCompile(`(?m)^agora: \S+ (started \(.*\)|finished)\n`)

// varying are the parts of a dispatch's output that differ between two runs of it.
var varying = regexp.MustCompile(`[0-9A-HJKMNP-TV-Z]{26}|local:\d+(:[0-9a-f]+)+|\d+(\.\d+)?(ms|µs|s)\b|"[a-z_]*(_at|time)": "[^"]*"|"[a-z_]*_ms": \d+|"(pid|provider_task_id|supervisor)": ("[^"]*"|\d+)`)

// TestHandoff_SameAsInProcess: with serve running, `agora dispatch run` hands its dispatch to
// serve (serve's log counts it), and what the user sees is what the in-process path shows:
// stdout, stderr and the exit code for a success, a worker's failure, a refusal and an unknown
// subagent, in text and -o json (the same keys, the same actor); AGORA_NO_HANDOFF=1 and
// --in-process keep it in the CLI.
func TestHandoff_SameAsInProcess(t *testing.T) {
	e, _ := handoffEnv(t)
	for _, c := range []struct {
		name string
		args []string
		code int
	}{
		{"success", []string{"--subagent", "ok"}, 0},
		{"failure", []string{"--subagent", "failing"}, 3},
		{"refusal", []string{"--subagent", "refused"}, 3},
		{"not found", []string{"--subagent", "nosuch"}, 6},
		{"bad target", []string{"--subagent", "ok", "--target", "nowhere"}, 6},
		{"json", []string{"--subagent", "ok", "-o", "json"}, 0},
		{"json failure", []string{"--subagent", "failing", "-o", "json"}, 3},
		{"learn", []string{"--subagent", "ok", "--learn"}, 0},
		{"detach", []string{"--subagent", "ok", "--detach"}, 0},
		{"narrowed", []string{"--subagent", "ok", "--commands", "sh -c *", "--input", `{"a":[1]}`, "--timeout", "1m"}, 0},
		{"usage: widened", []string{"--subagent", "ok", "--commands", "rm *"}, 2},
		{"usage: budget", []string{"--subagent", "ok", "--budget-calls", "3"}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := e.handoffs()
			hCode, hOut, hErr := e.oneShot(nil, c.args...)
			if got := e.handoffs(); got != before+1 {
				t.Fatalf("serve took %d hand-offs, want 1\n%s", got-before, hErr)
			}
			pCode, pOut, pErr := e.oneShot([]string{"AGORA_NO_HANDOFF=1"}, c.args...)
			if got := e.handoffs(); got != before+1 {
				t.Fatalf("AGORA_NO_HANDOFF=1 still handed the dispatch to serve")
			}
			if hCode != c.code || pCode != c.code {
				t.Fatalf("exit codes: hand-off %d, in-process %d, want %d\n%s\n%s", hCode, pCode, c.code, hErr, pErr)
			}
			norm := func(s string) string { return varying.ReplaceAllString(s, "X") }
			if c.name == "detach" {
				// What a detached dispatch had reached when its CLI left is a race either
				// way: started (with its pid) or already finished.
				norm = func(s string) string {
					return varying.ReplaceAllString(detachedState.ReplaceAllString(s, ""), "X")
				}
			}
			if norm(hErr) != norm(pErr) {
				t.Errorf("stderr differs:\nhand-off:\n%s\nin-process:\n%s", hErr, pErr)
			}
			if !strings.HasSuffix(c.name, "json") && !strings.HasPrefix(c.name, "json") {
				if norm(hOut) != norm(pOut) {
					t.Errorf("stdout differs:\nhand-off:\n%s\nin-process:\n%s", hOut, pOut)
				}
				return
			}
			var h, p map[string]any
			if err := json.Unmarshal([]byte(hOut), &h); err != nil {
				t.Fatalf("hand-off -o json: %v\n%s", err, hOut)
			}
			must(t, json.Unmarshal([]byte(pOut), &p))
			if !slices.Equal(keys(h), keys(p)) {
				t.Errorf("-o json keys differ:\nhand-off   %v\nin-process %v", keys(h), keys(p))
			}
			if h["actor"] != p["actor"] || h["actor"] == "" || h["state"] != p["state"] {
				t.Errorf("actor/state: hand-off %v/%v, in-process %v/%v", h["actor"], h["state"], p["actor"], p["state"])
			}
			if strings.Count(hOut, "\n") != strings.Count(pOut, "\n") {
				t.Errorf("-o json is not printed the same (lines %d vs %d)", strings.Count(hOut, "\n"), strings.Count(pOut, "\n"))
			}
		})
	}
	before := e.handoffs()
	if code, _, stderr := e.oneShot(nil, "--subagent", "ok", "--in-process"); code != 0 || e.handoffs() != before {
		t.Errorf("--in-process: exit %d, hand-offs %d\n%s", code, e.handoffs()-before, stderr)
	}
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// startOneShot starts `agora dispatch run ARGS` and returns it with its stderr's lines.
func (e *env) startOneShot(args ...string) (*exec.Cmd, *bytes.Buffer, <-chan string) {
	e.t.Helper()
	return e.startOneShotEnv(nil, args...)
}

// startOneShotEnv is startOneShot with more environment.
func (e *env) startOneShotEnv(extraEnv []string, args ...string) (*exec.Cmd, *bytes.Buffer, <-chan string) {
	e.t.Helper()
	cmd := exec.Command(agoraBin, append([]string{"dispatch", "run"}, args...)...)
	cmd.Env = append(slices.Clone(e.vars), extraEnv...)
	var out bytes.Buffer
	cmd.Stdout = &out
	pr, err := cmd.StderrPipe()
	must(e.t, err)
	must(e.t, cmd.Start())
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return cmd, &out, lines
}

// waitLine reads lines until one contains marker; it returns everything read.
func waitLine(t *testing.T, lines <-chan string, marker string) string {
	t.Helper()
	var all strings.Builder
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("stderr ended before %q:\n%s", marker, all.String())
			}
			all.WriteString(l + "\n")
			if strings.Contains(l, marker) {
				return all.String()
			}
		case <-timeout:
			t.Fatalf("no %q within 60s:\n%s", marker, all.String())
		}
	}
}

func drain(lines <-chan string) string {
	var all strings.Builder
	for l := range lines {
		all.WriteString(l + "\n")
	}
	return all.String()
}

// TestHandoff_CtrlC: Ctrl-C of a handed-off dispatch cancels it in serve; the CLI says so as
// the in-process path does, exits 130 and -o json prints the ended record.
func TestHandoff_CtrlC(t *testing.T) {
	e, _ := handoffEnv(t)
	before := e.handoffs()
	cmd, out, lines := e.startOneShot("--subagent", "slow", "--progress", "-o", "json")
	seen := waitLine(t, lines, "| working on it")
	cmd.Process.Signal(syscall.SIGINT)
	seen += drain(lines)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want 130\n%s", err, seen)
	}
	if e.handoffs() != before+1 {
		t.Fatalf("the dispatch was not handed off")
	}
	if !strings.Contains(seen, "agora: interrupted: dispatch ") || !strings.Contains(seen, "was cancelled: the sandbox was stopped and the end recorded") {
		t.Errorf("stderr does not say what happened:\n%s", seen)
	}
	var rec struct{ ID, State string }
	if err := json.Unmarshal(out.Bytes(), &rec); err != nil || rec.ID == "" {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	desc := e.run("dispatch", "describe", rec.ID, "-o", "json")
	if !strings.Contains(desc, `"state": "cancelled"`) && !strings.Contains(desc, `"reason": "cancelled"`) {
		t.Errorf("the dispatch was not cancelled:\n%s", desc)
	}
}

// TestHandoff_ServeKilled: serve killed while it supervises a handed-off dispatch: the CLI
// says serve stopped, reaps the dispatch as any whose supervisor died (failed/lost), prints
// its end as the in-process path would and exits 1; nothing is left running.
func TestHandoff_ServeKilled(t *testing.T) {
	e, serve := handoffEnv(t)
	cmd, out, lines := e.startOneShot("--subagent", "slow")
	seen := waitLine(t, lines, " started (")
	serve.Process.Kill()
	serve.Wait()
	seen += drain(lines)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1\n%s", err, seen)
	}
	id := strings.TrimSpace(out.String())
	if !strings.Contains(seen, "that ran dispatch "+id+" stopped") || !strings.Contains(seen, id+" failed: lost") {
		t.Errorf("stderr does not say serve stopped and the dispatch was lost:\n%s", seen)
	}
	desc := e.run("dispatch", "describe", id, "-o", "json")
	if !strings.Contains(desc, `"reason": "lost"`) {
		t.Errorf("the dispatch was not reaped as lost:\n%s", desc)
	}
}

// TestHandoff_UntrustedSocket: a socket that is a symlink (to another home's serve), open to
// others, or not this user's is never handed a dispatch: the CLI runs it itself, and that
// serve never hears of it.
func TestHandoff_UntrustedSocket(t *testing.T) {
	other, _ := handoffEnv(t)
	e := newEnv(t)
	orchDir := filepath.Join(e.home, "orch")
	must(t, os.MkdirAll(orchDir, 0o700))
	must(t, os.Symlink(filepath.Join(other.home, "orch", "orch.sock"), filepath.Join(orchDir, "orch.sock")))
	code, _, stderr := e.oneShot(nil, "--subagent", "worker")
	if code != 0 || other.handoffs() != 0 {
		t.Fatalf("through a symlinked socket: exit %d, the other serve took %d\n%s", code, other.handoffs(), stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(other.home, "..", "serve.log")); strings.Contains(string(b), "hand-off") {
		t.Errorf("the other home's serve was asked:\n%s", b)
	}
	// Its own serve, its socket opened to others, then given to another user.
	must(t, os.Remove(filepath.Join(orchDir, "orch.sock")))
	serve := e.serve()
	defer func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() }()
	sock := filepath.Join(orchDir, "orch.sock")
	if code, _, _ := e.oneShot(nil, "--subagent", "worker"); code != 0 || e.handoffs() != 1 {
		t.Fatalf("its own serve was not used: exit %d, hand-offs %d", code, e.handoffs())
	}
	must(t, os.Chmod(sock, 0o666))
	if code, _, _ := e.oneShot(nil, "--subagent", "worker"); code != 0 || e.handoffs() != 1 {
		t.Errorf("a socket open to others was used: exit %d, hand-offs %d", code, e.handoffs())
	}
	must(t, os.Chmod(sock, 0o600))
	if os.Getuid() != 0 {
		t.Log("not root: the socket cannot be given to another user here")
		return
	}
	must(t, os.Chown(sock, 65534, 65534))
	if code, _, _ := e.oneShot(nil, "--subagent", "worker"); code != 0 || e.handoffs() != 1 {
		t.Errorf("a socket of another user was used: exit %d, hand-offs %d", code, e.handoffs())
	}
}

// post sends body to path on e's serve from this test process (not `agora dispatch run`). A
// hand-off request (a JSON object) first gets a fresh proof (proved), so that serve's later
// checks are what answers; postRaw sends body as it is.
func (e *env) post(path string, body []byte) (int, string) {
	e.t.Helper()
	if path == api.HandoffPath && bytes.HasPrefix(body, []byte("{\"")) {
		body = append([]byte("{"+e.proved(filepath.Join(e.home, "orch", "orch.sock"))+","), body[1:]...)
	}
	return e.postRaw(path, body)
}

func (e *env) postRaw(path string, body []byte) (int, string) {
	e.t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(e.home, "orch", "orch.sock"))
	}}}
	resp, err := hc.Post("http://agora"+path, "application/json", bytes.NewReader(body))
	must(e.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// proved asks the taker at sock for a hand-off challenge and returns its answer as the
// request's JSON members ("proof_fd":N,"proof":"...").
func (e *env) proved(sock string) string {
	e.t.Helper()
	var peer int32
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "unix", sock)
		if err == nil {
			if cred, err := peercred.Of(c); err == nil {
				peer = cred.Pid
			}
		}
		return c, err
	}}}
	resp, err := hc.Post("http://agora"+api.HandoffProofPath, "application/json", nil)
	must(e.t, err)
	defer resp.Body.Close()
	var ch api.HandoffChallenge
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&ch) != nil {
		e.t.Fatalf("no hand-off challenge from %s: status %d", sock, resp.StatusCode)
	}
	secret, err := callerctx.Answer(peer, ch.FD)
	must(e.t, err)
	return fmt.Sprintf(`"proof_fd":%d,"proof":%q`, ch.FD, secret)
}

// TestHandoff_Attacks: what a caller other than a person's `agora dispatch run` tries on the
// hand-off route. A learn dispatch from any other process of this user (the MCP server's code
// paths run as this user too) is declined before anything is recorded; so is a plain one. A
// forged actor, a malformed or huge request are refused. Another uid is refused at the
// socket. Nothing of it is a dispatch.
func TestHandoff_Attacks(t *testing.T) {
	e, _ := handoffEnv(t)
	// The exe a CLI sends: the whole program serve runs as (agora-full beside the front).
	exe := filepath.Join(filepath.Dir(agoraBin), "agora-full")
	if abs, err := filepath.EvalSymlinks(exe); err == nil {
		exe = abs
	}
	good := fmt.Sprintf(`{"home":%q,"exe":%q,"env":%q,"subagent":"ok","budget":{}`, e.home, exe, api.EnvDigest(e.vars))
	for name, c := range map[string]struct {
		body   string
		status int
		want   string
	}{
		"learn from another process": {good + `,"learn":true}`, http.StatusConflict, "not"},
		"plain from another process": {good + `}`, http.StatusConflict, "not"},
		"forged actor":               {good + `,"actor":"root"}`, http.StatusBadRequest, "actor"},
		"another home":               {strings.Replace(good, e.home, "/elsewhere", 1) + `}`, http.StatusConflict, "serve's home is"},
		"another binary":             {strings.Replace(good, exe, "/usr/local/bin/agora", 1) + `}`, http.StatusConflict, "another agora binary"},
		"another environment":        {strings.Replace(good, api.EnvDigest(e.vars), "00", 1) + `}`, http.StatusConflict, "environment is not serve's"},
		"too late":                   {good + `,"start_by":1}`, http.StatusConflict, "stopped waiting"},
		"malformed":                  {`{"home":`, http.StatusBadRequest, "invalid"},
		"huge":                       {good + `,"input":"` + strings.Repeat("a", api.MaxHandoffRequest) + `"}`, 0, "limit"},
	} {
		t.Run(name, func(t *testing.T) {
			status, body := e.post(api.HandoffPath, []byte(c.body))
			if c.status == 0 && status >= 400 && status < 500 {
				return // refused by its size, by the body limit or the parser's
			}
			if status != c.status || !strings.Contains(body, c.want) {
				t.Errorf("status %d %s, want %d naming %q", status, body, c.status, c.want)
			}
		})
	}
	if status, _ := e.post(strings.Replace(api.HandoffCancelPath, "{handle}", "guess", 1), nil); status != http.StatusNotFound {
		t.Errorf("a guessed cancel handle: status %d, want 404", status)
	}
	if list := e.run("dispatch", "list", "-o", "json"); strings.Contains(list, `"id"`) {
		t.Errorf("a refused hand-off left a dispatch:\n%s", list)
	}
	if e.handoffs() != 0 {
		t.Errorf("serve took %d hand-offs from attackers", e.handoffs())
	}
	t.Run("another uid", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("SKIP: needs root to connect as another uid")
		}
		// Open the way to the socket for uid 65534; serve's peer check is what is left.
		for d := filepath.Join(e.home, "orch"); d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
			must(t, os.Chmod(d, 0o711))
		}
		sock := filepath.Join(e.home, "orch", "orch.sock")
		must(t, os.Chmod(sock, 0o666))
		curl := exec.Command("curl", "-s", "--unix-socket", sock, "-X", "POST", "--data-binary", good+`}`, "http://agora"+api.HandoffPath)
		curl.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := curl.CombinedOutput()
		if err != nil {
			t.Skipf("SKIP: curl as uid 65534: %v %s", err, out)
		}
		if !strings.Contains(string(out), "peer is not this user") {
			t.Errorf("another uid was answered: %s", out)
		}
	})
}

// TestHandoff_UpgradedBinary: agora replaced on disk while serve runs (an upgrade in place):
// serve runs the old code, so it declines, and the new CLI runs the dispatch itself.
func TestHandoff_UpgradedBinary(t *testing.T) {
	requireBwrap(t)
	e := newEnv(t)
	bin := filepath.Join(t.TempDir(), "agora")
	// The front and the whole program copied (an upgrade replaces both); the worker beside
	// the copy, as beside the original.
	src, err := os.ReadFile(agoraBin)
	must(t, err)
	must(t, os.WriteFile(bin, src, 0o755))
	full := filepath.Join(filepath.Dir(bin), "agora-full")
	fullSrc, err := os.ReadFile(filepath.Join(filepath.Dir(agoraBin), "agora-full"))
	must(t, err)
	must(t, os.WriteFile(full, fullSrc, 0o755))
	must(t, os.Symlink(filepath.Join(filepath.Dir(agoraBin), "agora-worker"), filepath.Join(filepath.Dir(bin), "agora-worker")))
	serve := exec.Command(bin, "orch", "serve")
	serve.Env = e.vars
	logf, err := os.Create(filepath.Join(e.home, "..", "serve.log"))
	must(t, err)
	defer logf.Close()
	serve.Stdout, serve.Stderr = logf, logf
	must(t, serve.Start())
	defer func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() }()
	oneShot := func() (int, string) {
		cmd := exec.Command(bin, "dispatch", "run", "--subagent", "worker")
		cmd.Env = e.vars
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		must(t, err)
		return 0, string(out)
	}
	agoratest.WaitFor(t, 30*time.Second, "a hand-off to the copy's serve", func() bool {
		code, _ := oneShot()
		return code == 0 && e.handoffs() > 0
	})
	taken := e.handoffs()
	// Replace it as an upgrade does: a new file renamed over the old.
	must(t, os.WriteFile(full+".new", fullSrc, 0o755))
	must(t, os.Rename(full+".new", full))
	must(t, os.WriteFile(bin+".new", src, 0o755))
	must(t, os.Rename(bin+".new", bin))
	if code, out := oneShot(); code != 0 || e.handoffs() != taken {
		t.Fatalf("after the upgrade: exit %d, serve took %d more\n%s", code, e.handoffs()-taken, out)
	}
	if b, _ := os.ReadFile(filepath.Join(e.home, "..", "serve.log")); !strings.Contains(string(b), "was replaced since serve started") {
		t.Errorf("serve did not say why it declined:\n%s", b)
	}
}

// TestHandoff_StaleOrStuckServe: serve keeps the agora.yaml it started with; once the file
// changed, serve declines (its targets could be stale) and the CLI runs the dispatch itself
// with the new file. A serve that does not answer (stopped) is given up on, and the
// dispatch runs in the CLI.
func TestHandoff_StaleOrStuckServe(t *testing.T) {
	e, serve := handoffEnv(t)
	if code, _, stderr := e.oneShot(nil, "--subagent", "ok"); code != 0 || e.handoffs() != 1 {
		t.Fatalf("first: exit %d, hand-offs %d\n%s", code, e.handoffs(), stderr)
	}
	cfg := filepath.Join(e.home, "agora.yaml")
	old, _ := os.ReadFile(cfg)
	must(t, os.WriteFile(cfg, append(old, []byte("\n# changed\n")...), 0o600))
	if code, _, stderr := e.oneShot(nil, "--subagent", "ok"); code != 0 || e.handoffs() != 1 {
		t.Errorf("after agora.yaml changed: exit %d, hand-offs %d\n%s", code, e.handoffs(), stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(e.home, "..", "serve.log")); !strings.Contains(string(b), "agora.yaml changed since serve started") {
		t.Errorf("serve did not say why it declined:\n%s", b)
	}
	must(t, os.WriteFile(cfg, old, 0o600))
	must(t, serve.Process.Signal(syscall.SIGSTOP))
	defer serve.Process.Signal(syscall.SIGCONT)
	start := time.Now()
	code, _, stderr := e.oneShot(nil, "--subagent", "ok")
	if code != 0 {
		t.Fatalf("with serve stopped: exit %d\n%s", code, stderr)
	}
	gaveUp := time.Since(start)
	t.Logf("with serve stopped the CLI gave up on it after %v", gaveUp.Round(time.Millisecond))
	if gaveUp > 9*time.Second {
		t.Errorf("the CLI waited %v for a stopped serve: it waited twice (the proof's answer, then the hand-off's)", gaveUp)
	}
	serve.Process.Signal(syscall.SIGCONT)
	// The resumed serve answers the challenge the CLI gave up on and is asked nothing more;
	// a request it reads only after the CLI stopped waiting is declined, never run.
	status, body := e.post(api.HandoffPath, []byte(fmt.Sprintf(`{"home":%q,"exe":"x","env":"x","subagent":"ok","budget":{},"start_by":1}`, e.home)))
	if status != http.StatusConflict || !strings.Contains(body, "the CLI stopped waiting for this answer") {
		t.Errorf("a late request: status %d %s", status, body)
	}
	if e.handoffs() != 1 {
		t.Errorf("the stopped serve took the dispatch too: %d hand-offs", e.handoffs())
	}
}

// TestHandoff_WarmSlot: with `warm: 1` and a standby ready, a handed-off dispatch (no
// --progress) runs on serve's resident path into the standby, as a plan's would; what the
// user sees is what the in-process path shows, and Ctrl-C of one cancels it.
func TestHandoff_WarmSlot(t *testing.T) {
	e, _ := warmServedEnv(t, 1)
	db := openAgoraDB(t, e)
	ready := idleStandbys(t, e)
	hCode, hOut, hErr := e.oneShot(nil, "--subagent", "worker")
	if e.handoffs() != 1 {
		t.Fatalf("not handed off:\n%s", hErr)
	}
	id := strings.TrimSpace(hOut)
	if pid := supervisorPID(t, db, id); !contains(ready, pid) {
		t.Fatalf("dispatch %s was supervised by %d, not by the ready standby %v", id, pid, ready)
	}
	pCode, pOut, pErr := e.oneShot([]string{"AGORA_NO_HANDOFF=1"}, "--subagent", "worker")
	norm := func(s string) string { return varying.ReplaceAllString(s, "X") }
	if hCode != 0 || pCode != 0 || norm(hErr) != norm(pErr) || norm(hOut) != norm(pOut) {
		t.Errorf("warm hand-off exit %d, in-process %d:\n%s%s\n---\n%s%s", hCode, pCode, hOut, hErr, pOut, pErr)
	}
	waitStandbys(t, e, 1)
	interrupt := func(extra ...string) (string, string) {
		cmd, _, lines := e.startOneShotEnv(extra, "--subagent", "sleeper")
		seen := waitLine(t, lines, " started (")
		cmd.Process.Signal(syscall.SIGINT)
		seen += drain(lines)
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
			t.Fatalf("exit %v, want 130\n%s", err, seen)
		}
		last := strings.Split(strings.TrimSpace(seen), "\n")
		return seen, varying.ReplaceAllString(last[len(last)-1], "X")
	}
	before := e.handoffs()
	hSeen, hLast := interrupt()
	if e.handoffs() != before+1 {
		t.Fatalf("Ctrl-C run not handed off")
	}
	_, pLast := interrupt("AGORA_NO_HANDOFF=1")
	if hLast != pLast {
		t.Errorf("Ctrl-C of a warm hand-off ends\n%s\nin-process\n%s\n(all: %s)", hLast, pLast, hSeen)
	}
}

// TestHandoff_OtherEnvironment: a CLI whose PATH (where the agent CLIs are found) or tracing
// environment is not serve's runs its dispatch itself: serve would run it with its own.
func TestHandoff_OtherEnvironment(t *testing.T) {
	e, _ := handoffEnv(t)
	for _, extra := range []string{"PATH=/opt/elsewhere:" + os.Getenv("PATH"), "OTEL_SERVICE_NAME=mine"} {
		if code, _, stderr := e.oneShot([]string{extra}, "--subagent", "ok"); code != 0 || e.handoffs() != 0 {
			t.Errorf("with %s: exit %d, hand-offs %d\n%s", extra, code, e.handoffs(), stderr)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(e.home, "..", "serve.log")); !strings.Contains(string(b), "environment is not serve's") {
		t.Errorf("serve did not say why it declined:\n%s", b)
	}
}

// TestHandoff_WarmOutlivesServe: a handed-off dispatch in a standby supervisor outlives a
// serve killed with -9, as a plan's does: the CLI says serve stopped, follows the dispatch to
// its end itself and exits as it would have.
func TestHandoff_WarmOutlivesServe(t *testing.T) {
	e, serve := warmServedEnv(t, 1)
	cmd, out, lines := e.startOneShot("--subagent", "sleeper")
	seen := waitLine(t, lines, " started (")
	must(t, serve().Kill())
	seen += drain(lines)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit %v, want 0\n%s", err, seen)
	}
	id := strings.TrimSpace(out.String())
	if e.handoffs() != 1 || !strings.Contains(seen, "that ran dispatch "+id+" stopped") || !strings.Contains(seen, id+" finished") {
		t.Errorf("stderr does not say serve stopped and the dispatch finished:\n%s", seen)
	}
}

// TestHandoff_Callbacks: a handed-off dispatch's --callback receives the same lifecycle
// events, signed, as one the CLI supervises itself.
func TestHandoff_Callbacks(t *testing.T) {
	requireBwrap(t)
	e := newEnv(t)
	must(t, os.WriteFile(filepath.Join(e.home, "agora.yaml"), []byte("egress:\n  allow_private: [127.0.0.1/32]\n"), 0o600))
	var mu sync.Mutex
	got := map[string][]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var ev struct {
			Kind string `json:"kind"`
		}
		json.Unmarshal(b, &ev)
		mu.Lock()
		got[r.URL.Path] = append(got[r.URL.Path], ev.Kind+" signed="+fmt.Sprint(r.Header.Get("X-Agora-Signature") != ""))
		mu.Unlock()
	}))
	defer srv.Close()
	serve := e.serve()
	defer func() { serve.Process.Signal(syscall.SIGTERM); serve.Wait() }()
	if code, _, stderr := e.oneShot(nil, "--subagent", "worker", "--callback", srv.URL+"/handed"); code != 0 || e.handoffs() != 1 {
		t.Fatalf("hand-off: exit %d, hand-offs %d\n%s", code, e.handoffs(), stderr)
	}
	if code, _, stderr := e.oneShot([]string{"AGORA_NO_HANDOFF=1"}, "--subagent", "worker", "--callback", srv.URL+"/local"); code != 0 {
		t.Fatalf("in-process: exit %d\n%s", code, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("callbacks: %v", got)
	if len(got["/handed"]) == 0 || strings.Join(got["/handed"], ",") != strings.Join(got["/local"], ",") {
		t.Errorf("callbacks: handed off %v, in-process %v", got["/handed"], got["/local"])
	}
}
