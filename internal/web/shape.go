package web

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/verdict"
)

// A run's shape is what its plan says of its tasks (subagent, dependencies, locks), why the
// run added those it added (fan-out items, reviewers, fixes), and the DAG's layout. All follow
// from the stored plan and the run's extensions, which are only ever appended to, so a run's
// shape is read once (again when the run has more tasks than it) ([plan.ReadOutline], a fraction of a full parse), laid out once and kept: the
// run page's task table and the graph endpoint read it, never the plan again. Shapes are
// kept for at most maxShapeTasks tasks in all (the least recently used go first), and built
// one at a time, off the request: a page waits for one at most shapeWait and is otherwise
// drawn without it (the graph, fetched by the page's script, waits longer).
const (
	maxShapeTasks = 300_000
	shapeWait     = 150 * time.Millisecond
	graphWait     = 20 * time.Second
	shapeTimeout  = 2 * time.Minute
)

// Layout of the DAG: nodes in layers (a task sits one layer below its deepest dependency),
// a wide layer wrapped into rows so a page stays readable, ordered within a layer by the
// mean position of the tasks it depends on (fewer crossings).
const (
	nodeW, nodeH = 168, 40
	gapX, gapY   = 24, 56
	rowGap       = 16
	maxPerRow    = 24
	margin       = 16
)

// shape is one run's tasks in plan order, compactly: a 100,000-task run takes a few MB.
type shape struct {
	ids    []string
	index  map[string]int32
	sub    []string        // each task's subagent (shared strings)
	verify []*verdict.Spec // each task's verify gate, nil: none
	learn  []bool          // each task's learn: true (docs/learn.md)
	locks  []string        // each task's locks as a view lists them, ", "-joined
	// depStart[i]:depStart[i+1] are task i's dependencies in deps (plan positions), needs
	// marking those it takes products from.
	depStart []int32
	deps     []int32
	needs    []bool
	// added[i-plan] is why task i (from position plan on) was added; fixes are each loop
	// task's fixes (positions, oldest first), what its product is read from.
	plan  int
	added []api.Added
	fixes map[int32][]int32
	// x and y place each task's node (-1: not placed, which a valid plan never has).
	x, y          []int32
	width, height int
}

func (s *shape) depsOf(i int) []int32 { return s.deps[s.depStart[i]:s.depStart[i+1]] }

// depNames are task i's dependencies by id.
func (s *shape) depNames(i int) []string {
	var out []string
	for _, d := range s.depsOf(i) {
		out = append(out, s.ids[d])
	}
	return out
}

// addedAt is why task i was added, nil for a task of the plan.
func (s *shape) addedAt(i int) *api.Added {
	if i < s.plan || i-s.plan >= len(s.added) {
		return nil
	}
	a := s.added[i-s.plan]
	return &a
}

// newShape compacts a run's outline and lays it out.
func newShape(rs orch.RunShape) *shape {
	outline := rs.Tasks
	n := len(outline)
	s := &shape{ids: make([]string, n), index: make(map[string]int32, n), sub: make([]string, n), locks: make([]string, n),
		verify: make([]*verdict.Spec, n), learn: make([]bool, n), depStart: make([]int32, n+1), x: make([]int32, n), y: make([]int32, n)}
	subs := map[string]string{}
	for i, o := range outline {
		s.ids[i] = o.ID
		s.index[o.ID] = int32(i)
		if _, ok := subs[o.Subagent]; !ok {
			subs[o.Subagent] = o.Subagent
		}
		s.sub[i] = subs[o.Subagent]
		s.verify[i] = o.Verify
		s.learn[i] = o.Learn
		if len(o.Locks) > 0 {
			s.locks[i] = strings.Join(plan.LockNames(o.Locks), ", ")
		}
	}
	for i, o := range outline {
		for _, d := range o.Deps {
			if j, ok := s.index[d]; ok {
				s.deps = append(s.deps, j)
				_, isNeed := slices.BinarySearch(o.Needs, d)
				s.needs = append(s.needs, isNeed)
			}
		}
		// A task the run added takes the work it judges or fixes through needs alone (it
		// was added once that work was done): those are its edges too.
		for _, d := range o.Needs {
			if j, ok := s.index[d]; ok && !slices.Contains(o.Deps, d) {
				s.deps = append(s.deps, j)
				s.needs = append(s.needs, true)
			}
		}
		s.depStart[i+1] = int32(len(s.deps))
	}
	s.plan, s.added = n-len(rs.Added), rs.Added
	for k, a := range rs.Added {
		if loop, ok := s.index[a.Task]; ok && a.Cause == "fix" {
			if s.fixes == nil {
				s.fixes = map[int32][]int32{}
			}
			s.fixes[loop] = append(s.fixes[loop], int32(s.plan+k))
		}
	}
	s.layout()
	return s
}

