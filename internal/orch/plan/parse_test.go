package plan_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/strictyaml"
)

// ignorePos leaves out the positions a parsed plan keeps for Check's messages.
var ignorePos = cmpopts.IgnoreUnexported(plan.Plan{})

const fullPlan = `# every field
version: 1
name: nightly-fixes
concurrency: 8
defaults:
  target: local
  env: [base]
  timeout: 10m
  retry: {max_attempts: 3, initial_backoff: 2s}
tasks:
  - id: lint
    subagent: fixer
    locks: [repo, {name: db, mode: shared}, {name: cache}]
    input:
      goal: fix lint
      files: [a.go, b.go]
      budget: 3
      strict: true
      none: null
  - id: test
    subagent: fixer@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
    env: [base, extra]
    target: big
    depends_on: [lint]
    needs:
      fixes: {from: lint, select: patch}
      report: {from: lint, select: "output:reports/lint.txt"}
      all: {from: lint, select: outputs}
    retry: {max_attempts: 5, multiplier: 1.5, max_backoff: 1m, on_worker_failed: false}
    timeout: 15m
  - id: docs
    subagent: writer
    env: []
`

func mustParse(t testing.TB, src string) *plan.Plan {
	t.Helper()
	p, err := plan.Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

func TestParse_Valid(t *testing.T) {
	p := mustParse(t, fullPlan)
	no := false
	want := &plan.Plan{
		Version:     1,
		Name:        "nightly-fixes",
		Concurrency: 8,
		Defaults: plan.Defaults{
			Target:  "local",
			Env:     []string{"base"},
			Timeout: 10 * time.Minute,
			Retry:   &plan.Retry{MaxAttempts: 3, InitialBackoff: 2 * time.Second},
		},
		Tasks: []plan.Task{
			{
				ID:       "lint",
				Subagent: "fixer",
				Input:    json.RawMessage(`{"budget":3,"files":["a.go","b.go"],"goal":"fix lint","none":null,"strict":true}`),
				Locks: []plan.Lock{
					{Name: "repo", Mode: plan.LockExclusive},
					{Name: "db", Mode: plan.LockShared},
					{Name: "cache", Mode: plan.LockExclusive},
				},
			},
			{
				ID:        "test",
				Subagent:  "fixer@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
				Env:       []string{"base", "extra"},
				Target:    "big",
				DependsOn: []string{"lint"},
				Rare: &plan.TaskRare{
					Needs: map[string]plan.Need{
						"fixes":  {From: "lint", Select: "patch"},
						"report": {From: "lint", Select: "output:reports/lint.txt"},
						"all":    {From: "lint", Select: "outputs"},
					},
					Retry:   &plan.Retry{MaxAttempts: 5, Multiplier: 1.5, MaxBackoff: time.Minute, OnWorkerFailed: &no},
					Timeout: 15 * time.Minute,
				},
			},
			{ID: "docs", Subagent: "writer", Env: []string{}},
		},
	}
	if diff := cmp.Diff(want, p, ignorePos); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
}

func TestParse_Normalises(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want *plan.Plan
	}{
		{
			name: "concurrency defaults to 4",
			src:  "version: 1\nname: p\ntasks: [{id: a, subagent: s}]\n",
			want: &plan.Plan{Version: 1, Name: "p", Concurrency: plan.DefaultConcurrency, Tasks: []plan.Task{{ID: "a", Subagent: "s"}}},
		},
		{
			name: "empty lists and blocks are left out",
			src: "version: 1\nname: p\ndefaults: {env: [], retry: {}}\n" +
				"tasks: [{id: a, subagent: s, depends_on: [], needs: {}, locks: [], retry: {}, target: ''}]\n",
			want: &plan.Plan{Version: 1, Name: "p", Concurrency: 4, Tasks: []plan.Task{{ID: "a", Subagent: "s"}}},
		},
		{
			name: "an empty env on a task is kept: it overrides the defaults",
			src:  "version: 1\nname: p\ndefaults: {env: [base]}\ntasks: [{id: a, subagent: s, env: []}]\n",
			want: &plan.Plan{Version: 1, Name: "p", Concurrency: 4, Defaults: plan.Defaults{Env: []string{"base"}},
				Tasks: []plan.Task{{ID: "a", Subagent: "s", Env: []string{}}}},
		},
		{
			name: "null input is no input",
			src:  "version: 1\nname: p\ntasks: [{id: a, subagent: s, input: null}]\n",
			want: &plan.Plan{Version: 1, Name: "p", Concurrency: 4, Tasks: []plan.Task{{ID: "a", Subagent: "s"}}},
		},
		{
			name: "integral floats in input become integers",
			src:  `{"version": 1, "name": "p", "tasks": [{"id": "a", "subagent": "s", "input": {"n": 3.0, "m": -0.0}}]}`,
			want: &plan.Plan{Version: 1, Name: "p", Concurrency: 4,
				Tasks: []plan.Task{{ID: "a", Subagent: "s", Input: json.RawMessage(`{"m":0,"n":3}`)}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, mustParse(t, tt.src), ignorePos); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

// head is the start of a valid plan; tasks follow from line 4.
const head = "version: 1\nname: p\ntasks:\n"

func TestParse_Errors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"empty document", "", []string{
			"p.yaml: version: required; this format is version 1",
			"p.yaml: name: required",
			"p.yaml: tasks: required; a plan has at least one task",
		}},
		{"not a mapping", "just text", []string{
			`p.yaml:1: want a mapping, got "just text"`,
		}},
		{"invalid YAML", "version: 1\nname: [p\n", []string{
			"p.yaml:1: invalid YAML: did not find expected ',' or ']'",
		}},
		{"unsupported version", "version: 2\nname: p\ntasks: [{id: a, subagent: s}]", []string{
			"p.yaml:1: version: unsupported version 2; want 1",
		}},
		{"bad name", "version: 1\nname: Nightly\ntasks: [{id: a, subagent: s}]", []string{
			`p.yaml:2: name: invalid plan name "Nightly": use 1-63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit`,
		}},
		{"name too long", "version: 1\nname: " + strings.Repeat("n", 64) + "\ntasks: [{id: a, subagent: s}]", []string{
			`p.yaml:2: name: invalid plan name "` + strings.Repeat("n", 64) + `": use 1-63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit`,
		}},
		{"concurrency zero", "version: 1\nname: p\nconcurrency: 0\ntasks: [{id: a, subagent: s}]", []string{
			"p.yaml:3: concurrency: want 1 to 1024, got 0",
		}},
		{"concurrency too high", "version: 1\nname: p\nconcurrency: 1025\ntasks: [{id: a, subagent: s}]", []string{
			"p.yaml:3: concurrency: want 1 to 1024, got 1025",
		}},
		{"no tasks", "version: 1\nname: p\ntasks: []", []string{
			"p.yaml:3: tasks: required; a plan has at least one task",
		}},
		{"unknown field", head + "  - {id: a, subagent: s, subagnet: t}", []string{
			"p.yaml:4: tasks[0].subagnet: unknown field \"subagnet\"; known fields: base, budget, depends_on, env, fan_out, grants, id, input, learn, locks, needs, on_fail, retry, review, subagent, target, timeout, verify",
		}},
		{"a value that did not decode is not also missing", head + "  - {id: {x: 1}, subagent: [s]}", []string{
			"p.yaml:4: tasks[0].id: want a string, got a mapping",
			"p.yaml:4: tasks[0].subagent: want a string, got a list",
		}},
		{"task id missing", head + "  - subagent: s", []string{
			"p.yaml:4: tasks[0].id: required",
		}},
		{"task id pattern", head + "  - {id: Lint, subagent: s}\n  - {id: a.b, subagent: s}\n  - {id: -a, subagent: s}", []string{
			`p.yaml:4: tasks[0].id: invalid task id "Lint": use 1-63 lowercase letters, digits, '_' or '-', starting with a letter or digit`,
			`p.yaml:5: tasks[1].id: invalid task id "a.b": use 1-63 lowercase letters, digits, '_' or '-', starting with a letter or digit`,
			`p.yaml:6: tasks[2].id: invalid task id "-a": use 1-63 lowercase letters, digits, '_' or '-', starting with a letter or digit`,
		}},
		{"duplicate task id", head + "  - {id: a, subagent: s}\n  - {id: lint, subagent: s}\n  - {id: b, subagent: s}\n  - {id: c, subagent: s}\n  - {id: lint, subagent: s}", []string{
			`p.yaml:8: tasks[4].id: duplicate task id "lint" (first at tasks[1])`,
		}},
		{"subagent missing", head + "  - id: a", []string{
			"p.yaml:4: tasks[0].subagent: required",
		}},
		{"subagent name", head + "  - {id: a, subagent: Fixer}", []string{
			`p.yaml:4: tasks[0].subagent: invalid subagent name "Fixer": use 1-64 lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit`,
		}},
		{"subagent digest", head + "  - {id: a, subagent: fixer@sha256:abc}", []string{
			`p.yaml:4: tasks[0].subagent: subagent reference "fixer@sha256:abc": digest "sha256:abc": want sha256:<64 lowercase hex digits>`,
		}},
		{"target name", head + "  - {id: a, subagent: s, target: 'big box'}", []string{
			`p.yaml:4: tasks[0].target: invalid target name "big box": use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit`,
		}},
		{"defaults target name", "version: 1\nname: p\ndefaults: {target: -x}\ntasks: [{id: a, subagent: s}]", []string{
			`p.yaml:3: defaults.target: invalid target name "-x": use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit`,
		}},
		{"env empty and bad", head + "  - {id: a, subagent: s, env: ['', Base]}", []string{
			`p.yaml:4: tasks[0].env[0]: invalid env bundle name "": use 1-64 lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit`,
			`p.yaml:4: tasks[0].env[1]: invalid env bundle name "Base": use 1-64 lowercase letters, digits, '.', '_' or '-', starting and ending with a letter or digit`,
		}},
		{"env twice", "version: 1\nname: p\ndefaults: {env: [base, base]}\ntasks: [{id: a, subagent: s}]", []string{
			`p.yaml:3: defaults.env[1]: env bundle "base" listed twice`,
		}},
		{"too many envs", head + "  - {id: a, subagent: s, env: [" + list("e", plan.MaxEnvs+1) + "]}", []string{
			"p.yaml:4: tasks[0].env: 17 env bundles; at most 16",
		}},
		{"input not an object", head + "  - {id: a, subagent: s, input: [1]}\n  - {id: b, subagent: s, input: text}", []string{
			"p.yaml:4: tasks[0].input: want a JSON object, got a list",
			"p.yaml:5: tasks[1].input: want a JSON object, got a string",
		}},
		{"input numbers", head + "  - id: a\n    subagent: s\n    input: {ratio: 0.5, big: 9007199254740993, list: [1, 2.5], ok: 9007199254740992}", []string{
			"p.yaml:6: tasks[0].input.big: want an integer within ±2^53 (write other numbers as strings), got 9007199254740993",
			"p.yaml:6: tasks[0].input.list[1]: want an integer within ±2^53 (write other numbers as strings), got 2.5",
			"p.yaml:6: tasks[0].input.ratio: want an integer within ±2^53 (write other numbers as strings), got 0.5",
		}},
		{"input characters YAML cannot carry", head + `  - {id: a, subagent: s, input: {"x\N": 1, y: "a\x7f", z: "\uffff", ok: "\t\u2028"}}`, []string{
			`p.yaml:4: tasks[0].input.x` + "\u0085" + `: key holds U+0085, which a plan cannot carry`,
			`p.yaml:4: tasks[0].input.y: string holds U+007F, which a plan cannot carry`,
			`p.yaml:4: tasks[0].input.z: string holds U+FFFF, which a plan cannot carry`,
		}},
		{"input too large", head + "  - {id: a, subagent: s, input: {x: " + strings.Repeat("y", plan.MaxInputSize) + "}}", []string{
			"p.yaml:4: tasks[0].input: 122888 bytes in canonical JSON; at most 122880",
		}},
		{"depends_on", head + "  - {id: a, subagent: s}\n  - {id: b, subagent: s}\n  - {id: c, subagent: s}\n  - {id: d, subagent: s, depends_on: [lint, d, a, a, '']}", []string{
			`p.yaml:7: tasks[3].depends_on[0]: unknown task "lint"`,
			`p.yaml:7: tasks[3].depends_on[1]: task "d" depends on itself`,
			`p.yaml:7: tasks[3].depends_on[3]: task "a" listed twice`,
			`p.yaml:7: tasks[3].depends_on[4]: required`,
		}},
		{"too many dependencies", head + "  - {id: a, subagent: s, depends_on: [" + list("t", plan.MaxDependsOn+1) + "]}", []string{
			"p.yaml:4: tasks[0].depends_on: 65 dependencies; at most 64",
		}},
		{"needs", head + "  - {id: a, subagent: s}\n  - id: b\n    subagent: s\n    needs:\n" +
			"      Fix: {from: a, select: patch}\n" +
			"      nofrom: {select: patch}\n" +
			"      ghost: {from: zz, select: patch}\n" +
			"      me: {from: b, select: patch}\n" +
			"      nosel: {from: a}\n" +
			"      wrong: {from: a, select: diff}\n", []string{
			`p.yaml:8: tasks[1].needs.Fix: invalid input key "Fix": use 1-63 lowercase letters, digits, '_' or '-', starting with a letter`,
			`p.yaml:9: tasks[1].needs.nofrom.from: required`,
			`p.yaml:10: tasks[1].needs.ghost.from: unknown task "zz"`,
			`p.yaml:11: tasks[1].needs.me.from: task "b" depends on itself`,
			`p.yaml:12: tasks[1].needs.nosel.select: required; want patch, outputs, verify or output:PATH`,
			`p.yaml:13: tasks[1].needs.wrong.select: want patch, outputs, verify or output:PATH, got "diff"`,
		}},
		{"too many needs", head + "  - {id: a, subagent: s, needs: {" + needs(plan.MaxNeeds+1) + "}}", []string{
			"p.yaml:4: tasks[0].needs: 65 inputs; at most 64",
		}},
		{"locks", head + "  - id: a\n    subagent: s\n    locks:\n" +
			"      - Repo\n" +
			"      - {mode: shared}\n" +
			"      - {name: db, mode: read}\n" +
			"      - [x]\n" +
			"      - null\n" +
			"      - {name: db, mode: shared, wait: 1s}\n", []string{
			`p.yaml:7: tasks[0].locks[0]: invalid lock name "Repo": use 1-128 lowercase letters, digits, '.', '_', '/', ':' or '-', starting with a letter or digit`,
			`p.yaml:8: tasks[0].locks[1].name: required`,
			`p.yaml:9: tasks[0].locks[2].mode: want exclusive or shared, got "read"`,
			`p.yaml:10: tasks[0].locks[3]: want a lock name or {name: NAME, mode: exclusive|shared}, got a list`,
			`p.yaml:11: tasks[0].locks[4]: want a lock name or {name: NAME, mode: exclusive|shared}, got null`,
			`p.yaml:12: tasks[0].locks[5].wait: unknown field "wait"; known fields: mode, name`,
		}},
		{"lock in two modes", head + "  - id: a\n    subagent: s\n    locks: [repo, db, {name: db, mode: exclusive}, {name: repo, mode: shared}]", []string{
			`p.yaml:6: tasks[0].locks[3].name: lock "repo" is also listed as exclusive at locks[0]; a task holds a lock in one mode`,
		}},
		{"lock name too long", head + "  - {id: a, subagent: s, locks: [" + strings.Repeat("l", 129) + "]}", []string{
			`p.yaml:4: tasks[0].locks[0]: invalid lock name "` + strings.Repeat("l", 129) + `": use 1-128 lowercase letters, digits, '.', '_', '/', ':' or '-', starting with a letter or digit`,
		}},
		{"too many locks", head + "  - {id: a, subagent: s, locks: [" + list("l", plan.MaxLocks+1) + "]}", []string{
			"p.yaml:4: tasks[0].locks: 65 locks; at most 64",
		}},
		{"retry bounds", head + "  - id: a\n    subagent: s\n    retry:\n" +
			"      max_attempts: 0\n      initial_backoff: 0s\n      multiplier: 0.5\n      max_backoff: 25h\n", []string{
			"p.yaml:7: tasks[0].retry.max_attempts: want 1 to 100, got 0",
			"p.yaml:8: tasks[0].retry.initial_backoff: want more than 0s and at most 24h0m0s, got 0s",
			"p.yaml:9: tasks[0].retry.multiplier: want 1 to 10, got 0.5",
			"p.yaml:10: tasks[0].retry.max_backoff: want more than 0s and at most 24h0m0s, got 25h0m0s",
		}},
		{"retry upper bounds", head + "  - {id: a, subagent: s, retry: {max_attempts: 101, multiplier: 11}}", []string{
			"p.yaml:4: tasks[0].retry.max_attempts: want 1 to 100, got 101",
			"p.yaml:4: tasks[0].retry.multiplier: want 1 to 10, got 11",
		}},
		{"retry initial above max", head + "  - {id: a, subagent: s, retry: {initial_backoff: 2m, max_backoff: 1m}}", []string{
			"p.yaml:4: tasks[0].retry: initial_backoff 2m0s is longer than max_backoff 1m0s",
		}},
		{"retry max below the inherited initial", "version: 1\nname: p\ndefaults: {retry: {initial_backoff: 30s}}\ntasks: [{id: a, subagent: s, retry: {max_backoff: 10s}}]", []string{
			"p.yaml:4: tasks[0].retry: initial_backoff 30s is longer than max_backoff 10s",
		}},
		{"a conflict in the defaults is reported once", "version: 1\nname: p\ndefaults: {retry: {max_backoff: 1s}}\ntasks: [{id: a, subagent: s, retry: {max_attempts: 2}}, {id: b, subagent: s}]", []string{
			"p.yaml:3: defaults.retry: initial_backoff 5s is longer than max_backoff 1s",
		}},
		{"retry field types", head + "  - {id: a, subagent: s, retry: {max_attempts: three, on_worker_failed: maybe, initial_backoff: -1s}}", []string{
			`p.yaml:4: tasks[0].retry.max_attempts: want an integer, got "three"`,
			`p.yaml:4: tasks[0].retry.on_worker_failed: want true or false, got "maybe"`,
			`p.yaml:4: tasks[0].retry.initial_backoff: want a duration such as 30s or 5m, got "-1s"`,
		}},
		{"timeouts", "version: 1\nname: p\ndefaults: {timeout: 0s}\ntasks: [{id: a, subagent: s, timeout: 25h}]", []string{
			"p.yaml:3: defaults.timeout: want more than 0s and at most 24h0m0s, got 0s",
			"p.yaml:4: tasks[0].timeout: want more than 0s and at most 24h0m0s, got 25h0m0s",
		}},
		{"grants", head + "  - {id: a, subagent: s, grants: {tools: [read_file, rm_rf, read_file], commands: ['git **', ''], egress: ['http://x']}}", []string{
			`p.yaml:4: tasks[0].grants.egress[0]: egress "http://x": write a host and optional port such as api.example.com:443, not a URL (paths go in a rule's paths)`,
			`p.yaml:4: tasks[0].grants.tools[1]: unknown tool "rm_rf"; known: ask_human, http_fetch, list_files, read_file, run_command, search_files, write_file`,
			`p.yaml:4: tasks[0].grants.tools[2]: "read_file" listed twice`,
			`p.yaml:4: tasks[0].grants.commands[1]: empty command pattern`,
		}},
		{"cycle", head + "  - {id: a, subagent: s, depends_on: [b]}\n  - {id: b, subagent: s, depends_on: [a]}", []string{
			"p.yaml:4: tasks[0].depends_on[0]: cycle: a -> b -> a",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, parseErrs(t, tt.src)); diff != "" {
				t.Errorf("Parse errors (-want +got):\n%s", diff)
			}
		})
	}
}

