package web

import (
	"slices"
	"strings"

	"github.com/agora-dev/agora/internal/orch/api"
)

// Layout of the DAG: nodes in layers (a task sits one layer below its deepest dependency),
// a wide layer wrapped into rows so a page stays readable, ordered within a layer by the
// mean position of the tasks it depends on (fewer crossings). Computed here, so the page
// only draws.
const (
	nodeW, nodeH = 168, 40
	gapX, gapY   = 24, 56
	rowGap       = 16
	maxPerRow    = 24
	margin       = 16
)

type dagNode struct {
	ID, State, Subagent, Locks string
	X, Y                       int
}

// dagEdge runs from node From (a dependency) to node To, both indexes into dag.Nodes.
type dagEdge struct {
	From, To int
	Needs    bool
}

type dag struct {
	Nodes         []dagNode
	Edges         []dagEdge
	Width, Height int
}

// layout lays out a run's tasks (a valid plan: no cycles, every dependency a task).
func layout(tasks []api.Task) dag {
	idx := make(map[string]int, len(tasks))
	for i, t := range tasks {
		idx[t.ID] = i
	}
	// Longest path from a root, in an order where every dependency comes first (Kahn).
	layer := make([]int, len(tasks))
	indeg := make([]int, len(tasks))
	children := make([][]int, len(tasks))
	for i, t := range tasks {
		for _, d := range t.DependsOn {
			if j, ok := idx[d]; ok {
				indeg[i]++
				children[j] = append(children[j], i)
			}
		}
	}
	queue := make([]int, 0, len(tasks))
	for i := range tasks {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	for k := 0; k < len(queue); k++ {
		i := queue[k]
		for _, c := range children[i] {
			layer[c] = max(layer[c], layer[i]+1)
			if indeg[c]--; indeg[c] == 0 {
				queue = append(queue, c)
			}
		}
	}
	var layers [][]int
	for _, i := range queue {
		for len(layers) <= layer[i] {
			layers = append(layers, nil)
		}
		layers[layer[i]] = append(layers[layer[i]], i)
	}
	pos := make([]float64, len(tasks))
	g := dag{}
	y := margin
	for _, l := range layers {
		// Order by the mean position of the dependencies, plan order breaking ties.
		key := make(map[int]float64, len(l))
		for _, i := range l {
			sum, n := 0.0, 0
			for _, d := range tasks[i].DependsOn {
				if j, ok := idx[d]; ok {
					sum += pos[j]
					n++
				}
			}
			if n > 0 {
				key[i] = sum / float64(n)
			} else {
				key[i] = float64(i)
			}
		}
		slices.SortStableFunc(l, func(a, b int) int {
			switch {
			case key[a] < key[b]:
				return -1
			case key[a] > key[b]:
				return 1
			}
			return a - b
		})
		for k, i := range l {
			row, col := k/maxPerRow, k%maxPerRow
			pos[i] = float64(k)
			x := margin + col*(nodeW+gapX)
			ny := y + row*(nodeH+rowGap)
			t := tasks[i]
			g.Nodes = append(g.Nodes, dagNode{ID: t.ID, State: t.State, Subagent: t.Subagent, Locks: strings.Join(t.Locks, ", "), X: x, Y: ny})
			g.Width = max(g.Width, x+nodeW+margin)
		}
		rows := (len(l) + maxPerRow - 1) / maxPerRow
		y += rows*(nodeH+rowGap) - rowGap + gapY
	}
	g.Height = y - gapY + margin
	at := make(map[string]int, len(g.Nodes))
	for i, n := range g.Nodes {
		at[n.ID] = i
	}
	for _, t := range tasks {
		to, ok := at[t.ID]
		if !ok {
			continue
		}
		for _, d := range t.DependsOn {
			if from, ok := at[d]; ok {
				g.Edges = append(g.Edges, dagEdge{From: from, To: to, Needs: slices.Contains(t.Needs, d)})
			}
		}
	}
	return g
}
