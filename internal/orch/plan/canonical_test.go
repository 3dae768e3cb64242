package plan_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/jcs"
	"github.com/agora-dev/agora/internal/orch/plan"
)

const fullCanonical = `{"concurrency":8,"defaults":{"env":["base"],"retry":{"initial_backoff":"2s","max_attempts":3},"target":"local","timeout":"10m0s"},` +
	`"name":"nightly-fixes","tasks":[` +
	`{"id":"lint","input":{"budget":3,"files":["a.go","b.go"],"goal":"fix lint","none":null,"strict":true},` +
	`"locks":[{"mode":"exclusive","name":"repo"},{"mode":"shared","name":"db"},{"mode":"exclusive","name":"cache"}],"subagent":"fixer"},` +
	`{"depends_on":["lint"],"env":["base","extra"],"id":"test",` +
	`"needs":{"all":{"from":"lint","select":"outputs"},"fixes":{"from":"lint","select":"patch"},"report":{"from":"lint","select":"output:reports/lint.txt"}},` +
	`"retry":{"max_attempts":5,"max_backoff":"1m0s","multiplier":1.5,"on_worker_failed":false},` +
	`"subagent":"fixer@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","target":"big","timeout":"15m0s"},` +
	`{"env":[],"id":"docs","subagent":"writer"}],"version":1}`

func TestPlan_Canonical(t *testing.T) {
	p := mustParse(t, fullPlan)
	if got := string(p.Canonical()); got != fullCanonical {
		t.Errorf("Canonical:\n got %s\nwant %s", got, fullCanonical)
	}
	if got, want := p.Digest(), "sha256:10876cb4049d572cd6db6992317acaad4d08ef18cd6ed866f2a62a609baf376a"; got != want {
		t.Errorf("Digest = %s, want %s", got, want)
	}
}

// TestPlan_Canonical_IsRFC8785 checks the hand-written encoder against the generic one: the
// same JSON through jcs gives the same bytes (key order, escaping, numbers).
func TestPlan_Canonical_IsRFC8785(t *testing.T) {
	src := strings.Replace(fullPlan, "multiplier: 1.5", "multiplier: 3", 1) +
		"  - id: odd\n    subagent: s\n    input: {\"é\": \"tab\\there \\\"quoted\\\" back\\\\slash \\u2028 😀\", \"z\": [\"\\u0001\"]}\n" +
		"    needs: {b-2: {from: docs, select: patch}, a_1: {from: lint, select: \"output:x y/\\\"q\\\".txt\"}}\n"
	c := mustParse(t, src).Canonical()
	var generic any
	if err := json.Unmarshal(c, &generic); err != nil {
		t.Fatalf("Canonical is not JSON: %v\n%s", err, c)
	}
	want, err := jcs.Marshal(generic)
	if err != nil {
		t.Fatalf("jcs.Marshal: %v", err)
	}
	if string(c) != string(want) {
		t.Errorf("Canonical differs from jcs:\n got %s\nwant %s", c, want)
	}
}

// TestPlan_Digest_SameAcrossForms writes one plan several ways.
func TestPlan_Digest_SameAcrossForms(t *testing.T) {
	asJSON := `{
  "tasks": [
    {"subagent": "fixer", "id": "lint",
     "input": {"strict": true, "none": null, "goal": "fix lint", "files": ["a.go", "b.go"], "budget": 3.0},
     "locks": [{"name": "repo"}, {"mode": "shared", "name": "db"}, "cache"]},
    {"id": "test", "timeout": "900s", "target": "big", "env": ["base", "extra"], "depends_on": ["lint"],
     "subagent": "fixer@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
     "needs": {"report": {"select": "output:reports/lint.txt", "from": "lint"},
               "fixes": {"from": "lint", "select": "patch"}, "all": {"from": "lint", "select": "outputs"}},
     "retry": {"on_worker_failed": false, "max_backoff": "60s", "multiplier": 1.50, "max_attempts": 5}},
    {"id": "docs", "subagent": "writer", "env": [], "depends_on": [], "locks": []}
  ],
  "defaults": {"timeout": "0.1666666666666666667h", "retry": {"initial_backoff": "2000ms", "max_attempts": 3}, "env": ["base"], "target": "local"},
  "concurrency": 8, "name": "nightly-fixes", "version": 1
}`
	flow := "{version: 1, name: nightly-fixes, concurrency: 8, defaults: {target: local, env: [base], timeout: 10m, retry: {max_attempts: 3, initial_backoff: 2s}},\n" +
		"tasks: [{id: lint, subagent: fixer, locks: [repo, {name: db, mode: shared}, {name: cache, mode: exclusive}],\n" +
		"  input: {goal: fix lint, files: [a.go, b.go], budget: 3, strict: true, none: ~}},\n" +
		" {id: test, subagent: 'fixer@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef', env: [base, extra], target: big,\n" +
		"  depends_on: [lint], needs: {fixes: {from: lint, select: patch}, report: {from: lint, select: 'output:reports/lint.txt'}, all: {from: lint, select: outputs}},\n" +
		"  retry: {max_attempts: 5, multiplier: 1.5, max_backoff: 1m, on_worker_failed: false}, timeout: 15m},\n" +
		" {id: docs, subagent: writer, env: []}]}"
	want := mustParse(t, fullPlan)
	for name, src := range map[string]string{"json": asJSON, "flow yaml": flow} {
		t.Run(name, func(t *testing.T) {
			got := mustParse(t, src)
			if got.Digest() != want.Digest() {
				t.Errorf("Digest = %s, want %s\ncanonical: %s", got.Digest(), want.Digest(), got.Canonical())
			}
			if diff := cmp.Diff(want, got, ignorePos); diff != "" {
				t.Errorf("plans differ (-yaml +%s):\n%s", name, diff)
			}
		})
	}
	t.Run("default concurrency written or not", func(t *testing.T) {
		a := mustParse(t, "version: 1\nname: p\ntasks: [{id: a, subagent: s}]")
		b := mustParse(t, `{"version": 1, "name": "p", "concurrency": 4, "tasks": [{"id": "a", "subagent": "s", "target": ""}]}`)
		if a.Digest() != b.Digest() {
			t.Errorf("digests differ: %s and %s", a.Digest(), b.Digest())
		}
	})
}

