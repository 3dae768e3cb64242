package plan_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/deploy"
	"github.com/agora-dev/agora/internal/orch/plan"
)

var repoRoot = filepath.Join("..", "..", "..")

func readRepoFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	return b
}

// TestExamples_Demo checks the plan make demo runs: valid against the example catalog, and
// shaped as the demo promises.
func TestExamples_Demo(t *testing.T) {
	const file = "examples/plans/demo.yaml"
	p, err := plan.Parse(file, readRepoFile(t, file))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	m, _, err := deploy.Parse("agora-manifest.yaml", readRepoFile(t, "examples/catalog/agora-manifest.yaml"))
	if err != nil {
		t.Fatalf("parse the example manifest: %v", err)
	}
	refs := &fakeRefs{targets: []string{config.DefaultTarget}}
	for _, s := range m.Subagents {
		refs.subagents = append(refs.subagents, s.Name)
	}
	for _, e := range m.Envs {
		refs.envs = append(refs.envs, e.Name)
	}
	if err := p.Check(t.Context(), refs); err != nil {
		t.Fatalf("Check against the example catalog: %v", err)
	}

	tasks := map[string]plan.Resolved{}
	for _, r := range p.Resolve() {
		tasks[r.ID] = r
	}
	a, b := tasks["greet-docs"], tasks["greet-readme"]
	if len(a.Deps) != 0 || len(b.Deps) != 0 || len(a.Locks) == 0 || len(b.Locks) == 0 || conflict(a.Locks, b.Locks) {
		t.Errorf("greet-docs and greet-readme must be roots with disjoint locks: %+v / %+v", a, b)
	}
	review := tasks["review"]
	if !slices.Equal(review.Deps, []string{"greet-docs", "greet-readme"}) {
		t.Errorf("review depends on %v, want both greet tasks", review.Deps)
	}
	if len(review.Needs) != 1 {
		t.Errorf("review needs %v, want one patch of a greet task", review.Needs)
	}
	for _, n := range review.Needs {
		if n.Select != plan.SelectPatch || (n.From != "greet-docs" && n.From != "greet-readme") {
			t.Errorf("review needs %+v, want the patch of a greet task", n)
		}
	}
	x, y := tasks["tidy-a"], tasks["tidy-b"]
	if !conflict(x.Locks, y.Locks) || conflict(x.Locks, a.Locks) || conflict(x.Locks, b.Locks) {
		t.Errorf("tidy-a and tidy-b must share an exclusive lock no other task holds: %+v / %+v", x.Locks, y.Locks)
	}
	demoStory(t, tasks)
}

// demoStory checks the demo shows what it tells (its five patches were one
// identical GREETING.txt edit): every writing task writes a file of its own, naming itself,
// with scribe, which records when it ran (so the patches show the parallel pair overlap and
// the locked pair not); the review task is the hand-off, reading the patch it is handed; and
// greet-docs' verify gate checks the file greet-docs writes.
func demoStory(t *testing.T, tasks map[string]plan.Resolved) {
	t.Helper()
	files := map[string]string{}
	for _, id := range []string{"greet-docs", "greet-readme", "tidy-a", "tidy-b"} {
		r := tasks[id]
		var in struct{ File, Task string }
		if err := json.Unmarshal(r.Input, &in); err != nil || in.File == "" || in.Task != id || r.Subagent != "scribe" {
			t.Errorf("task %s: subagent %s, input %s (%v); want scribe with {file: ITS OWN FILE, task: %s}", id, r.Subagent, r.Input, err, id)
			continue
		}
		if other, ok := files[in.File]; ok {
			t.Errorf("tasks %s and %s write the same file %s: the demo's patches would not tell them apart", other, id, in.File)
		}
		files[in.File] = id
	}
	scribe := string(readRepoFile(t, "examples/catalog/capabilities/demo-tools/scribe.sh"))
	for _, want := range []string{`field file`, `field task`, "ran %s to %s", "sleep 1"} {
		if !strings.Contains(scribe, want) {
			t.Errorf("scribe.sh lacks %q: it must write the file its input names, and when it ran", want)
		}
	}
	review := tasks["review"]
	handoff := string(readRepoFile(t, "examples/catalog/capabilities/demo-tools/handoff.sh"))
	n, ok := review.Needs["docs-patch"]
	if review.Subagent != "handoff" || !ok || n.From != "greet-docs" || !strings.Contains(handoff, `$AGORA_INPUTS/docs-patch/patch.diff`) || !strings.Contains(handoff, "REVIEW.md") {
		t.Errorf("review: subagent %s, needs %+v; want handoff reading greet-docs' patch at $AGORA_INPUTS/docs-patch/patch.diff into REVIEW.md", review.Subagent, review.Needs)
	}
	if v := tasks["greet-docs"].Verify; v == nil || !slices.Contains(v.Command, "docs/GREETING.md") || files["docs/GREETING.md"] != "greet-docs" {
		t.Errorf("greet-docs' verify gate %+v must check the file greet-docs writes (docs/GREETING.md)", v)
	}
	m := string(readRepoFile(t, "examples/catalog/agora-manifest.yaml"))
	for _, want := range []string{"name: scribe", "name: handoff", "name: demo-tools"} {
		if !strings.Contains(m, want) {
			t.Errorf("the example catalog lacks %q", want)
		}
	}
}

// conflict reports whether two lock sets cannot be held at once.
func conflict(a, b []plan.Lock) bool {
	for _, x := range a {
		for _, y := range b {
			if x.Name == y.Name && (x.Mode == plan.LockExclusive || y.Mode == plan.LockExclusive) {
				return true
			}
		}
	}
	return false
}

// TestDocs_Plan checks docs/plan.md: its example plans parse, and it documents every field the
// parser knows (the field lists come from the parser's own unknown-field messages).
func TestDocs_Plan(t *testing.T) {
	doc := string(readRepoFile(t, "docs/plan.md"))
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(doc, -1)
	plans := 0
	for _, b := range blocks {
		if !strings.HasPrefix(b[1], "version: 1\n") {
			continue
		}
		plans++
		if _, err := plan.Parse("docs/plan.md", []byte(b[1])); err != nil {
			t.Errorf("example plan in docs/plan.md: %v\n%s", err, b[1])
		}
	}
	if plans == 0 {
		t.Errorf("docs/plan.md has no example plan")
	}
	probes := map[string]string{
		"top level": "bogus: 1",
		"defaults":  "defaults: {bogus: 1}",
		"task":      "tasks: [{bogus: 1}]",
		"retry":     "tasks: [{retry: {bogus: 1}}]",
		"needs":     "tasks: [{needs: {k: {bogus: 1}}}]",
		"lock":      "tasks: [{locks: [{bogus: 1}]}]",
	}
	known := regexp.MustCompile(`unknown field "bogus"; known fields: ([a-z_, ]+)`)
	for where, src := range probes {
		_, err := plan.Parse("probe.yaml", []byte(src))
		m := known.FindStringSubmatch(err.Error())
		if m == nil {
			t.Fatalf("%s probe: no known-fields list in %v", where, err)
		}
		for _, f := range strings.Split(m[1], ", ") {
			if !strings.Contains(doc, "`"+f+"`") && !strings.Contains(doc, "`"+f+":") {
				t.Errorf("docs/plan.md does not document the %s field %q", where, f)
			}
		}
	}
}