// layout places every task: longest path from a root in an order where every dependency
// comes first (Kahn), then each layer ordered by the mean position of the dependencies,
// plan order breaking ties, and wrapped at maxPerRow.
func (s *shape) layout() {
	n := len(s.ids)
	layer := make([]int32, n)
	indeg := make([]int32, n)
	childStart := make([]int32, n+1)
	for i := range n {
		indeg[i] = int32(len(s.depsOf(i)))
		for _, d := range s.depsOf(i) {
			childStart[d+1]++
		}
	}
	for i := range n {
		childStart[i+1] += childStart[i]
	}
	children := make([]int32, len(s.deps))
	fill := slices.Clone(childStart[:n])
	for i := range n {
		for _, d := range s.depsOf(i) {
			children[fill[d]] = int32(i)
			fill[d]++
		}
	}
	queue := make([]int32, 0, n)
	for i := range n {
		if indeg[i] == 0 {
			queue = append(queue, int32(i))
		}
	}
	for k := 0; k < len(queue); k++ {
		i := queue[k]
		for _, c := range children[childStart[i]:childStart[i+1]] {
			layer[c] = max(layer[c], layer[i]+1)
			if indeg[c]--; indeg[c] == 0 {
				queue = append(queue, c)
			}
		}
	}
	var layers [][]int32
	for _, i := range queue {
		for len(layers) <= int(layer[i]) {
			layers = append(layers, nil)
		}
		layers[layer[i]] = append(layers[layer[i]], i)
	}
	for i := range n {
		s.x[i], s.y[i] = -1, -1
	}
	pos := make([]float64, n)
	key := make([]float64, n)
	y := margin
	for _, l := range layers {
		for _, i := range l {
			sum, m := 0.0, 0
			for _, d := range s.depsOf(int(i)) {
				sum += pos[d]
				m++
			}
			if m > 0 {
				key[i] = sum / float64(m)
			} else {
				key[i] = float64(i)
			}
		}
		slices.SortStableFunc(l, func(a, b int32) int {
			switch {
			case key[a] < key[b]:
				return -1
			case key[a] > key[b]:
				return 1
			}
			return int(a - b)
		})
		for k, i := range l {
			row, col := k/maxPerRow, k%maxPerRow
			pos[i] = float64(k)
			s.x[i], s.y[i] = int32(margin+col*(nodeW+gapX)), int32(y+row*(nodeH+rowGap))
			s.width = max(s.width, int(s.x[i])+nodeW+margin)
		}
		rows := (len(l) + maxPerRow - 1) / maxPerRow
		y += rows*(nodeH+rowGap) - rowGap + gapY
	}
	s.height = y - gapY + margin
}

// shapes keeps run shapes by run id.
type shapes struct {
	src   Runs
	build chan struct{} // one build at a time

	mu sync.Mutex
	// runs are the kept shapes, and tasks their tasks in all; guarded by mu.
	runs  map[string]*shapeEntry
	tasks int
}

type shapeEntry struct {
	done chan struct{}
	s    *shape
	err  error
	// used and ready (built and counted in shapes.tasks) are guarded by shapes.mu.
	used  time.Time
	ready bool
}

func newShapes(src Runs) *shapes {
	return &shapes{src: src, build: make(chan struct{}, 1), runs: map[string]*shapeEntry{}}
}

// get returns the shape of run id of tasks tasks, starting its build when none is kept (or
// the kept one has fewer tasks: the run was extended since) and waiting for it at most wait;
// ok is false when it is not ready by then (or its build failed: err says why).
func (c *shapes) get(ctx context.Context, id string, tasks int, wait time.Duration) (s *shape, ok bool, err error) {
	c.mu.Lock()
	e := c.runs[id]
	if e != nil && e.ready && len(e.s.ids) < tasks {
		c.tasks -= len(e.s.ids)
		delete(c.runs, id)
		e = nil
	}
	if e == nil {
		e = &shapeEntry{done: make(chan struct{})}
		c.runs[id] = e
		go c.make(context.WithoutCancel(ctx), id, e)
	}
	e.used = time.Now()
	c.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-e.done:
		return e.s, e.err == nil, e.err
	case <-t.C:
	case <-ctx.Done():
	}
	return nil, false, nil
}

func (c *shapes) make(ctx context.Context, id string, e *shapeEntry) {
	defer close(e.done)
	ctx, cancel := context.WithTimeout(ctx, shapeTimeout)
	defer cancel()
	select {
	case c.build <- struct{}{}:
		defer func() { <-c.build }()
	case <-ctx.Done():
		e.err = ctx.Err()
	}
	if e.err == nil {
		var rs orch.RunShape
		if rs, e.err = c.src.Shape(ctx, id); e.err == nil {
			e.s = newShape(rs)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.err != nil {
		if c.runs[id] == e {
			delete(c.runs, id) // the next reader tries again
		}
		return
	}
	if c.runs[id] != e {
		return // replaced meanwhile by a newer build
	}
	e.ready = true
	c.tasks += len(e.s.ids)
	c.evict(id)
}

// evict drops the least recently used shapes but keep until the kept ones hold at most
// maxShapeTasks tasks. c.mu is held.
func (c *shapes) evict(keep string) {
	for c.tasks > maxShapeTasks {
		oldest := ""
		for id, e := range c.runs {
			if id == keep || !e.ready {
				continue
			}
			if oldest == "" || e.used.Before(c.runs[oldest].used) {
				oldest = id
			}
		}
		if oldest == "" {
			return
		}
		c.tasks -= len(c.runs[oldest].s.ids)
		delete(c.runs, oldest)
	}
}
