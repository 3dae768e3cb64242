package orch

import (
	"context"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// withOptions fills in, for each task of r waiting for an answer, the options its dispatch's
// question offered: the service keeps the question, the dispatch record the options. `agora
// orch status` and `orch watch -o json` show a run so, as the MCP status and watch tools do
// (one shape for a run). A record it cannot read leaves the task as it was.
func withOptions(ctx context.Context, f *cmdutil.Factory, r api.Run) api.Run {
	var tasks []api.Task
	for i, t := range r.Tasks {
		if t.State != lifecycle.TaskNeedsInput || t.DispatchID == "" || len(t.Options) > 0 {
			continue
		}
		d, err := f.Dispatcher(ctx)
		if err != nil {
			return r
		}
		rec, err := d.Records.Get(ctx, t.DispatchID)
		if err != nil || rec.Result == nil || rec.Result.NeedsInput == nil || len(rec.Result.NeedsInput.Options) == 0 {
			continue
		}
		if tasks == nil {
			tasks = append([]api.Task(nil), r.Tasks...) // never change the caller's tasks
		}
		tasks[i].Options = append([]string(nil), rec.Result.NeedsInput.Options...)
	}
	if tasks != nil {
		r.Tasks = tasks
	}
	return r
}

// withLearn marks each task whose dispatch was a learn dispatch (docs/learn.md), from
// agora.db in one query: a task on a target in mode: learn is one though its plan does not
// say learn. A run whose dispatches cannot be read keeps the marks its plan gives.
func withLearn(ctx context.Context, f *cmdutil.Factory, r api.Run) api.Run {
	if r.ID == "" {
		return r
	}
	d, err := f.Dispatcher(ctx)
	if err != nil {
		return r
	}
	learn, err := d.Records.LearnInRun(ctx, r.ID)
	if err != nil || len(learn) == 0 {
		return r
	}
	tasks := append([]api.Task(nil), r.Tasks...) // never change the caller's tasks
	for i, t := range tasks {
		if learn[t.DispatchID] {
			tasks[i].Learn = true
		}
	}
	r.Tasks = tasks
	return r
}
