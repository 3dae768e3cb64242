package plan_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/orch/plan"
)

// outlineOf is what ReadOutline must say of p: its resolved tasks' shape.
func outlineOf(p *plan.Plan) []plan.Outline { return plan.OutlineOf(p.Resolve()) }

func TestReadOutline(t *testing.T) {
	p, err := plan.Parse("p.yaml", []byte(head+`  - {id: a, subagent: s, locks: [r, {name: q, mode: shared}]}
  - {id: b, subagent: t, depends_on: [a], needs: {x: {from: a, select: patch}, y: {from: c, select: outputs}}}
  - {id: c, subagent: s, verify: {command: [go, test], protect: ["**/*_test.go"], timeout: 2m}}
  - {id: d, subagent: s, verify: {command: [make]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := plan.ReadOutline(p.Canonical())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(outlineOf(p), got); diff != "" {
		t.Errorf("ReadOutline (-want +got):\n%s", diff)
	}
	if got := plan.LockNames(got[0].Locks); !slices.Equal(got, []string{"q (shared)", "r"}) {
		t.Errorf("LockNames = %q", got)
	}
	if _, err := plan.ReadOutline([]byte(`{"tasks":[{"id":1}]}`)); err == nil {
		t.Error("a document that is no plan read as an outline")
	}
}

// FuzzReadOutline: ReadOutline never panics, and of every plan Parse accepts it reads the
// shape Resolve gives.
func FuzzReadOutline(f *testing.F) {
	f.Add([]byte(head + "  - {id: a, subagent: s, depends_on: [b]}\n  - {id: b, subagent: s, needs: {x: {from: a, select: patch}}, locks: [r, {name: q, mode: shared}]}\n"))
	f.Add([]byte(`{"tasks":[{"id":"a","locks":[{"mode":"shared"}],"needs":{"k":{}}}]}`))
	f.Add([]byte(fullCanonical))
	f.Add([]byte(head + "  - {id: a, subagent: s, verify: {command: [go, test], timeout: 90s}}\n"))
	f.Add([]byte("version: 1\nname: p\ndefaults: {verify: {command: [make, check]}}\ntasks: [{id: a, subagent: s}]\n"))
	f.Add([]byte("version: 1\nname: p\ntasks:\n  - {id: split, subagent: s}\n  - {id: each, fan_out: {from: split, select: \"output:items.json\", template: {subagent: w, locks: [{name: ci, mode: shared}]}}}\n  - {id: reduce, subagent: r, depends_on: [each]}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		plan.ReadOutline(src)
		p, err := plan.Parse("f", src)
		if err != nil {
			return
		}
		got, err := plan.ReadOutline(p.Canonical())
		if err != nil {
			t.Fatalf("the canonical form of an accepted plan: %v", err)
		}
		if diff := cmp.Diff(outlineOf(p), got); diff != "" {
			t.Fatalf("ReadOutline (-want +got):\n%s", diff)
		}
	})
}
