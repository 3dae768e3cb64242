package plan

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// graph holds each task's dependencies (task -> the tasks it depends on) in compressed rows:
// the dependencies of task i are deps[start[i]:start[i+1]]. Edges are added task by task.
type graph struct {
	start []int32
	deps  []int32
	comp  []int32 // after components: -1 minus the root task of each task's component
}

func newGraph(n int) *graph {
	return &graph{start: make([]int32, 1, n+1), deps: make([]int32, 0, 2*n)}
}

// add records that the task being built depends on task j.
func (g *graph) add(j int) { g.deps = append(g.deps, int32(j)) }

// close ends the task being built.
func (g *graph) close() { g.start = append(g.start, int32(len(g.deps))) }

func (g *graph) edges(i int32) []int32 { return g.deps[g.start[i]:g.start[i+1]] }

// cycles reports one cycle in every strongly connected component of more than one task, at
// the entry of its first task (in plan order) that starts the cycle. Self-dependencies are not
// edges: they were reported where they were written.
func (v *validator) cycles(g *graph, tasks []Task) {
	for _, first := range g.components() {
		cycle := g.shortestCycle(first)
		if len(cycle) < 2 {
			continue
		}
		v.add(taskPath(int(first))+entryPath(&tasks[first], tasks[cycle[1]].ID), "cycle: %s", cyclePath(tasks, cycle))
	}
}

// maxCyclePrinted is the longest cycle printed in full; a longer one keeps its ends.
const maxCyclePrinted = 32

// cyclePath prints a cycle as "a -> b -> c -> a", where -> reads "depends on".
func cyclePath(tasks []Task, cycle []int32) string {
	var b strings.Builder
	for k, t := range cycle {
		if len(cycle) > maxCyclePrinted && k == maxCyclePrinted/2 {
			fmt.Fprintf(&b, "(%d more) -> ", len(cycle)-maxCyclePrinted)
		}
		if len(cycle) > maxCyclePrinted && k >= maxCyclePrinted/2 && k < len(cycle)-maxCyclePrinted/2 {
			continue
		}
		b.WriteString(tasks[t].ID)
		b.WriteString(" -> ")
	}
	b.WriteString(tasks[cycle[0]].ID)
	return b.String()
}

// entryPath is the path, relative to a task, of the entry naming dep.
func entryPath(t *Task, dep string) string {
	if f := t.FanOut(); f != nil {
		if f.From == dep {
			return ".fan_out.from"
		}
		return ".fan_out.template" + entryPath(&f.Template, dep)
	}
	if k := slices.Index(t.DependsOn, dep); k >= 0 {
		return ".depends_on[" + strconv.Itoa(k) + "]"
	}
	if k := slices.Index(t.Base(), dep); k >= 0 {
		return ".base[" + strconv.Itoa(k) + "]"
	}
	for _, key := range slices.Sorted(maps.Keys(t.Needs())) {
		if t.Needs()[key].From == dep {
			return ".needs." + key + ".from"
		}
	}
	return ""
}

// components finds the strongly connected components of more than one task with Tarjan's
// algorithm, iteratively (a plan may be a chain of MaxTasks tasks), and returns the first
// task (in plan order) of each, in plan order.
func (g *graph) components() []int32 {
	n := int32(len(g.start) - 1)
	index := make([]int32, n) // 0: not yet visited; else the visit number
	low := make([]int32, n)
	onStack := make([]bool, n)
	var stack []int32
	type frame struct{ v, next int32 }
	var call []frame
	var firsts []int32
	counter := int32(0)
	visit := func(w int32) {
		counter++
		index[w], low[w] = counter, counter
		stack = append(stack, w)
		onStack[w] = true
		call = append(call, frame{w, g.start[w]})
	}
	for s := range n {
		if index[s] != 0 {
			continue
		}
		visit(s)
		for len(call) > 0 {
			f := &call[len(call)-1]
			if f.next < g.start[f.v+1] {
				w := g.deps[f.next]
				f.next++
				if index[w] == 0 {
					visit(w)
				} else if onStack[w] {
					low[f.v] = min(low[f.v], index[w])
				}
				continue
			}
			u := f.v
			call = call[:len(call)-1]
			if len(call) > 0 {
				p := call[len(call)-1].v
				low[p] = min(low[p], low[u])
			}
			if low[u] != index[u] {
				continue
			}
			first, size := u, 0
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				first = min(first, w)
				size++
				// A finished component's members are never on the stack again; mark them
				// with its root so shortestCycle can stay inside it.
				low[w] = -1 - u
				if w == u {
					break
				}
			}
			if size > 1 {
				firsts = append(firsts, first)
			}
		}
	}
	slices.Sort(firsts)
	g.comp = low
	return firsts
}

// shortestCycle returns a shortest cycle through first inside its component, as the tasks in
// dependency order starting with first (first depends on the second, and so on; the last
// depends on first). It is a breadth-first search, so each component costs its own size.
func (g *graph) shortestCycle(first int32) []int32 {
	comp := g.comp[first]
	parent := map[int32]int32{first: -1}
	queue := []int32{first}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, w := range g.edges(u) {
			if g.comp[w] != comp {
				continue
			}
			if w == first {
				var cycle []int32
				for x := u; x != -1; x = parent[x] {
					cycle = append(cycle, x)
				}
				slices.Reverse(cycle)
				return cycle
			}
			if _, seen := parent[w]; !seen {
				parent[w] = u
				queue = append(queue, w)
			}
		}
	}
	return []int32{first} // unreachable: first is in a component of more than one task
}
