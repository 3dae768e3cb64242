package web

import (
	"context"
	"time"

	"github.com/agora-dev/agora/internal/hostpath"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
)

// taskRow is one row of a run page's tasks table (the "taskrow" template): the task as the
// page shows it, and its run, for the link.
type taskRow struct {
	RunID string
	api.Task
}

// streamShapeWait is how long a run's stream waits for the run's shape before it renders a
// row: longer than a page waits (shapeWait), since no person waits on it, so a row the page
// drew with its plan's columns is not replaced by one without them while the shape is read.
const streamShapeWait = 2 * time.Second

// listedRows reads the rows of run's tasks ids (one turn of the reads gate) and renders each
// as a fresh load of the run page would, masked by m as the page is. The run's event stream
// sends them and the page puts each in place of its row, so a live row's every cell (state,
// attempts, verify, reason) is the server's own render, never a cell the page patched. total
// is the run's task count as last read (the shape cache starts over when the run has grown).
// early says the rows went without their plan's columns because the run's shape was still
// being built after streamShapeWait (the stream sends them again once it is); a shape whose
// build failed is not early: a fresh load has no columns either.
func (s *Server) listedRows(ctx context.Context, runID string, total int, ids []string, m *hostpath.Mask) (tasks []api.Task, out map[string]string, early bool, err error) {
	var rows []orch.TaskRow
	var learn map[string]bool
	if err := s.read(ctx, func() (err error) {
		if rows, err = s.src.Runs.TasksNamed(ctx, runID, ids); err != nil {
			return err
		}
		// As markLearn: a run whose dispatches cannot be read keeps its plan's marks.
		learn, _ = s.src.Dispatches.LearnInRun(ctx, runID)
		return nil
	}); err != nil {
		return nil, nil, false, err
	}
	// The shape is read outside the gate, as the graph's is.
	sh, _, shapeErr := s.shapes.get(ctx, runID, total, streamShapeWait)
	// A task that succeeded with its fix's work says so in its row, as a fresh load does.
	var products map[int]string
	if err := s.read(ctx, func() (err error) {
		products, err = s.products(ctx, runID, sh, rows)
		return err
	}); err != nil {
		return nil, nil, false, err
	}
	tasks = make([]api.Task, 0, len(rows))
	out = make(map[string]string, len(rows))
	for _, r := range rows {
		t := withShape(r, sh)
		t.Product = products[r.Index]
		t.Learn = t.Learn || learn[t.DispatchID]
		html, err := s.pages.fragment("taskrow", masked(taskRow{RunID: runID, Task: t}, m))
		if err != nil {
			return nil, nil, false, err
		}
		tasks = append(tasks, t)
		out[t.ID] = html
	}
	return tasks, out, sh == nil && shapeErr == nil, nil
}
