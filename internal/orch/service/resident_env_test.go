package service_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/orch/api"
)

// residentCLI runs `agora dispatch run ARGS` of bin with exactly env (not the harness's
// plus extras: a cron job's environment is a few variables).
func residentCLI(t *testing.T, bin string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"dispatch", "run"}, args...)...)
	cmd.Env = env
	var o, eo strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &eo
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, o.String(), eo.String()
}

// envWith is env less the variables kvs name, plus kvs.
func envWith(env []string, kvs ...string) []string {
	out := slices.Clone(env)
	for _, kv := range kvs {
		k, _, _ := strings.Cut(kv, "=")
		out = slices.DeleteFunc(out, func(e string) bool { return strings.HasPrefix(e, k+"=") })
	}
	return append(out, kvs...)
}

// cronEnv is what cron gives a job (env -i, then HOME, SHELL, LOGNAME and a PATH), with the
// variables a dispatch reads as env has them and the home it names.
func cronEnv(env []string) []string {
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return !api.DispatchEnv(k) && k != "HOME" && k != "AGORA_HOME"
	})
	return append(out, "SHELL=/bin/sh", "LOGNAME=cron")
}

// TestResident_CallersGetTheFastPath: a resident dispatcher started from a shell takes the
// dispatches of a script, an editor's terminal and a cron job of the same user, whose
// environments differ from the shell's only in variables no dispatch reads (_, SHLVL, the
// editor's TERM_PROGRAM and VSCODE_*, LS_COLORS, SSH_*, a script's own, or cron's handful),
// through the front and through agora-full, and none of them prints a decline.
func TestResident_CallersGetTheFastPath(t *testing.T) {
	e := residentEnv(t, "")
	e.firstResident()
	full := filepath.Join(filepath.Dir(agoraBin), "agora-full")
	script := envWith(e.vars, "_=/home/u/bin/nightly.sh", "SHLVL=2", "NIGHTLY_RUN=1", "BUILD_ID=42")
	editor := envWith(e.vars, "_=/usr/bin/code", "TERM_PROGRAM=vscode", "TERM_PROGRAM_VERSION=1.95.3",
		"VSCODE_IPC_HOOK_CLI=/run/user/1000/vscode-ipc.sock", "VSCODE_GIT_ASKPASS_MAIN=/x/askpass.js", "EDITOR=code --wait",
		"COLORTERM=truecolor", "LS_COLORS=rs=0:di=01;34", "SSH_CONNECTION=10.0.0.2 5022 10.0.0.1 22", "SSH_AUTH_SOCK=/tmp/ssh-x/agent.1",
		"TERM=xterm-256color", "LANG=C.UTF-8")
	cases := []struct {
		name, bin string
		env       []string
	}{
		{"script", agoraBin, script},
		{"script, agora-full", full, script},
		{"editor", agoraBin, editor},
		{"cron", agoraBin, cronEnv(e.vars)},
		{"cron, agora-full", full, cronEnv(e.vars)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, stderr := residentCLI(t, c.bin, c.env, "--subagent", "ok")
			if code != 0 || strings.TrimSpace(out) == "" {
				t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
			}
			if strings.Contains(stderr, "declined") {
				t.Errorf("the resident declined it:\n%s", stderr)
			}
		})
	}
	if n := e.stopResident(); n != len(cases) {
		log, _ := os.ReadFile(filepath.Join(e.home, "orch", "resident.log"))
		t.Errorf("the resident took %d dispatches, want %d\n%s", n, len(cases), log)
	}
}

