package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// TestExitCodes_Table: README.md's exit-code table is the one 'agora --help'
// prints from exitcode.go, row for row, and the classes have the codes the issue settles.
func TestExitCodes_Table(t *testing.T) {
	r := runAgora(t, nil, "--help")
	help := map[int]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(\d+)  ([a-z ]+): (.+)$`).FindAllStringSubmatch(r.stdout, -1) {
		code, _ := strconv.Atoi(m[1])
		help[code] = m[2] + ": " + m[3]
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := map[int]string{}
	for _, m := range regexp.MustCompile(`(?m)^\| (\d+) \| ([a-z ]+) \| (.+) \|$`).FindAllStringSubmatch(string(readme), -1) {
		code, _ := strconv.Atoi(m[1])
		doc[code] = m[2] + ": " + m[3]
	}
	want := map[int]string{cmdutil.ExitOK: "ok", cmdutil.ExitError: "error", cmdutil.ExitUsage: "usage", cmdutil.ExitWorkerFail: "worker failed",
		cmdutil.ExitNeedsInput: "needs input", cmdutil.ExitCheckFailed: "check failed", cmdutil.ExitNotFound: "not found",
		cmdutil.ExitInvalid: "invalid input", cmdutil.ExitInterrupted: "interrupted"}
	if len(help) != len(want) || len(doc) != len(want) {
		t.Fatalf("agora --help lists %d codes, README.md %d, want %d\nhelp: %v\nREADME: %v", len(help), len(doc), len(want), help, doc)
	}
	for code, class := range want {
		if !strings.HasPrefix(help[code], class+": ") {
			t.Errorf("agora --help: %d is %q, want class %q", code, help[code], class)
		}
		if doc[code] != help[code] {
			t.Errorf("README.md says %d is %q; agora --help says %q", code, doc[code], help[code])
		}
	}
	if cmdutil.ExitUsage != 2 || cmdutil.ExitWorkerFail != 3 || cmdutil.ExitNeedsInput != 4 || cmdutil.ExitCheckFailed != 5 || cmdutil.ExitNotFound != 6 || cmdutil.ExitInvalid != 7 {
		t.Errorf("a documented exit code moved")
	}
}

// classRun is one command line of TestCommandTree_ErrorClasses and the class it must end in.
type classRun struct {
	args []string
	code int
	want string // stderr's first line, after "agora: error: "
}

// lookupWords are the arguments that name something to look up: a command taking one must have
// a not-found line in TestCommandTree_ErrorClasses, unless it makes what it names.
var lookupWords = regexp.MustCompile(`(^| )(NAME|ID|RUN)(\[| |$)`)

// makesWhatItNames are the commands whose NAME is new, not looked up.
var makesWhatItNames = map[string]bool{
	"capability register": true, "subagent register": true, "env register": true,
	"workspace register": true, "orch schedule add": true,
}

// dropDeclined removes the line a command prints when serve declined its hand-off.
func dropDeclined(stderr string) string {
	if first, rest, ok := strings.Cut(stderr, "\n"); ok && strings.Contains(first, ") declined this dispatch (") {
		return rest
	}
	return stderr
}

// TestCommandTree_ErrorClasses: every error class has its exit code on every
// command. Each command that looks a name or id up refuses an unknown one with exit 6 and
// the one wording, `KIND "ID" not found` (the tree walk fails on a command with no line here);
// bad input (a manifest, a plan, a capability, a subagent file) exits 7 on every command that
// reads it. Usage (2) and a missing home (2) have their own walks.
func TestCommandTree_ErrorClasses(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"AGORA_HOME": filepath.Join(dir, "agora"), "HOME": dir, "USER": "tester"}
	writeFiles(t, map[string]string{
		filepath.Join(dir, "caps", "tools", "capability.yaml"): "commands: [\"sh -c *\"]\n",
		filepath.Join(dir, "badcap", "capability.yaml"):        "commands: [\n",
		filepath.Join(dir, "bad-manifest.yaml"):                "version: 1\ncapabilities: [\n",
		filepath.Join(dir, "bad-sub.yaml"):                     "runtime: exec\nbogus: 1\n",
		filepath.Join(dir, "plan.yaml"):                        "version: 1\nname: tree\ntasks:\n  - id: only\n    subagent: denied\n",
		filepath.Join(dir, "bad-plan.yaml"):                    "version: 1\nname: bad\ntasks:\n  - id: a\n    subagent: denied\n    bogus: 1\n",
		filepath.Join(dir, "unknown-plan.yaml"):                "version: 1\nname: unknown\ntasks:\n  - id: a\n    subagent: nobody\n",
	})
	must := func(args ...string) string {
		t.Helper()
		r := runAgora(t, env, args...)
		if r.code != cmdutil.ExitOK {
			t.Fatalf("agora %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	initRepo(t, filepath.Join(dir, "repo"))
	must("init")
	must("capability", "register", "tools", "--from", filepath.Join(dir, "caps", "tools"))
	must("subagent", "register", "denied", "--runtime", "exec", "--command", "sh -c 'echo hi'")
	stop := serveOrch(t, env)
	defer stop()
	run := must("orch", "submit", filepath.Join(dir, "plan.yaml"))
	runAgora(t, env, "orch", "watch", run) // the run of a denied task fails; it is there to name

	notFound := notFoundRuns(dir, run)
	for _, c := range commandTree(t) {
		name := strings.Join(argv(c), " ")
		if c.Runnable() && lookupWords.MatchString(c.Use) && !makesWhatItNames[name] && notFound[name] == nil {
			t.Errorf("agora %s looks up %q but has no not-found line in TestCommandTree_ErrorClasses", name, c.Use)
		}
	}
	invalid := invalidRuns(dir)
	check := func(code int, rows map[string][]classRun) {
		for name, runs := range rows {
			for _, tt := range runs {
				args := append(strings.Fields(name), tt.args...)
				r := runAgora(t, env, args...)
				// runAgora runs the command in this process, which serve's hand-off declines (no
				// person's `agora dispatch run`): the line that says so comes first.
				first, _, _ := strings.Cut(dropDeclined(r.stderr), "\n")
				if r.code != code || !strings.Contains(first, tt.want) {
					t.Errorf("agora %s: exit %d, want %d with %q\n%s", strings.Join(args, " "), r.code, code, tt.want, r.stderr)
				}
				if strings.Contains(r.stderr, "for usage") {
					t.Errorf("agora %s: not a wrong command line, yet the hint sends to --help:\n%s", strings.Join(args, " "), r.stderr)
				}
			}
		}
	}
	check(cmdutil.ExitNotFound, notFound)
	check(cmdutil.ExitInvalid, invalid)
}

// nf is the one wording of a name that names nothing.
func nf(kind, id string) string { return kind + ` "` + id + `" not found` }

// notFoundRuns is TestCommandTree_ErrorClasses's not-found table: each command that looks a
// name or id up, run with one that names nothing (run is a run of the plan's task "only").
func notFoundRuns(dir, run string) map[string][]classRun {
	return map[string][]classRun{
		"capability show":        {{args: []string{"nope"}, want: nf("capability", "nope") + "; known: tools"}},
		"capability history":     {{args: []string{"nope"}, want: nf("capability", "nope") + "; known: tools"}},
		"subagent show":          {{args: []string{"nope"}, want: nf("subagent", "nope") + "; known: denied"}},
		"subagent history":       {{args: []string{"nope"}, want: nf("subagent", "nope") + "; known: denied"}},
		"subagent assign":        {{args: []string{"nope", "--capability", "tools"}, want: nf("subagent", "nope")}},
		"env show":               {{args: []string{"nope"}, want: nf("env bundle", "nope")}},
		"env history":            {{args: []string{"nope"}, want: nf("env bundle", "nope")}},
		"workspace show":         {{args: []string{"nope"}, want: nf("workspace", "nope")}},
		"workspace history":      {{args: []string{"nope"}, want: nf("workspace", "nope")}},
		"dispatch describe":      {{args: []string{"NOPE"}, want: nf("dispatch", "NOPE")}},
		"dispatch cancel":        {{args: []string{"NOPE"}, want: nf("dispatch", "NOPE")}},
		"dispatch logs":          {{args: []string{"NOPE"}, want: nf("dispatch", "NOPE")}},
		"dispatch outputs":       {{args: []string{"NOPE", "--to", filepath.Join(dir, "out")}, want: nf("dispatch", "NOPE")}},
		"dispatch patch":         {{args: []string{"NOPE"}, want: nf("dispatch", "NOPE")}},
		"dispatch resume":        {{args: []string{"NOPE", "--answer", "yes"}, want: nf("dispatch", "NOPE")}},
		"dispatch supervise":     {{args: []string{"NOPE"}, want: nf("dispatch", "NOPE")}},
		"dispatch approve":       {{args: []string{"NOPE", "call_1"}, want: nf("dispatch", "NOPE")}},
		"dispatch deny":          {{args: []string{"NOPE", "call_1", "--reason", "no"}, want: nf("dispatch", "NOPE")}},
		"dispatch approval list": {{args: []string{"NOPE"}, want: nf("dispatch", "NOPE")}},
		"dispatch approval show": {{args: []string{"NOPE", "call_1"}, want: nf("dispatch", "NOPE")}},
		"dispatch run": {
			{args: []string{"--subagent", "nope"}, want: nf("subagent", "nope") + "; known: denied"},
			{args: []string{"--subagent", "denied", "--target", "nope"}, want: nf("target", "nope") + "; known: local (targets are set in agora.yaml)"},
			{args: []string{"--subagent", "denied", "--repo", filepath.Join(dir, "repo") + "@nope"}, want: nf("revision", "nope") + " in repository " + filepath.Join(dir, "repo")},
		},
		"orch status":  {{args: []string{"nope"}, want: nf("run", "nope")}},
		"orch watch":   {{args: []string{"nope"}, want: nf("run", "nope")}},
		"orch seal":    {{args: []string{"nope"}, want: nf("run", "nope")}},
		"orch patches": {{args: []string{"nope", "--to", filepath.Join(dir, "patches")}, want: nf("run", "nope")}},
		"orch audit":   {{args: []string{"nope", "--out", filepath.Join(dir, "run.json")}, want: nf("run", "nope")}},
		"orch cancel": {
			{args: []string{"nope"}, want: nf("run", "nope")},
			{args: []string{run, "--task", "zz"}, want: nf("task", "zz") + " in run " + run + "; known: only"},
		},
		"orch answer": {
			{args: []string{"nope", "only", "--answer", "yes"}, want: nf("run", "nope")},
			{args: []string{run, "zz", "--answer", "yes"}, want: nf("task", "zz") + " in run " + run + "; known: only"},
		},
		"orch retry": {
			{args: []string{"nope", "only"}, want: nf("run", "nope")},
			{args: []string{run, "zz"}, want: nf("task", "zz") + " in run " + run + "; known: only"},
		},
		"orch schedule show":   {{args: []string{"nope"}, want: nf("schedule", "nope")}},
		"orch schedule remove": {{args: []string{"nope"}, want: nf("schedule", "nope")}},
	}
}

// invalidRuns is TestCommandTree_ErrorClasses's invalid-input table: each command that reads a
// file, given a malformed or invalid one.
func invalidRuns(dir string) map[string][]classRun {
	return map[string][]classRun{
		"apply":               {{args: []string{"-f", filepath.Join(dir, "bad-manifest.yaml")}, want: "bad-manifest.yaml:2: invalid YAML"}},
		"capability register": {{args: []string{"x", "--from", filepath.Join(dir, "badcap")}, want: "capability.yaml:1: invalid YAML"}},
		"subagent register":   {{args: []string{"x", "--from", filepath.Join(dir, "bad-sub.yaml")}, want: `bad-sub.yaml:2: bogus: unknown field "bogus"`}},
		"orch validate": {
			{args: []string{filepath.Join(dir, "bad-plan.yaml")}, want: `bad-plan.yaml:6: tasks[0].bogus: unknown field "bogus"`},
			{args: []string{filepath.Join(dir, "unknown-plan.yaml")}, want: `unknown-plan.yaml:5: tasks[0].subagent: ` + nf("subagent", "nobody")},
		},
		"orch submit": {
			{args: []string{filepath.Join(dir, "bad-plan.yaml")}, want: `bad-plan.yaml:6: tasks[0].bogus: unknown field "bogus"`},
			{args: []string{filepath.Join(dir, "unknown-plan.yaml")}, want: `unknown-plan.yaml:5: tasks[0].subagent: ` + nf("subagent", "nobody")},
		},
		"orch schedule add": {{args: []string{"s", "--cron", "@daily", filepath.Join(dir, "bad-plan.yaml")}, want: `bad-plan.yaml:6: tasks[0].bogus`}},
		// A secret's source that is not there is input the command read (it exited 1).
		"env register": {
			{args: []string{"e", "--secret", "K=env:AGORA_TEST_UNSET_VARIABLE"}, want: "--secret K=env:AGORA_TEST_UNSET_VARIABLE: the environment variable AGORA_TEST_UNSET_VARIABLE is unset or empty"},
			{args: []string{"e", "--secret", "K=file:" + filepath.Join(dir, "no-such-secret")}, want: "--secret K=file:" + filepath.Join(dir, "no-such-secret")},
		},
	}
}
