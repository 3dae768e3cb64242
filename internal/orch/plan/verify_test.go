package plan_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/verdict"
)

func TestParse_Verify(t *testing.T) {
	src := `version: 1
name: p
defaults:
  verify: {command: [go, test, ./...], protect: ["**/*_test.go", .github/**]}
tasks:
  - {id: a, subagent: s}
  - {id: b, subagent: s, verify: {command: [make, check], timeout: 90s}}
`
	p := mustParse(t, src)
	got := map[string]*verdict.Spec{}
	for _, r := range p.Resolve() {
		got[r.ID] = r.Verify
	}
	want := map[string]*verdict.Spec{
		"a": {Command: []string{"go", "test", "./..."}, Timeout: verdict.DefaultTimeout, Protect: []string{"**/*_test.go", ".github/**"}},
		"b": {Command: []string{"make", "check"}, Timeout: 90 * time.Second},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resolved verify (-want +got):\n%s", diff)
	}
	// The resolved spec shares nothing with the plan: an engine holding it cannot change it.
	rs := p.Resolve()
	rs[0].Verify.Command[0] = "rm"
	if p.Defaults.Verify.Command[0] != "go" {
		t.Error("Resolve shares the verify command with the plan")
	}
	// The same plan in JSON, keys in another order, has the same canonical bytes.
	js := `{"tasks":[{"id":"a","subagent":"s"},{"verify":{"timeout":"1m30s","command":["make","check"]},"subagent":"s","id":"b"}],
		"defaults":{"verify":{"protect":["**/*_test.go",".github/**"],"command":["go","test","./..."]}},"name":"p","version":1}`
	q := mustParse(t, js)
	if q.Digest() != p.Digest() {
		t.Errorf("YAML and JSON digests differ:\n%s\n%s", p.Canonical(), q.Canonical())
	}
	again := mustParse(t, string(p.Canonical()))
	if again.Digest() != p.Digest() {
		t.Errorf("canonical form does not round trip: %s", p.Canonical())
	}
}

func TestParse_VerifyNoneKeepsTheDigest(t *testing.T) {
	// A plan without verify writes no verify key: plans written before verify gates keep
	// their bytes and digests.
	p := mustParse(t, "version: 1\nname: p\ntasks: [{id: a, subagent: s}]\n")
	if want := `{"concurrency":4,"name":"p","tasks":[{"id":"a","subagent":"s"}],"version":1}`; string(p.Canonical()) != want {
		t.Errorf("got %s, want %s", p.Canonical(), want)
	}
	if r := p.Resolve(); r[0].Verify != nil {
		t.Errorf("a task without verify resolved with %+v", r[0].Verify)
	}
}

