package branch

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

func ids(ts []api.Task) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.ID)
	}
	return strings.Join(s, ",")
}

// A run's branch puts each task after what it depends on, ties by task id, whatever order
// the run lists its tasks in; only succeeded tasks with a dispatch become commits.
func TestRunOrder(t *testing.T) {
	ok := func(id string, deps ...string) api.Task {
		return api.Task{ID: id, State: lifecycle.TaskSucceeded, DispatchID: "D-" + id, DependsOn: deps}
	}
	for _, c := range []struct {
		name  string
		tasks []api.Task
		want  string
	}{
		{"independent by id", []api.Task{ok("c"), ok("a"), ok("b")}, "a,b,c"},
		{"a dependency before a smaller id", []api.Task{ok("a", "d"), ok("b"), ok("c", "b"), ok("d")}, "b,c,d,a"},
		{"chain against id order", []api.Task{ok("a", "b"), ok("b", "c"), ok("c")}, "c,b,a"},
		{"diamond", []api.Task{ok("top"), ok("left", "top"), ok("right", "top"), ok("bottom", "left", "right")}, "top,left,right,bottom"},
		{"failed and skipped tasks make no commit but keep the order",
			[]api.Task{ok("a", "f"), {ID: "f", State: lifecycle.TaskFailed, DispatchID: "D-f"}, {ID: "s", State: lifecycle.TaskSkipped}, ok("z")}, "a,z"},
		{"succeeded without a dispatch", []api.Task{{ID: "a", State: lifecycle.TaskSucceeded}, ok("b")}, "b"},
		{"a dependency the run does not have", []api.Task{ok("b", "gone"), ok("a", "b")}, "b,a"},
		{"a cycle keeps id order", []api.Task{ok("b", "a"), ok("a", "b"), ok("c")}, "c,a,b"},
		{"empty", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ids(runOrder(c.tasks)); got != c.want {
				t.Errorf("runOrder = %s, want %s", got, c.want)
			}
		})
	}
}

// Any order of the same tasks gives the same branch order, and it respects every dependency.
func TestRunOrder_Deterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		n := 1 + r.IntN(12)
		tasks := make([]api.Task, n)
		for i := range tasks {
			tasks[i] = api.Task{ID: string(rune('a'+r.IntN(26))) + string(rune('0'+i)), State: lifecycle.TaskSucceeded, DispatchID: "D"}
			for j := range i { // dependencies only on earlier tasks: acyclic
				if r.IntN(3) == 0 {
					tasks[i].DependsOn = append(tasks[i].DependsOn, tasks[j].ID)
				}
			}
		}
		want := ids(runOrder(tasks))
		shuffled := slices.Clone(tasks)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		got := runOrder(shuffled)
		if ids(got) != want {
			t.Fatalf("order depends on the listing: %s vs %s", ids(got), want)
		}
		pos := map[string]int{}
		for i, tk := range got {
			pos[tk.ID] = i
		}
		for _, tk := range got {
			for _, d := range tk.DependsOn {
				if pos[d] > pos[tk.ID] {
					t.Fatalf("%s placed before its dependency %s: %s", tk.ID, d, ids(got))
				}
			}
		}
	}
}
