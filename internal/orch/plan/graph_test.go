package plan_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// chainCycle is n tasks t0..t(n-1), each depending on the next and the last on t0.
func chainCycle(n int) string {
	var b strings.Builder
	b.WriteString(head)
	for i := range n {
		b.WriteString("  - {id: t" + strconv.Itoa(i) + ", subagent: s, depends_on: [t" + strconv.Itoa((i+1)%n) + "]}\n")
	}
	return b.String()
}

func TestParse_Cycles(t *testing.T) {
	longNames := make([]string, 0, 34)
	for i := range 16 {
		longNames = append(longNames, "t"+strconv.Itoa(i))
	}
	longNames = append(longNames, "(968 more)")
	for i := 984; i < 1000; i++ {
		longNames = append(longNames, "t"+strconv.Itoa(i))
	}
	longNames = append(longNames, "t0")

	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"two tasks", head + "  - {id: a, subagent: s, depends_on: [b]}\n  - {id: b, subagent: s, depends_on: [a]}", []string{
			"p.yaml:4: tasks[0].depends_on[0]: cycle: a -> b -> a",
		}},
		{"through needs", head + "  - {id: a, subagent: s, needs: {fix: {from: b, select: patch}}}\n  - {id: b, subagent: s, depends_on: [a]}", []string{
			"p.yaml:4: tasks[0].needs.fix.from: cycle: a -> b -> a",
		}},
		{"three tasks, reported at the first in plan order", head +
			"  - {id: x, subagent: s}\n" +
			"  - {id: c, subagent: s, depends_on: [x, a]}\n" +
			"  - {id: b, subagent: s, depends_on: [c]}\n" +
			"  - {id: a, subagent: s, depends_on: [b]}", []string{
			"p.yaml:5: tasks[1].depends_on[1]: cycle: c -> a -> b -> c",
		}},
		{"the shortest cycle through the first task", head +
			"  - {id: a, subagent: s, depends_on: [c, b]}\n" +
			"  - {id: b, subagent: s, depends_on: [a]}\n" +
			"  - {id: c, subagent: s, depends_on: [d]}\n" +
			"  - {id: d, subagent: s, depends_on: [a]}", []string{
			"p.yaml:4: tasks[0].depends_on[1]: cycle: a -> b -> a",
		}},
		{"every separate cycle", head +
			"  - {id: a, subagent: s, depends_on: [b]}\n" +
			"  - {id: b, subagent: s, depends_on: [a]}\n" +
			"  - {id: c, subagent: s, depends_on: [a, d]}\n" +
			"  - {id: d, subagent: s, depends_on: [c]}", []string{
			"p.yaml:4: tasks[0].depends_on[0]: cycle: a -> b -> a",
			"p.yaml:6: tasks[2].depends_on[1]: cycle: c -> d -> c",
		}},
		{"a long cycle is printed with its ends", chainCycle(1000), []string{
			"p.yaml:4: tasks[0].depends_on[0]: cycle: " + strings.Join(longNames, " -> "),
		}},
		{"a self-dependency is not also a cycle", head + "  - {id: a, subagent: s, depends_on: [a]}", []string{
			`p.yaml:4: tasks[0].depends_on[0]: task "a" depends on itself`,
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

// TestParse_CycleAmongManyTasks hides one cycle in a large layered plan: exactly that cycle is
// reported, and the tasks that merely depend on it are not.
func TestParse_CycleAmongManyTasks(t *testing.T) {
	src := layered(10_000, 100, 200)
	mustParse(t, src) // acyclic as built
	// t200 (layer 2) depends on t100 (layer 1), which depends on t0: making t0 depend on t200
	// closes exactly one cycle, which the other 9,997 tasks only lead into or out of.
	src = strings.Replace(src, "  - id: t0\n    subagent: fixer\n", "  - id: t0\n    subagent: fixer\n    depends_on: [t200]\n", 1)
	want := []string{"p.yaml:6: tasks[0].depends_on[0]: cycle: t0 -> t200 -> t100 -> t0"}
	if diff := cmp.Diff(want, parseErrs(t, src)); diff != "" {
		t.Errorf("Parse errors (-want +got):\n%s", diff)
	}
}
