package plan_test

import (
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
		`p.yaml:4: tasks[0].verify.shell: unknown field "shell"; known fields: command, protect, timeout`,
		"p.yaml:4: tasks[0].verify.command: verify command: empty; give the program and its arguments, such as [go, test, ./...]",
		"p.yaml:4: tasks[0].verify.timeout: want more than 0s and at most 24h0m0s, got 25h0m0s",
		`p.yaml:4: tasks[0].verify.protect[0]: protect glob "/etc/**": starts with '/'; protect paths are relative to the repository`,
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