// parseErrs parses src, which must fail with strictyaml.Errors, and returns the error lines.
func parseErrs(t testing.TB, src string) []string {
	t.Helper()
	p, err := plan.Parse("p.yaml", []byte(src))
	if err == nil {
		t.Fatalf("Parse succeeded, want errors; canonical: %s", p.Canonical())
	}
	if p != nil {
		t.Errorf("Parse returned a plan with its errors")
	}
	var es strictyaml.Errors
	if !errors.As(err, &es) {
		t.Fatalf("error is %T, want strictyaml.Errors: %v", err, err)
	}
	return strings.Split(es.Error(), "\n")
}

// list is "p0, p1, ..." with n names.
func list(prefix string, n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = prefix + itoa(i)
	}
	return strings.Join(names, ", ")
}

// needs is n needs entries all taking the patch of task "up".
func needs(n int) string {
	entries := make([]string, n)
	for i := range entries {
		entries[i] = "k" + itoa(i) + ": {from: up, select: patch}"
	}
	return strings.Join(entries, ", ")
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestParse_SelectOutputPaths(t *testing.T) {
	tests := []struct {
		sel  string
		want string // "" for accepted
	}{
		{"output:report.txt", ""},
		{"output:dir/sub/file.json", ""},
		{"output:..hidden", ""},
		{"output:", `want output:PATH with a path in the upstream task's outputs, got "output:"`},
		{"output:/etc/passwd", `output path "/etc/passwd" must be a clean relative path inside the upstream task's outputs (no "..", no leading "/")`},
		{"output:../x", `output path "../x" must be a clean relative path inside the upstream task's outputs (no "..", no leading "/")`},
		{"output:a/../../x", `output path "a/../../x" must be a clean relative path inside the upstream task's outputs (no "..", no leading "/")`},
		{"output:..", `output path ".." must be a clean relative path inside the upstream task's outputs (no "..", no leading "/")`},
		{"output:.", `output path "." must be a clean relative path inside the upstream task's outputs (no "..", no leading "/")`},
		{"output:./a", `output path "./a" must be a clean relative path inside the upstream task's outputs (no "..", no leading "/")`},
		{"output:a//b", `output path "a//b" must be a clean relative path inside the upstream task's outputs (no "..", no leading "/")`},
		{"output:a/", `output path "a/" must be a clean relative path inside the upstream task's outputs (no "..", no leading "/")`},
		{"output:a\nb", `output path "a\nb" holds a control character or invalid UTF-8`},
		{"output:a\tb", `output path "a\tb" holds a control character or invalid UTF-8`},
		{"output:" + strings.Repeat("a", plan.MaxOutputPath+1), "output path of 1025 bytes; at most 1024"},
		{"Patch", `want patch, outputs, verify or output:PATH, got "Patch"`},
		{"output", `want patch, outputs, verify or output:PATH, got "output"`},
	}
	for _, tt := range tests {
		t.Run(tt.sel, func(t *testing.T) {
			err := plan.CheckSelect(tt.sel)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("CheckSelect(%q) = %q, want %q", tt.sel, got, tt.want)
			}
			// The same check runs inside Parse, at the select's path.
			src, _ := json.Marshal(map[string]any{"version": 1, "name": "p", "tasks": []any{
				map[string]any{"id": "up", "subagent": "s"},
				map[string]any{"id": "down", "subagent": "s", "needs": map[string]any{"in": map[string]any{"from": "up", "select": tt.sel}}},
			}})
			_, perr := plan.Parse("p.json", src)
			if (perr == nil) != (tt.want == "") {
				t.Fatalf("Parse error = %v, want one only when CheckSelect fails", perr)
			}
			if perr != nil && perr.Error() != "p.json:1: tasks[1].needs.in.select: "+tt.want {
				t.Errorf("Parse error = %q", perr)
			}
		})
	}
}

