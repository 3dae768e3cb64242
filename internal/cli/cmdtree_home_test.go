package cli_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// missingHomeArgs is how each command that needs arguments is run by
// TestCommandTree_MissingHome: a command line that parses and validates, so the only thing
// wrong is the home. A command not listed runs bare.
func missingHomeArgs(dir string) map[string][]string {
	capDir := filepath.Join(dir, "caps", "tools")
	plan := filepath.Join(dir, "plan.yaml")
	return map[string][]string{
		"apply":                  {"-f", filepath.Join(dir, "agora-manifest.yaml")},
		"audit export":           {"--out", filepath.Join(dir, "bundle.json")},
		"capability history":     {"tools"},
		"capability register":    {"tools", "--from", capDir},
		"capability show":        {"tools"},
		"capability suggest":     {"--from", "d-1"},
		"dispatch approval list": {"d-1"},
		"dispatch approval show": {"d-1", "call_1"},
		"dispatch approve":       {"d-1", "call_1"},
		"dispatch cancel":        {"d-1"},
		"dispatch deny":          {"d-1", "call_1", "--reason", "no"},
		"dispatch describe":      {"d-1"},
		"dispatch logs":          {"d-1"},
		"dispatch outputs":       {"d-1", "--to", filepath.Join(dir, "out")},
		"dispatch patch":         {"d-1"},
		"dispatch resume":        {"d-1", "--answer", "yes"},
		"dispatch run":           {"--subagent", "lint"},
		"dispatch supervise":     {"d-1"},
		"env history":            {"ci"},
		"env register":           {"ci", "--value", "LOG_LEVEL=debug"},
		"env show":               {"ci"},
		"orch answer":            {"r-1", "t", "--answer", "yes"},
		"orch audit":             {"r-1", "--out", filepath.Join(dir, "run.json")},
		"orch cancel":            {"r-1"},
		"orch patches":           {"r-1", "--to", filepath.Join(dir, "patches")},
		"orch retry":             {"r-1", "t"},
		"orch schedule add":      {"nightly", "--cron", "@daily", plan},
		"orch schedule remove":   {"nightly"},
		"orch schedule show":     {"nightly"},
		"orch seal":              {"r-1"},
		"orch submit":            {plan},
		"orch validate":          {plan},
		"orch watch":             {"r-1"},
		"subagent assign":        {"lint", "--capability", "tools"},
		"subagent history":       {"lint"},
		"subagent import":        {filepath.Join(dir, "agents")},
		"subagent register":      {"lint", "--runtime", "exec", "--command", "make lint"},
		"subagent show":          {"lint"},
		"verify":                 {filepath.Join(dir, "bundle.json")},
		"workspace history":      {"app"},
		"workspace register":     {"app", "--repo", filepath.Join(dir, "repo"), "--revision", "main"},
		"workspace show":         {"app"},
	}
}

