package web

import (
	"fmt"
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
	ID, State, Subagent, Locks, Href string
	X, Y, W, H                       int
	Label                            string
}

type dagEdge struct {
	Path  string
	Needs bool
}

type dag struct {
	Nodes         []dagNode
	Edges         []dagEdge
	Width, Height int
}

// layout lays out a run's tasks (a valid plan: no cycles, every dependency a task).
func layout(runID string, tasks []api.Task) dag {
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
			g.Nodes = append(g.Nodes, dagNode{ID: t.ID, State: t.State, Subagent: t.Subagent, Locks: strings.Join(t.Locks, ", "),
				Href: "/runs/" + runID + "/tasks/" + t.ID, X: x, Y: ny, W: nodeW, H: nodeH, Label: cut(t.ID, 22)})
			g.Width = max(g.Width, x+nodeW+margin)
		}
		rows := (len(l) + maxPerRow - 1) / maxPerRow
		y += rows*(nodeH+rowGap) - rowGap + gapY
	}
	g.Height = y - gapY + margin
	at := make(map[string]*dagNode, len(g.Nodes))
	for i := range g.Nodes {
		at[g.Nodes[i].ID] = &g.Nodes[i]
	}
	for _, t := range tasks {
		to := at[t.ID]
		for _, d := range t.DependsOn {
			from := at[d]
			if from == nil || to == nil {
				continue
			}
			x1, y1 := from.X+from.W/2, from.Y+from.H
			x2, y2 := to.X+to.W/2, to.Y
			mid := (y1 + y2) / 2
			g.Edges = append(g.Edges, dagEdge{Path: fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, x1, mid, x2, mid, x2, y2),
				Needs: slices.Contains(t.Needs, d)})
		}
	}
	return g
}

// cut shortens s to n runes with an ellipsis.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