// TestCheckSelect_Unprintable covers what a JSON or YAML plan cannot even deliver intact (a
// YAML reader folds a raw U+0085 into a space), for callers that check a select of their own.
func TestCheckSelect_Unprintable(t *testing.T) {
	for _, sel := range []string{"output:a\u0085b", "output:a\x7fb", "output:a\xffb"} {
		if err := plan.CheckSelect(sel); err == nil || !strings.Contains(err.Error(), "control character or invalid UTF-8") {
			t.Errorf("CheckSelect(%q) = %v, want the control character error", sel, err)
		}
	}
}

func TestParse_Limits(t *testing.T) {
	t.Run("source size", func(t *testing.T) {
		src := make([]byte, plan.MaxSourceSize+1)
		for i := range src {
			src[i] = '\n'
		}
		_, err := plan.Parse("big.yaml", src)
		want := "big.yaml: plan is 16777217 bytes; at most 16777216"
		if err == nil || err.Error() != want {
			t.Fatalf("Parse = %v, want %q", err, want)
		}
	})
	t.Run("errors stop at MaxErrors", func(t *testing.T) {
		var b strings.Builder
		b.WriteString(head)
		for range plan.MaxErrors + 50 {
			b.WriteString("  - {id: a, subagent: BAD}\n")
		}
		got := parseErrs(t, b.String())
		if len(got) != plan.MaxErrors+1 {
			t.Fatalf("got %d errors, want %d", len(got), plan.MaxErrors+1)
		}
		// 150 bad subagents and 149 duplicate ids: 100 listed, the other 199 counted.
		if last := got[len(got)-1]; last != "p.yaml: and 199 more problems not listed: the first 100 are; fix them and check again" {
			t.Errorf("last error = %q, want the count of the rest", last)
		}
		if strings.Contains(strings.Join(got[:len(got)-1], "\n"), "more problems") {
			t.Errorf("the count is not last:\n%s", strings.Join(got, "\n"))
		}
	})
	t.Run("decoder errors count towards MaxErrors", func(t *testing.T) {
		var b strings.Builder
		b.WriteString(head)
		for range plan.MaxErrors + 50 {
			b.WriteString("  - {id: a, subagent: s, bogus: 1}\n")
		}
		got := parseErrs(t, b.String())
		if len(got) != plan.MaxErrors+1 {
			t.Fatalf("got %d errors, want %d", len(got), plan.MaxErrors+1)
		}
		// The decoder stopped at its limit, so how many more there are is not known.
		if strings.Contains(strings.Join(got, "\n"), "more problems") || !strings.HasSuffix(got[len(got)-1], "stopping here") {
			t.Errorf("after the decoder's limit:\n%s", strings.Join(got, "\n"))
		}
	})
}

