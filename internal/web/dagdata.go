package web

// dagData is the layout as the run page's script gets it, in a JSON data block: parallel
// arrays with one entry per node and the edges as pairs of node indexes. The script draws
// only the nodes and edges inside the scrolled view, so a 1,000-task run costs the browser
// tens of elements, not thousands, and ~60 KB of JSON instead of ~660 KB of SVG markup.
type dagData struct {
	W     int      `json:"w"`
	H     int      `json:"h"`
	NodeW int      `json:"nw"`
	NodeH int      `json:"nh"`
	ID    []string `json:"id"`
	X     []int    `json:"x"`
	Y     []int    `json:"y"`
	State []string `json:"st"`
	Sub   []string `json:"sub"`
	Locks []string `json:"locks"`
	// Deps and Needs are flat [from, to, from, to, ...] pairs; a needs edge is only in Needs.
	Deps  []int `json:"deps"`
	Needs []int `json:"needs"`
}

func (g dag) data() dagData {
	n := len(g.Nodes)
	d := dagData{W: g.Width, H: g.Height, NodeW: nodeW, NodeH: nodeH, ID: make([]string, n), X: make([]int, n), Y: make([]int, n),
		State: make([]string, n), Sub: make([]string, n), Locks: make([]string, n), Deps: []int{}, Needs: []int{}}
	for i, nd := range g.Nodes {
		d.ID[i], d.X[i], d.Y[i], d.State[i], d.Sub[i], d.Locks[i] = nd.ID, nd.X, nd.Y, nd.State, nd.Subagent, nd.Locks
	}
	for _, e := range g.Edges {
		if e.Needs {
			d.Needs = append(d.Needs, e.From, e.To)
		} else {
			d.Deps = append(d.Deps, e.From, e.To)
		}
	}
	return d
}
