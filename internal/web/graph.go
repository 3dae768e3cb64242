package web

import (
	"net/http"
	"strconv"
)

// The graph endpoint answers the part of a run's DAG a page shows: the nodes whose boxes meet
// the asked rectangle (with their current states) and the edges whose bounds do, as
// coordinates. The page asks again as it scrolls, so a 100,000-task run costs the browser and
// the server what is on screen, never the whole graph. A rectangle is at most maxGraphSpan
// on each side, and an answer holds at most maxGraphNodes nodes and maxGraphEdges edges
// ("cut" says when more met it).
const (
	maxGraphSpan  = 8000
	maxGraphNodes = 2000
	maxGraphEdges = 6000
)

type graphNode struct {
	ID    string `json:"id"`
	X     int32  `json:"x"`
	Y     int32  `json:"y"`
	State string `json:"st"`
	Sub   string `json:"sub"`
	Locks string `json:"locks,omitempty"`
}

type graphView struct {
	W     int         `json:"w"`
	H     int         `json:"h"`
	NodeW int         `json:"nw"`
	NodeH int         `json:"nh"`
	Total int         `json:"total"`
	Nodes []graphNode `json:"nodes"`
	// Deps and Needs are edges as flat [x1, y1, x2, y2, ...]: from the bottom middle of the
	// dependency's node to the top middle of the dependent's.
	Deps  []int32 `json:"deps"`
	Needs []int32 `json:"needs"`
	Cut   bool    `json:"cut,omitempty"`
}

func (s *Server) apiGraph(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var runID string
	var total int
	if err := s.read(ctx, func() error {
		run, err := s.runSummary(ctx, r.PathValue("run"), streamFresh)
		runID, total = run.ID, run.Total
		return err
	}); err != nil {
		s.fail(w, r, err)
		return
	}
	sh, ok, err := s.shapes.get(ctx, runID, total, graphWait)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !ok {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "the graph is still being laid out; try again", http.StatusServiceUnavailable)
		return
	}
	q := r.URL.Query()
	num := func(k string, def int) int32 {
		n, err := strconv.Atoi(q.Get(k))
		if err != nil {
			return int32(def)
		}
		return int32(min(max(n, 0), 1<<30))
	}
	x0, y0 := num("x0", 0), num("y0", 0)
	x1, y1 := min(num("x1", 1400), x0+maxGraphSpan), min(num("y1", 900), y0+maxGraphSpan)
	g := graphView{W: sh.width, H: sh.height, NodeW: nodeW, NodeH: nodeH, Total: len(sh.ids), Nodes: []graphNode{}, Deps: []int32{}, Needs: []int32{}}
	var idx []int
	for i := range sh.ids {
		if x, y := sh.x[i], sh.y[i]; x >= 0 && x+nodeW >= x0 && x <= x1 && y+nodeH >= y0 && y <= y1 {
			if len(idx) == maxGraphNodes {
				g.Cut = true
				break
			}
			idx = append(idx, i)
		}
	}
	edges := 0
	for i := range sh.ids {
		for k, d := range sh.depsOf(i) {
			ax, ay, bx, by := sh.x[d]+nodeW/2, sh.y[d]+nodeH, sh.x[i]+nodeW/2, sh.y[i]
			if sh.x[d] < 0 || sh.x[i] < 0 || max(ax, bx) < x0 || min(ax, bx) > x1 || max(ay, by) < y0 || min(ay, by) > y1 {
				continue
			}
			if edges == maxGraphEdges {
				g.Cut = true
				break
			}
			edges++
			if sh.needs[int(sh.depStart[i])+k] {
				g.Needs = append(g.Needs, ax, ay, bx, by)
			} else {
				g.Deps = append(g.Deps, ax, ay, bx, by)
			}
		}
	}
	states := map[int]string{}
	if err := s.read(ctx, func() error {
		rows, err := s.src.Runs.TasksAt(ctx, runID, idx)
		for _, t := range rows {
			states[t.Index] = t.State
		}
		return err
	}); err != nil {
		s.fail(w, r, err)
		return
	}
	for _, i := range idx {
		g.Nodes = append(g.Nodes, graphNode{ID: sh.ids[i], X: sh.x[i], Y: sh.y[i], State: states[i], Sub: sh.sub[i], Locks: sh.locks[i]})
	}
	writeJSON(w, g)
}