func TestParse_VerifyErrors(t *testing.T) {
	src := head + "  - {id: a, subagent: s, verify: {command: [], timeout: 25h, protect: [/etc/**, 'a', 'a', 'x/**y'], shell: true}}\n" +
		"  - {id: b, subagent: s, verify: {command: ['']}}\n"
	want := []string{
		`p.yaml:4: tasks[0].verify.shell: unknown field "shell"; known fields: changes, command, expect, protect, timeout`,
		"p.yaml:4: tasks[0].verify.command: verify command: empty; give the program and its arguments, such as [go, test, ./...]",
		"p.yaml:4: tasks[0].verify.timeout: want more than 0s and at most 24h0m0s, got 25h0m0s",
		`p.yaml:4: tasks[0].verify.protect[0]: protect glob "/etc/**": starts with '/'; paths are relative to the repository`,
		`p.yaml:4: tasks[0].verify.protect[2]: "a" listed twice`,
		`p.yaml:4: tasks[0].verify.protect[3]: protect glob "x/**y": segment "**y": ** must be a whole segment (a/**/b), or use * within a segment`,
		`p.yaml:5: tasks[1].verify.command: verify command: the program (its first argument) is empty`,
	}
	if diff := cmp.Diff(want, parseErrs(t, src)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	if plan.JSONSchema().Properties["tasks"].Items.Properties["verify"].Properties["command"].Type != "array" {
		t.Error("the schema does not publish verify.command as an array")
	}
}

func TestParse_VerifyChangesExpect(t *testing.T) {
	src := head + "  - id: a\n    subagent: s\n    verify:\n      command: [python3, run_tests.py]\n      changes: [src/**, docs/**]\n      protect: [src/fixtures/**]\n      expect: {junit: junit.xml, min_tests: 3}\n" +
		"  - {id: b, subagent: s, verify: {command: [make, test], expect: {junit: r.xml}}}\n"
	p := mustParse(t, src)
	want := verdict.Spec{Command: []string{"python3", "run_tests.py"}, Changes: []string{"src/**", "docs/**"},
		Protect: []string{"src/fixtures/**"}, Expect: &verdict.Expect{JUnit: "junit.xml", MinTests: 3}}
	if diff := cmp.Diff(&want, p.Tasks[0].Verify()); diff != "" {
		t.Errorf("task a's gate (-want +got):\n%s", diff)
	}
	if e := p.Tasks[1].Verify().Expect; e == nil || e.JUnit != "r.xml" || e.MinTests != 0 || e.Min() != 1 {
		t.Errorf("task b's expect %+v", e)
	}
	c := string(p.Canonical())
	for _, w := range []string{`"verify":{"changes":["src/**","docs/**"],"command":["python3","run_tests.py"],"expect":{"junit":"junit.xml","min_tests":3},"protect":["src/fixtures/**"]}`,
		`"verify":{"command":["make","test"],"expect":{"junit":"r.xml"}}`} {
		if !strings.Contains(c, w) {
			t.Errorf("canonical form lacks %s:\n%s", w, c)
		}
	}
	again := mustParse(t, c)
	if again.Digest() != p.Digest() {
		t.Errorf("canonical form does not round trip: %s", c)
	}
	r := p.Resolve()
	r[0].Verify.Changes[0], r[0].Verify.Expect.MinTests = "x", 9
	if p.Tasks[0].Verify().Changes[0] != "src/**" || p.Tasks[0].Verify().Expect.MinTests != 3 {
		t.Error("Resolve shares the gate with the plan")
	}
	o, err := plan.ReadOutline(p.Canonical())
	if err != nil {
		t.Fatal(err)
	}
	want.Timeout = verdict.DefaultTimeout
	if diff := cmp.Diff(&want, o[0].Verify); diff != "" {
		t.Errorf("outline's gate (-want +got):\n%s", diff)
	}
}

func TestParse_VerifyChangesExpectErrors(t *testing.T) {
	src := head + "  - {id: a, subagent: s, verify: {command: [t], changes: [/src/**, a, a], expect: {junit: ../r.xml, min_tests: 0}}}\n" +
		"  - {id: b, subagent: s, verify: {command: [t], expect: {min_tests: 2}}}\n" +
		"  - {id: c, subagent: s, verify: {command: [t], expect: {junit: r.xml, tests: 2}}}\n" +
		"  - {id: d, subagent: s, verify: {command: [t], changes: []}}\n"
	want := []string{
		`p.yaml:4: tasks[0].verify.changes[0]: changes glob "/src/**": starts with '/'; paths are relative to the repository`,
		`p.yaml:4: tasks[0].verify.changes[2]: "a" listed twice`,
		`p.yaml:4: tasks[0].verify.expect.min_tests: 0: want at least 1 (leave it out for 1)`,
		`p.yaml:4: tasks[0].verify.expect.junit: verify expect junit: "../r.xml" starts with '.'; name a plain file such as junit.xml`,
		`p.yaml:5: tasks[1].verify.expect.junit: verify expect junit: empty; name the report file the command writes in $AGORA_REPORT, such as junit.xml`,
		`p.yaml:6: tasks[2].verify.expect.tests: unknown field "tests"; known fields: junit, min_tests`,
		`p.yaml:7: tasks[3].verify.changes: empty; name the paths the work may change (src/**), or leave changes out to admit any path protect does not name`,
	}
	if diff := cmp.Diff(want, parseErrs(t, src)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}