// TestParse_MaxTasks builds the largest plan allowed and one task more.
func TestParse_MaxTasks(t *testing.T) {
	build := func(n int) []byte {
		var b strings.Builder
		b.WriteString(`{"version":1,"name":"big","tasks":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"id":"t` + itoa(i) + `","subagent":"s"}`)
		}
		b.WriteString("]}")
		return []byte(b.String())
	}
	p, err := plan.Parse("big.json", build(plan.MaxTasks))
	if err != nil {
		t.Fatalf("Parse of %d tasks: %v", plan.MaxTasks, err)
	}
	if len(p.Tasks) != plan.MaxTasks {
		t.Fatalf("got %d tasks, want %d", len(p.Tasks), plan.MaxTasks)
	}
	_, err = plan.Parse("big.json", build(plan.MaxTasks+1))
	if want := "big.json:1: tasks: 100001 tasks; at most 100000"; err == nil || err.Error() != want {
		t.Fatalf("Parse of one task more = %v, want %q", err, want)
	}
}

func TestGrants_CanonicalKeepsNoneApartFromAbsent(t *testing.T) {
	head := "version: 1\nname: p\ntasks:\n"
	none := mustParse(t, head+"  - {id: a, subagent: s, grants: {commands: []}}")
	absent := mustParse(t, head+"  - {id: a, subagent: s, grants: {}}")
	if none.Digest() == absent.Digest() {
		t.Fatal("grants {commands: []} and {} have the same digest")
	}
	back := mustParse(t, string(none.Canonical()))
	g := back.Resolve()[0].Grants
	if g == nil || g.Commands == nil || len(g.Commands) != 0 || g.Tools != nil {
		t.Errorf("round trip of {commands: []} gave %+v", g)
	}
	if back.Digest() != none.Digest() {
		t.Errorf("digest changed over the canonical round trip")
	}
}

