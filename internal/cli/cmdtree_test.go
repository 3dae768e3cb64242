package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agora-dev/agora/internal/cli"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// commandTree returns every command below agora's root, depth first.
func commandTree(t *testing.T) []*cobra.Command {
	t.Helper()
	f := cli.NewFactory(&cmdutil.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard}, func(string) string { return "" })
	t.Cleanup(func() { f.Close() })
	var out []*cobra.Command
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			out = append(out, sub)
			walk(sub)
		}
	}
	walk(cli.NewRootCmd(f))
	return out
}

// argv is a command's path without "agora", as Run takes it.
func argv(c *cobra.Command, more ...string) []string {
	return append(strings.Fields(c.CommandPath())[1:], more...)
}

func localFlags(c *cobra.Command) []string {
	var names []string
	c.LocalNonPersistentFlags().VisitAll(func(fl *pflag.Flag) {
		if fl.Name != "help" {
			names = append(names, fl.Name)
		}
	})
	return names
}

// TestCommandTree_Help: every command says in one line what it does, and every command people
// run that takes flags shows how (Long or Example).
func TestCommandTree_Help(t *testing.T) {
	for _, c := range commandTree(t) {
		if c.Short == "" {
			t.Errorf("%s has no Short", c.CommandPath())
		}
		if c.Hidden || !c.Runnable() {
			continue
		}
		if flags := localFlags(c); len(flags) > 0 && c.Long == "" && c.Example == "" {
			t.Errorf("%s takes %v but has neither Long nor Example", c.CommandPath(), flags)
		}
	}
}

// TestCommandTree_BadUsageExits2: an unknown flag or too many arguments is a usage error
// (exit 2, with a hint naming the command's help) for every command, and opens nothing: no
// AGORA_HOME is created.
func TestCommandTree_BadUsageExits2(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"AGORA_HOME": filepath.Join(dir, "agora"), "HOME": dir, "USER": "tester"}
	for _, c := range commandTree(t) {
		if !c.Runnable() || c.DisableFlagParsing {
			continue // the worker's hook parses its own arguments: its exit codes are claude's
		}
		hint := "agora: hint: run '" + c.CommandPath() + " --help' for usage"
		for _, bad := range [][]string{{"--no-such-flag"}, {"a", "b", "c", "d", "e", "f"}} {
			r := runAgora(t, env, argv(c, bad...)...)
			if r.code != cmdutil.ExitUsage || !strings.Contains(r.stderr, hint) {
				t.Errorf("agora %s: exit %d, want %d with %q\n%s", strings.Join(argv(c, bad...), " "), r.code, cmdutil.ExitUsage, hint, r.stderr)
			}
		}
	}
	if _, err := os.Stat(env["AGORA_HOME"]); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a wrong command line created AGORA_HOME (%v)", err)
	}
}

// jsonRun is one command line of TestCommandTree_JSON.
type jsonRun struct {
	args []string
	code int // the exit code it must end with; -1: any (the host decides)
	// noJSON, when set, says why this command cannot print its JSON here; the run must
	// still get past parsing (no usage error).
	noJSON string
	// refused, when set, is what stderr says when the command refuses the request itself
	// (exit 2, nothing done): the row then proves -o json got past parsing by that message.
	refused string
	// lines: stdout is JSON lines (a stream), each line one JSON object.
	lines bool
}