// TestPlan_Digest_Changes checks that every field is part of the identity.
func TestPlan_Digest_Changes(t *testing.T) {
	base := mustParse(t, fullPlan).Digest()
	edits := []struct{ old, new string }{
		{"name: nightly-fixes", "name: nightly-fixes2"},
		{"concurrency: 8", "concurrency: 7"},
		{"target: local", "target: other"},
		{"env: [base]\n", "env: [base2]\n"},
		{"timeout: 10m", "timeout: 11m"},
		{"max_attempts: 3", "max_attempts: 4"},
		{"initial_backoff: 2s", "initial_backoff: 3s"},
		{"{name: db, mode: shared}", "{name: db, mode: exclusive}"},
		{"[repo,", "[repo2,"},
		{"budget: 3", "budget: 4"},
		{"goal: fix lint", "goal: fix vet"},
		{"subagent: writer", "subagent: writer2"},
		{"env: [base, extra]", "env: [extra, base]"},
		{"target: big", "target: small"},
		{"select: patch}", "select: outputs}"},
		{"multiplier: 1.5", "multiplier: 1.25"},
		{"max_backoff: 1m", "max_backoff: 2m"},
		{"on_worker_failed: false", "on_worker_failed: true"},
		{"timeout: 15m", "timeout: 16m"},
		{"    env: []\n", ""},
		{"depends_on: [lint]", "depends_on: []"},
	}
	for _, e := range edits {
		t.Run(e.old, func(t *testing.T) {
			src := strings.Replace(fullPlan, e.old, e.new, 1)
			if src == fullPlan {
				t.Fatalf("edit %q does not apply", e.old)
			}
			if got := mustParse(t, src).Digest(); got == base {
				t.Errorf("editing %q to %q kept the digest", e.old, e.new)
			}
		})
	}
}

func TestPlan_Canonical_RoundTrip(t *testing.T) {
	for name, src := range map[string]string{
		"full":         fullPlan,
		"layered":      layered(2_000, 50, 30),
		"multipliers":  "version: 1\nname: p\ndefaults: {retry: {multiplier: 1.1}}\ntasks: [{id: a, subagent: s, retry: {multiplier: 9.999999999999998}}, {id: b, subagent: s, retry: {multiplier: 1.0000000000000002}}]",
		"input shapes": "version: 1\nname: p\ntasks: [{id: a, subagent: s, input: {e: {}, l: [], n: [[[1, -2]]], s: \"\\u00e9\\u2028\\t\\n\\u0000\", big: 9007199254740992}}]",
	} {
		t.Run(name, func(t *testing.T) {
			p := mustParse(t, src)
			c := p.Canonical()
			again, err := plan.Parse("canonical.json", c)
			if err != nil {
				t.Fatalf("Parse(Canonical): %v\n%s", err, c)
			}
			if diff := cmp.Diff(p, again, ignorePos); diff != "" {
				t.Errorf("round trip (-parsed +reparsed):\n%s", diff)
			}
			if string(again.Canonical()) != string(c) {
				t.Errorf("canonical form is not a fixed point")
			}
		})
	}
}

func TestPlan_Canonical_Numbers(t *testing.T) {
	for _, tt := range []struct{ yaml, json string }{
		{"1.1", "1.1"},
		{"2.0", "2"},
		{"1e0", "1"},
		{"9.75", "9.75"},
		{"1.0000000000000002", "1.0000000000000002"},
	} {
		p := mustParse(t, "version: 1\nname: p\ntasks: [{id: a, subagent: s, retry: {multiplier: "+tt.yaml+"}}]")
		if c := string(p.Canonical()); !strings.Contains(c, `"multiplier":`+tt.json+`}`) {
			t.Errorf("multiplier %s: canonical %s, want \"multiplier\":%s", tt.yaml, c, tt.json)
		}
	}
}