// TestResident_OtherEnvironmentSaysWhy: a CLI whose PATH, DOCKER_HOST, proxy or an AGORA_*
// variable (one agora does not know included) is not the resident's runs its dispatch
// itself and says so once on stderr, naming the variable and how to get the fast path, and
// never printing its value; a cron job's own PATH is declined the same way. A CLI that opted
// out (AGORA_NO_HANDOFF) is told nothing.
func TestResident_OtherEnvironmentSaysWhy(t *testing.T) {
	e := residentEnv(t, "")
	e.firstResident()
	full := filepath.Join(filepath.Dir(agoraBin), "agora-full")
	const secret = "rt-secret-4c1d"
	path := "/opt/" + secret + ":" + os.Getenv("PATH")
	cases := []struct {
		name, bin, variable string
		env                 []string
	}{
		{"path", agoraBin, "PATH", envWith(e.vars, "PATH="+path)},
		{"path, agora-full", full, "PATH", envWith(e.vars, "PATH="+path)},
		{"docker host", agoraBin, "DOCKER_HOST", envWith(e.vars, "DOCKER_HOST=tcp://127.0.0.1:9/"+secret)},
		{"proxy", agoraBin, "HTTPS_PROXY", envWith(e.vars, "HTTPS_PROXY=http://u:"+secret+"@127.0.0.1:9")},
		{"proxy, agora-full", full, "https_proxy", envWith(e.vars, "https_proxy=http://u:"+secret+"@127.0.0.1:9")},
		{"unknown agora variable", agoraBin, "AGORA_RT_UNKNOWN", envWith(e.vars, "AGORA_RT_UNKNOWN="+secret)},
		{"cron's path", agoraBin, "PATH", envWith(cronEnv(e.vars), "PATH="+path)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, stderr := residentCLI(t, c.bin, c.env, "--subagent", "ok")
			if code != 0 || strings.TrimSpace(out) == "" {
				t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
			}
			var said []string
			for _, line := range strings.Split(stderr, "\n") {
				if strings.Contains(line, "declined this dispatch") {
					said = append(said, line)
				}
			}
			if len(said) != 1 {
				t.Fatalf("%d lines say the decline, want 1:\n%s", len(said), stderr)
			}
			for _, w := range []string{"the resident dispatcher", c.variable + " differs", "agora dispatch resident --stop", "it runs in this process"} {
				if !strings.Contains(said[0], w) {
					t.Errorf("the decline does not say %q: %s", w, said[0])
				}
			}
			if strings.Contains(stderr, secret) {
				t.Errorf("stderr holds the variable's value:\n%s", stderr)
			}
			// Opted out: no hand-off asked, nothing said.
			_, _, stderr = residentCLI(t, c.bin, append(slices.Clone(c.env), "AGORA_NO_HANDOFF=1"), "--subagent", "ok")
			if strings.Contains(stderr, "declined") {
				t.Errorf("with AGORA_NO_HANDOFF the CLI says a decline:\n%s", stderr)
			}
		})
	}
	if n := e.stopResident(); n != 0 {
		t.Errorf("the resident took %d dispatches of another environment", n)
	}
	log, _ := os.ReadFile(filepath.Join(e.home, "orch", "resident.log"))
	if strings.Contains(string(log), secret) {
		t.Errorf("resident.log holds a value:\n%s", log)
	}
}

// TestResident_OtherContextSaysWhich: a CLI whose umask or limits are not the resident's
// (an editor's terminal that raised a limit, a shell with another umask) runs its dispatch
// itself and says which part of its process context differs and how to get the fast path.
func TestResident_OtherContextSaysWhich(t *testing.T) {
	e := residentEnv(t, "")
	e.firstResident()
	for _, c := range []struct{ shell, part string }{
		{`umask 0077; exec "$0" dispatch run --subagent ok`, "in: umask ("},
		{`ulimit -S -n 512; exec "$0" dispatch run --subagent ok`, "in: limits ("},
	} {
		cmd := exec.Command("sh", "-c", c.shell, agoraBin)
		cmd.Env = e.vars
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", c.shell, err, stderr.String())
		}
		if n := strings.Count(stderr.String(), "declined this dispatch"); n != 1 {
			t.Errorf("%s: %d lines say the decline, want 1:\n%s", c.shell, n, stderr.String())
		}
		for _, w := range []string{c.part, "agora dispatch resident --stop"} {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("%s: the decline does not say %q:\n%s", c.shell, w, stderr.String())
			}
		}
	}
	if n := e.stopResident(); n != 0 {
		t.Errorf("the resident took %d dispatches of another context", n)
	}
}

// TestHandoff_ScriptEnvironment: serve, too, takes the dispatch of a script or an editor's
// terminal whose other variables are not its own, and declines one whose AGORA_* variable
// (unknown to agora) or TMPDIR differs, saying which on stderr without its value.
func TestHandoff_ScriptEnvironment(t *testing.T) {
	e, _ := handoffEnv(t)
	code, _, stderr := e.oneShot([]string{"_=/home/u/bin/job.sh", "SHLVL=3", "TERM_PROGRAM=vscode", "VSCODE_PID=42", "JOB_ID=7"}, "--subagent", "ok")
	if code != 0 || e.handoffs() != 1 {
		t.Fatalf("a script's environment: exit %d, hand-offs %d, want 0 and 1\n%s", code, e.handoffs(), stderr)
	}
	const secret = "rt-secret-9e2a"
	for _, c := range []struct{ kv, name string }{{"AGORA_RT_UNKNOWN=" + secret, "AGORA_RT_UNKNOWN"}, {"TMPDIR=/tmp/" + secret, "TMPDIR"}} {
		code, _, stderr := e.oneShot([]string{c.kv}, "--subagent", "ok")
		if code != 0 || e.handoffs() != 1 {
			t.Errorf("with %s: exit %d, hand-offs %d, want 0 and still 1\n%s", c.name, code, e.handoffs(), stderr)
		}
		if !strings.Contains(stderr, "declined this dispatch") || !strings.Contains(stderr, c.name+" differs") || strings.Contains(stderr, secret) {
			t.Errorf("with %s the CLI does not say the decline by name only:\n%s", c.name, stderr)
		}
	}
}