// TestParse_LongValuesInMessages: messages quote what the plan says; a megabyte where a name,
// a duration or a lock mode belongs makes a problem of at most about 600 bytes, not a copy of
// the megabyte (a refusal of 100 such problems would otherwise be 100 MB over MCP).
func TestParse_LongValuesInMessages(t *testing.T) {
	long := strings.Repeat("é", 1<<19) // 1 MiB, two bytes a rune: a cut must not split one
	for _, src := range []string{
		"version: 1\nname: " + long + "\ntasks: [{id: a, subagent: s}]\n",
		"version: 1\nname: p\ntasks: [{id: " + long + ", subagent: s}]\n",
		"version: 1\nname: p\ntasks: [{id: a, subagent: " + long + "}]\n",
		"version: 1\nname: p\ntasks: [{id: a, subagent: s, depends_on: [" + long + "]}]\n",
		"version: 1\nname: p\nworkspace: " + long + "\ntasks: [{id: a, subagent: s}]\n",
		"version: 1\nname: p\ntasks: [{id: a, subagent: s, timeout: " + long + "}]\n",
		"version: 1\nname: p\ntasks: [{id: a, subagent: s, locks: [{name: x, mode: " + long + "}]}]\n",
		"version: 1\nname: p\ntasks: [{id: a, subagent: s, needs: {k: {from: a, select: " + long + "}}}]\n",
	} {
		for _, msg := range parseErrs(t, src) {
			if len(msg) > 700 || !utf8.ValidString(msg) {
				t.Errorf("a %d-byte problem (valid UTF-8: %v): %.120s...", len(msg), utf8.ValidString(msg), msg)
			}
		}
	}
}

// TestValidate_NoFileNoLine: a plan given as a value (over MCP, no file) has its problems
// placed by path alone, never at a made-up "plan.json:1:"; a file keeps its
// lines.
func TestValidate_NoFileNoLine(t *testing.T) {
	src := []byte(`{"version": 1, "name": "x", "tasks": [{"id": "a", "subagent": "s", "depends_on": ["nope"]}, {"id": "b", "subagent": "s", "timeout": "soon"}]}`)
	_, err := plan.Validate(t.Context(), "", src, nil)
	want := "plan: tasks[0].depends_on[0]: unknown task \"nope\""
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "plan: tasks[1].timeout: ") {
		t.Fatalf("got %v, want problems placed by path, e.g. %q", err, want)
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if !strings.HasPrefix(line, "plan: tasks[") {
			t.Errorf("line %q: want \"plan: tasks[...]: ...\" with no line number", line)
		}
	}
	_, err = plan.Validate(t.Context(), "p.json", src, nil)
	if err == nil || !strings.Contains(err.Error(), "p.json:1: tasks[0].depends_on[0]: ") {
		t.Errorf("a file keeps its lines: got %v", err)
	}
}
