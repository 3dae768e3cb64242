package codexrt

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/runtime/codexrt/responsestest"
)

// realCodex is the real Codex CLI: AGORA_TEST_CODEX, else the one scripts/agent-clis.sh
// installs in .cache/npm; the test skips, saying so, without either.
func realCodex(t *testing.T) string {
	p := os.Getenv("AGORA_TEST_CODEX")
	if p == "" {
		p = filepath.Join("..", "..", "..", ".cache", "npm", "node_modules", ".bin", "codex")
	}
	if _, err := os.Stat(p); err != nil {
		t.Skip("SKIP: the real Codex CLI is not installed (run scripts/agent-clis.sh or set AGORA_TEST_CODEX)")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// fakeCodex writes a stand-in for codex that checks what Run promises it (the prompt on
// stdin, CODEX_HOME with the config and its token, no token in the environment, the argv) and
// prints script.
func fakeCodex(t *testing.T, script string) string {
	dir := t.TempDir()
	p := filepath.Join(dir, "codex")
	body := `#!/bin/sh
[ "$*" = "exec --json --strict-config --skip-git-repo-check -" ] || { echo "bad argv: $*" >&2; exit 9; }
grep -q 'wire_api = "responses"' "$CODEX_HOME/config.toml" || { echo "no config" >&2; exit 9; }
grep -q '^experimental_bearer_token = "relay-token"$' "$CODEX_HOME/config.toml" || { echo "no token in the config" >&2; exit 9; }
[ -z "$AGORA_CODEX_TOKEN" ] || { echo "the token is in the environment" >&2; exit 9; }
read -r prompt; [ "$prompt" = "do the thing" ] || { echo "bad prompt: $prompt" >&2; exit 9; }
` + script
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func testConfig(t *testing.T, bin string) Config {
	return Config{
		Binary: bin, Model: "gpt-5.5", BaseURL: "http://127.0.0.1:9/model", Token: "relay-token",
		Dir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()},
		Timeout: time.Minute, TempDir: t.TempDir(),
	}
}

func TestRunFake(t *testing.T) {
	bin := fakeCodex(t, "cat "+mustAbs(t, "testdata/turn.jsonl")+"\n")
	var obs recorder
	var tr bytes.Buffer
	cfg := testConfig(t, bin)
	cfg.Observer, cfg.Transcript = &obs, &tr
	res, err := Run(t.Context(), cfg, "do the thing\n")
	if err != nil {
		t.Fatal(err)
	}
	if res.Final != "Added hello.txt." || len(obs.completed) != 4 || !strings.Contains(tr.String(), "turn.completed") {
		t.Errorf("got %+v, %d items", res, len(obs.completed))
	}
	if left, _ := os.ReadDir(cfg.TempDir); len(left) != 0 {
		t.Errorf("CODEX_HOME left behind: %v", left)
	}
}

func TestRunErrors(t *testing.T) {
	t.Run("NotFound", func(t *testing.T) {
		_, err := Run(t.Context(), testConfig(t, "/nonexistent/codex"), "x")
		var nf *NotFoundError
		if !errors.As(err, &nf) {
			t.Fatalf("got %v, want NotFoundError", err)
		}
	})
	t.Run("TurnFailed", func(t *testing.T) {
		bin := fakeCodex(t, `echo '{"type":"turn.failed","error":{"message":"stream closed before response.completed"}}'`+"\n")
		_, err := Run(t.Context(), testConfig(t, bin), "do the thing\n")
		var ee *ExitError
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), "stream closed before response.completed") {
			t.Fatalf("got %v, want an ExitError with codex's message", err)
		}
	})
	t.Run("ExitNonZero", func(t *testing.T) {
		bin := fakeCodex(t, "echo 'Error: config.toml: unknown field' >&2; exit 1\n")
		_, err := Run(t.Context(), testConfig(t, bin), "do the thing\n")
		var ee *ExitError
		if !errors.As(err, &ee) || ee.ExitCode != 1 || !strings.Contains(ee.Detail, "unknown field") {
			t.Fatalf("got %v, want exit 1 with stderr's tail", err)
		}
	})
	t.Run("Malformed", func(t *testing.T) {
		bin := fakeCodex(t, "echo 'not json'\n")
		_, err := Run(t.Context(), testConfig(t, bin), "do the thing\n")
		if err == nil || !strings.Contains(err.Error(), "codex output line 1: not a JSON event") {
			t.Fatalf("got %v, want the malformed line named", err)
		}
	})
	t.Run("UnreadableLineStopsCodex", func(t *testing.T) {
		// What codex does after a line its reader cannot read exactly is shown to no
		// Observer, so codex is stopped then, not left to run on unchecked.
		cfg := testConfig(t, fakeCodex(t, `echo '{"type":"item.started","Type":"x","item":{"id":"1","type":"command_execution","command":"id"}}'; exec sleep 30`+"\n"))
		start := time.Now()
		_, err := Run(t.Context(), cfg, "do the thing\n")
		if err == nil || !strings.Contains(err.Error(), `duplicate key "Type"`) || !strings.Contains(err.Error(), "codex was stopped") {
			t.Fatalf("got %v, want the unreadable line named and codex stopped", err)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("codex ran on for %s after an unreadable line", d)
		}
	})
	t.Run("Timeout", func(t *testing.T) {
		cfg := testConfig(t, fakeCodex(t, "sleep 30\n"))
		cfg.Timeout = 200 * time.Millisecond
		if _, err := Run(t.Context(), cfg, "do the thing\n"); !errors.Is(err, ErrTimedOut) {
			t.Fatalf("got %v, want ErrTimedOut", err)
		}
	})
}