// initRepo makes an empty git repository at dir, for a workspace.
func initRepo(t *testing.T, dir string) string {
	t.Helper()
	if out, err := exec.Command("git", "init", "-q", "-b", "main", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	return dir
}

// TestCommandTree_JSON runs every command that takes --output with -o json in one AGORA_HOME
// (a catalog, a dispatch denied before it starts, an orchestrator serving a run of it) and
// checks stdout is one valid JSON document. A command with --output missing from the table
// fails the test, so a new one gets a line here.
func TestCommandTree_JSON(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"AGORA_HOME": filepath.Join(dir, "agora"), "HOME": dir, "USER": "tester"}
	must := func(args ...string) string {
		t.Helper()
		r := runAgora(t, env, args...)
		if r.code != cmdutil.ExitOK {
			t.Fatalf("agora %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	capDir := filepath.Join(dir, "caps", "tools")
	writeFiles(t, map[string]string{
		filepath.Join(capDir, "capability.yaml"):  "commands: [\"sh -c *\"]\n",
		filepath.Join(dir, "agora-manifest.yaml"): "version: 1\ncapabilities:\n  - name: tools\n    from: caps/tools\n",
		filepath.Join(dir, "plan.yaml"):           "version: 1\nname: tree\ntasks:\n  - id: only\n    subagent: denied\n",
		filepath.Join(dir, "agents", "helper.md"): "---\nname: helper\ndescription: helps\ntools: Read\n---\nYou help.\n",
	})
	must("init")
	// Registered again below with -o json (unchanged then): the tree is walked in name order.
	must("capability", "register", "tools", "--from", capDir)
	must("subagent", "register", "lint", "--runtime", "exec", "--command", "sh -c 'make lint'", "--capability", "tools")
	must("env", "register", "ci", "--value", "LOG_LEVEL=debug")
	repo := initRepo(t, filepath.Join(dir, "repo"))
	must("workspace", "register", "app", "--repo", repo, "--revision", "main")
	must("subagent", "register", "denied", "--runtime", "exec", "--command", "sh -c 'echo hi'")
	r := runAgora(t, env, "dispatch", "run", "--subagent", "denied")
	if r.code != cmdutil.ExitWorkerFail || !strings.Contains(r.stderr, "denied") {
		t.Fatalf("a dispatch of a subagent granted nothing: exit %d, want %d (denied)\n%s", r.code, cmdutil.ExitWorkerFail, r.stderr)
	}
	id := strings.TrimSpace(r.stdout)
	must("audit", "export", "--out", filepath.Join(dir, "bundle.json"))
	stop := serveOrch(t, env)
	defer stop()
	run := must("orch", "submit", filepath.Join(dir, "plan.yaml"))
	must("orch", "schedule", "add", "kept", "--cron", "0 2 * * *", filepath.Join(dir, "plan.yaml"))
	if r := runAgora(t, env, "orch", "watch", run); r.code != cmdutil.ExitWorkerFail {
		t.Fatalf("orch watch %s: exit %d, want %d (the run of a denied task fails)\n%s", run, r.code, cmdutil.ExitWorkerFail, r.stderr)
	}

	runs := jsonRuns(dir, capDir, repo, id, run)
	for _, c := range commandTree(t) {
		if c.Flags().Lookup("output") == nil {
			continue
		}
		name := strings.Join(argv(c), " ")
		tt, ok := runs[name]
		if !ok {
			t.Errorf("agora %s takes --output but has no line in TestCommandTree_JSON", name)
			continue
		}
		delete(runs, name)
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			r := runAgora(t, env, argv(c, append(tt.args, "-o", "json")...)...)
			parsed := r.code != cmdutil.ExitUsage || (tt.refused != "" && strings.Contains(r.stderr, tt.refused))
			if !parsed || (tt.code >= 0 && r.code != tt.code) {
				t.Fatalf("exit %d, want %d\n%s", r.code, tt.code, r.stderr)
			}
			if tt.noJSON != "" {
				t.Logf("SKIP the JSON check: %s", tt.noJSON)
				return
			}
			if tt.lines {
				lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
				for i, l := range lines {
					if !json.Valid([]byte(l)) || !strings.HasPrefix(l, "{") {
						t.Fatalf("line %d of the stream is not one JSON object: %q", i+1, l)
					}
				}
				if !strings.HasPrefix(lines[0], `{"run":`) {
					t.Fatalf("the stream starts %q, want the run's state first", lines[0])
				}
				return
			}
			if !json.Valid([]byte(r.stdout)) { // one JSON value, nothing else but white space
				t.Fatalf("stdout is not one JSON document:\n%s", r.stdout)
			}
		})
	}
	for name := range runs {
		t.Errorf("TestCommandTree_JSON lists agora %s, which takes no --output", name)
	}
}

func writeFiles(t *testing.T, files map[string]string) {
	t.Helper()
	for path, content := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// serveOrch runs 'agora orch serve' in this process until the returned stop is called, and
// returns once it answers.
func serveOrch(t *testing.T, env map[string]string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	f := cli.NewFactory(&cmdutil.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.Discard}, func(k string) string { return env[k] })
	var wg sync.WaitGroup
	code := -1
	wg.Go(func() { code = cli.Run(ctx, f, []string{"orch", "serve"}) })
	stop = func() {
		cancel()
		wg.Wait()
		f.Close()
		if code != cmdutil.ExitOK {
			t.Errorf("orch serve: exit %d", code)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if r := runAgora(t, env, "orch", "runs"); r.code == cmdutil.ExitOK {
			return stop
		} else if time.Now().After(deadline) {
			stop()
			t.Fatalf("orch serve did not answer within 20s: %s", r.stderr)
		}
	}
}

// jsonRuns is TestCommandTree_JSON's table: how to run each command that takes --output.
func jsonRuns(dir, capDir, repo, id, run string) map[string]jsonRun {
	return map[string]jsonRun{
		"capability register":    {args: []string{"tools", "--from", capDir}},
		"capability list":        {},
		"capability show":        {args: []string{"tools"}},
		"capability history":     {args: []string{"tools"}},
		"capability suggest":     {args: []string{"--from", id}},
		"subagent register":      {args: []string{"lint", "--runtime", "exec", "--command", "sh -c 'make lint'", "--capability", "tools"}},
		"subagent assign":        {args: []string{"lint", "--capability", ""}},
		"subagent import":        {args: []string{filepath.Join(dir, "agents"), "--dry-run"}},
		"subagent list":          {},
		"subagent show":          {args: []string{"lint"}},
		"subagent history":       {args: []string{"lint"}},
		"env register":           {args: []string{"ci", "--value", "LOG_LEVEL=debug"}},
		"env list":               {},
		"env show":               {args: []string{"ci"}},
		"env history":            {args: []string{"ci"}},
		"workspace register":     {args: []string{"app", "--repo", repo, "--revision", "main"}},
		"workspace list":         {},
		"workspace show":         {args: []string{"app"}},
		"workspace history":      {args: []string{"app"}},
		"apply":                  {args: []string{"-f", filepath.Join(dir, "agora-manifest.yaml"), "--dry-run"}},
		"audit log":              {},
		"audit checkpoint":       {},
		"verify":                 {args: []string{filepath.Join(dir, "bundle.json")}},
		"dispatch run":           {args: []string{"--subagent", "denied"}, code: cmdutil.ExitWorkerFail},
		"dispatch resume":        {args: []string{id, "--answer", "yes"}, code: cmdutil.ExitUsage, refused: "only a dispatch that needs input can be resumed", noJSON: "resuming needs a dispatch that ended waiting for input, which needs a worker"},
		"dispatch describe":      {args: []string{id}},
		"dispatch list":          {},
		"dispatch outputs":       {args: []string{id}},
		"dispatch cancel":        {args: []string{id}},
		"dispatch approve":       {args: []string{id, "call_1"}, code: cmdutil.ExitError, noJSON: "deciding needs a call held by a running model dispatch, which needs a worker"},
		"dispatch deny":          {args: []string{id, "call_1", "--reason", "no"}, code: cmdutil.ExitError, noJSON: "deciding needs a call held by a running model dispatch, which needs a worker"},
		"dispatch approval list": {args: []string{id}},
		"dispatch approval show": {args: []string{id, "call_1"}, code: cmdutil.ExitError, noJSON: "a held call needs a running model dispatch, which needs a worker"},
		"orch runs":              {},
		"orch status":            {args: []string{run}},
		"orch validate":          {args: []string{filepath.Join(dir, "plan.yaml")}},
		"orch submit":            {args: []string{filepath.Join(dir, "plan.yaml")}},
		"orch watch":             {args: []string{run}, code: cmdutil.ExitWorkerFail, lines: true},
		"orch patches":           {args: []string{run, "--to", filepath.Join(dir, "patches")}},
		"orch schedule add":      {args: []string{"added", "--cron", "@daily", "--tz", "Europe/Berlin", filepath.Join(dir, "plan.yaml")}},
		"orch schedule list":     {},
		"orch schedule remove":   {args: []string{"added"}},
		"orch schedule show":     {args: []string{"kept"}},
		"doctor":                 {code: -1},
		"selftest":               {args: []string{"--list"}},
		"gc":                     {args: []string{"--dry-run"}},
		"restore":                {args: []string{"--to", filepath.Join(dir, "restored"), "--config", filepath.Join(dir, "none.yaml"), "--keys", filepath.Join(dir, "nokeys")}, code: cmdutil.ExitError, noJSON: "a restore needs a replica in object storage; internal/cli's restore tests run one against versitygw"},
		"version":                {},
	}
}
