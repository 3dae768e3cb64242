package codexadapter

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/modelgw"
	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/runtime/codexrt"
	"github.com/agora-dev/agora/internal/runtime/codexrt/responsestest"
	"github.com/agora-dev/agora/internal/secret/redact"
	"github.com/agora-dev/agora/internal/shellwords"
)

// realCodexBinary is the real Codex CLI: AGORA_TEST_CODEX, else the one scripts/agent-clis.sh
// installs in .cache/npm; the test skips, saying so, without either.
func realCodexBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv("AGORA_TEST_CODEX")
	if p == "" {
		p = filepath.Join("..", "..", "..", "..", ".cache", "npm", "node_modules", ".bin", "codex")
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

// startedCommands is a codexrt.Observer keeping the commands codex reports as it starts them.
type startedCommands struct {
	mu    sync.Mutex
	lines []string
}

func (s *startedCommands) Started(it codexrt.Item) {
	if it.Type == codexrt.KindCommand {
		s.mu.Lock()
		s.lines = append(s.lines, it.Command)
		s.mu.Unlock()
	}
}

func (s *startedCommands) Completed(codexrt.Item) {}

// codexScripts are scripts a model sends codex: every quoting Codex's display of a command
// has to choose between (single quotes, double quotes with escapes, characters only one of
// them may hold). Each is harmless when it runs.
var codexScripts = []string{
	`printf '%s\n' 'LINE' > NOTES.md && cat NOTES.md`,
	`git status`,
	`: 'a"b' "c'd"`,
	`: "it's" \$HOME '$(id)' "\` + "`x\\`" + `"`,
	`: '!' "!" ^x 'tab	here'`,
	`: 'é ü 日本 ✓'`,
	`: a\\b "c\\d" 'e\f'`,
	": line1\n: line2",
	`^: x`,
	`echo unbalanced 'quote`,
	`: "$(printf safe)"`,
	`: ''`,
	`:    spaced   out  `,
	`: "\""`,
	": a\rb",
	`touch 'it'"'"'s.txt'`,
}

// TestCodexChecks_AgreeOnEveryScript_RealCLI, against the real Codex CLI:
// for every script, the command line Codex reports as it starts it reads back, by the one
// parser (shellwords), as exactly the shell running the model's script, and the relay's check
// (precheck, on the model's arguments) and the check of what codex started (command, on that
// line) decide it alike under every grant: "bash -lc *" allows every one. Before the fix
// Codex's double-quoted form of a script holding a single quote read as nothing, so "bash
// -lc *" allowed it at the relay and refused it once it had run.
func TestCodexChecks_AgreeOnEveryScript_RealCLI(t *testing.T) {
	codex := realCodexBinary(t)
	var replies []responsestest.Reply
	for _, s := range codexScripts {
		replies = append(replies, responsestest.Exec(s))
	}
	replies = append(replies, responsestest.Say("done"))
	fake, err := responsestest.Start("", responsestest.Turns(replies...))
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}
	var seen startedCommands
	if _, err := codexrt.Run(t.Context(), codexrt.Config{Binary: codex, Model: "gpt-5.5", BaseURL: fake.URL, Token: "t",
		Dir: t.TempDir(), Env: env, Timeout: 3 * time.Minute, TempDir: t.TempDir(), Observer: &seen}, "run them"); err != nil {
		t.Fatalf("codex: %v", err)
	}
	if len(seen.lines) != len(codexScripts) {
		t.Fatalf("codex started %d commands, want %d: %q", len(seen.lines), len(codexScripts), seen.lines)
	}
	a := &memAuditor{}
	gw := agentrun.DialGateway(startGatewayAt(t, a, fake.URL))
	defer gw.Close()
	for i, script := range codexScripts {
		line := seen.lines[i]
		argv, err := shellwords.Split(line)
		if err != nil || len(argv) != 3 || !codexrt.SystemShell(argv[0]) || argv[1] != "-lc" || argv[2] != script {
			t.Errorf("codex reports %q for the script %q; it reads as %q (%v)", line, script, argv, err)
			continue
		}
		for j, grants := range []grant.Set{
			{Tools: []string{"run_command"}, Commands: []string{"bash -lc *"}},
			{Tools: []string{"run_command"}, Commands: []string{"git status", ": **", "printf **", "touch *"}},
			{Tools: []string{"run_command"}},
		} {
			audit := &codexAudit{ctx: t.Context(), gw: gw, red: redact.New(nil), dir: t.TempDir(), seen: map[string]bool{},
				shell: argv[0], grants: grants, stop: func(error) {}}
			pre := audit.precheck(modelCall{ID: "call_1", Tool: codexExecTool, Exec: &execArgs{Cmd: &script}}) == nil
			audit.command(fmt.Sprintf("item_%d_%d", i, j), line) // the gateway takes one report per call id
			started := audit.failed() == nil
			if pre != started {
				t.Errorf("grant %q: the relay says %v and the check of what codex started says %v for %q (codex: %q)", grants.Commands, pre, started, script, line)
			}
			if slices.Contains(grants.Commands, "bash -lc *") && !started {
				t.Errorf(`"bash -lc *" does not allow %q as codex reports it: %q`, script, line)
			}
		}
	}
}

// TestCodexAudit_RelayBypassed_RealCLI: when codex starts a command agora's relay never saw
// (here codex talks to the model directly, so nothing was judged before it ran), the check of
// what codex started records it as what it was: ran-outside-grant, never denied, and stops
// codex. Before the fix it was recorded "exec_command denied" although it had run.
func TestCodexAudit_RelayBypassed_RealCLI(t *testing.T) {
	codex := realCodexBinary(t)
	fake, err := responsestest.Start("", responsestest.Turns(
		responsestest.Exec("echo PWNED > pwned.txt; sleep 30"),
		responsestest.Say("done")))
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	a := &memAuditor{}
	gw := agentrun.DialGateway(startGatewayAt(t, a, fake.URL))
	defer gw.Close()
	ctx, stop := context.WithCancelCause(t.Context())
	defer stop(nil)
	dir := t.TempDir()
	audit := &codexAudit{ctx: t.Context(), gw: gw, red: redact.New(nil), dir: dir, seen: map[string]bool{},
		shell: "/usr/bin/bash", stop: stop,
		grants: grant.Set{Tools: []string{"run_command"}, Commands: []string{"git status"}}}
	start := time.Now()
	_, err = codexrt.Run(ctx, codexrt.Config{Binary: codex, Model: "gpt-5.5", BaseURL: fake.URL, Token: "t",
		Dir: dir, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}, Timeout: 2 * time.Minute, TempDir: t.TempDir(), Observer: audit}, "go")
	if err == nil || time.Since(start) > 25*time.Second {
		t.Errorf("codex was not stopped: %v after %s", err, time.Since(start))
	}
	if f := audit.failed(); f == nil || !strings.Contains(f.Error(), "outside the grant") {
		t.Errorf("failure = %v, want the command named outside the grant", f)
	}
	calls := a.Calls()
	if len(calls) != 1 || !strings.HasPrefix(calls[0], "exec_command "+modelgw.DecisionRanOutsideGrant+" ") {
		t.Errorf("tool.call records %q, want one exec_command ran-outside-grant", calls)
	}
	for _, c := range calls {
		if strings.Contains(c, " denied ") {
			t.Errorf("a command codex started is recorded denied: %q", c)
		}
	}
	if decisionRanOutsideGrant != modelgw.DecisionRanOutsideGrant {
		t.Errorf("the worker reports %q, the gateway accepts %q", decisionRanOutsideGrant, modelgw.DecisionRanOutsideGrant)
	}
}