// TestRunRealCodex runs the real Codex CLI against the Responses fake: the generated
// config passes --strict-config, codex sends the token as its bearer key to base_url +
// /responses, runs the scripted command, and its JSONL parses into items and usage.
func TestRunRealCodex(t *testing.T) {
	bin := realCodex(t)
	srv, err := responsestest.Start("relay-token", responsestest.Turns(
		responsestest.Exec("echo codex-was-here > proof.txt"),
		responsestest.Say("wrote proof.txt"),
	))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cfg := testConfig(t, bin)
	cfg.BaseURL = srv.URL
	cfg.SystemPrompt = "You are terse."
	var obs recorder
	cfg.Observer = &obs
	var stderr bytes.Buffer
	cfg.Stderr = &stderr
	res, err := Run(t.Context(), cfg, "write proof.txt")
	if err != nil {
		t.Fatalf("%v\nstderr: %s\nrequests: %s", err, stderr.String(), srv.Bodies())
	}
	if res.Final != "wrote proof.txt" || !res.Completed || res.Usage.InputTokens == 0 {
		t.Errorf("got %+v", res)
	}
	if b, err := os.ReadFile(filepath.Join(cfg.Dir, "proof.txt")); err != nil || string(b) != "codex-was-here\n" {
		t.Errorf("proof.txt = %q, %v", b, err)
	}
	var cmds []Item
	for _, it := range obs.completed {
		if it.Type == KindCommand {
			cmds = append(cmds, it)
		}
	}
	if len(obs.started) == 0 || len(cmds) != 1 || !strings.Contains(cmds[0].Command, "codex-was-here") || cmds[0].ExitCode == nil || *cmds[0].ExitCode != 0 {
		t.Errorf("got started %+v completed %+v, want the command seen before and after it ran", obs.started, obs.completed)
	}
	if !strings.Contains(srv.Bodies(), "You are terse.") {
		t.Errorf("the system prompt did not reach the model")
	}
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestRunRealCodexPatch: the real Codex CLI applies an apply_patch custom tool call from
// the Responses fake, and reports it as a file_change item naming the file, after it was
// applied; a patch of a file outside the working directory is applied too (codex's own
// sandbox is off), which is why the caller must check every file_change it sees.
func TestRunRealCodexPatch(t *testing.T) {
	bin := realCodex(t)
	outside := filepath.Join(t.TempDir(), "outside.txt")
	srv, err := responsestest.Start("relay-token", responsestest.Turns(
		responsestest.Patch("*** Begin Patch\n*** Add File: notes/hello.md\n+hello from a patch\n*** End Patch\n"),
		responsestest.Patch("*** Begin Patch\n*** Add File: "+outside+"\n+escaped\n*** End Patch\n"),
		responsestest.Say("patched"),
	))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cfg := testConfig(t, bin)
	cfg.BaseURL = srv.URL
	var obs recorder
	cfg.Observer = &obs
	var stderr bytes.Buffer
	cfg.Stderr = &stderr
	res, err := Run(t.Context(), cfg, "write notes")
	if err != nil {
		t.Fatalf("%v\nstderr: %s\nrequests: %s", err, stderr.String(), srv.Bodies())
	}
	if b, err := os.ReadFile(filepath.Join(cfg.Dir, "notes", "hello.md")); err != nil || string(b) != "hello from a patch\n" {
		t.Errorf("notes/hello.md = %q, %v; outputs %v", b, err, srv.Requests()[1].Outputs)
	}
	var changes []Change
	for _, it := range obs.completed {
		if it.Type == KindFileChange {
			changes = append(changes, it.Changes...)
		}
	}
	want := []Change{{Path: filepath.Join(cfg.Dir, "notes", "hello.md"), Kind: "add"}, {Path: outside, Kind: "add"}}
	if len(changes) != 2 || changes[0] != want[0] || changes[1] != want[1] {
		t.Errorf("file changes %+v, want %+v", changes, want)
	}
	if res.Final != "patched" {
		t.Errorf("final %q", res.Final)
	}
}