// TestCommandTree_MissingHome: only 'agora init' creates a home. Every other
// command (agora mcp too: it serves the refusal to its client, then exits with it), run with a command line that is right and an AGORA_HOME that does not exist (a
// mistyped path), refuses with exit 2, naming the path and 'agora init', and leaves the path
// absent: no directory, no agora.db. The few commands that need no home (homeFree) run
// without creating one either. A directory that is not an initialised home is refused the same
// way and left as it was.
func TestCommandTree_MissingHome(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, map[string]string{
		filepath.Join(dir, "caps", "tools", "capability.yaml"): "commands: [\"sh -c *\"]\n",
		filepath.Join(dir, "agora-manifest.yaml"):              "version: 1\ncapabilities:\n  - name: tools\n    from: caps/tools\n",
		filepath.Join(dir, "plan.yaml"):                        "version: 1\nname: tree\ntasks:\n  - id: only\n    subagent: lint\n",
		filepath.Join(dir, "agents", "helper.md"):              "---\nname: helper\ndescription: helps\ntools: Read\n---\nYou help.\n",
		filepath.Join(dir, "bundle.json"):                      "{}\n",
	})
	initRepo(t, filepath.Join(dir, "repo"))
	free := map[string]bool{"init": true, "version": true, "help": true, "completion": true, "doctor": true, "verify": true, "orch validate": true, "restore": true}
	args := missingHomeArgs(dir)
	for _, homeDir := range []string{"mian", "empty", "file"} {
		agoraHome := filepath.Join(dir, homeDir)
		switch homeDir {
		case "empty":
			if err := os.Mkdir(agoraHome, 0o700); err != nil {
				t.Fatal(err)
			}
		case "file": // AGORA_HOME set to a file: the same refusal (it exited 1 with a stat error)
			if err := os.WriteFile(agoraHome, []byte("not a home\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		env := map[string]string{"AGORA_HOME": agoraHome, "HOME": dir, "USER": "tester"}
		for _, c := range commandTree(t) {
			name := strings.Join(argv(c), " ")
			if !c.Runnable() || c.HasSubCommands() || name == "init" || c.DisableFlagParsing {
				continue
			}
			r := runAgora(t, env, argv(c, args[name]...)...)
			switch {
			case free[name]:
				if strings.Contains(r.stderr, "agora init") {
					t.Errorf("agora %s needs no home but refused a missing one:\n%s", name, r.stderr)
				}
			case r.code != cmdutil.ExitUsage || !strings.Contains(r.stderr, agoraHome) || !strings.Contains(r.stderr, "agora init'"):
				t.Errorf("AGORA_HOME=%s agora %s: exit %d, want %d naming the home and 'agora init'\n%s", homeDir, name, r.code, cmdutil.ExitUsage, r.stderr)
			case strings.Contains(r.stderr, "for usage"):
				t.Errorf("agora %s: a missing home is not a wrong command line, yet the hint sends to --help:\n%s", name, r.stderr)
			}
			if homeDir == "mian" {
				if _, err := os.Stat(agoraHome); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("agora %s created the missing AGORA_HOME %s (%v)", name, agoraHome, err)
				}
				continue
			}
			if homeDir == "file" {
				if b, err := os.ReadFile(agoraHome); err != nil || string(b) != "not a home\n" {
					t.Fatalf("agora %s changed the file AGORA_HOME names (%q, %v)", name, b, err)
				}
				continue
			}
			if ents, _ := os.ReadDir(agoraHome); len(ents) != 0 {
				t.Fatalf("agora %s wrote %s into an uninitialised AGORA_HOME", ents[0].Name(), name)
			}
		}
	}
	// agora mcp --http is started by an operator, who reads its refusal: with a missing home it
	// does not start, binds nothing and creates nothing.
	httpEnv := map[string]string{"AGORA_HOME": filepath.Join(dir, "mian"), "HOME": dir, "USER": "tester",
		"AGORA_HTTP_TOKEN": strings.Repeat("t0ken", 8)}
	if r := runAgora(t, httpEnv, "mcp", "--http", "127.0.0.1:0"); r.code != cmdutil.ExitUsage || !strings.Contains(r.stderr, "AGORA_HOME="+httpEnv["AGORA_HOME"]+" agora init") {
		t.Errorf("agora mcp --http with a missing home: exit %d, want %d naming 'agora init'\n%s", r.code, cmdutil.ExitUsage, r.stderr)
	}
	if _, err := os.Stat(httpEnv["AGORA_HOME"]); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("agora mcp --http created the missing AGORA_HOME (%v)", err)
	}
	// The one command that creates a home does.
	env := map[string]string{"AGORA_HOME": filepath.Join(dir, "mian"), "HOME": dir, "USER": "tester"}
	if r := runAgora(t, env, "init"); r.code != cmdutil.ExitOK {
		t.Fatalf("init: exit %d\n%s", r.code, r.stderr)
	}
	if r := runAgora(t, env, "subagent", "list"); r.code != cmdutil.ExitOK {
		t.Fatalf("subagent list after init: exit %d\n%s", r.code, r.stderr)
	}
}
