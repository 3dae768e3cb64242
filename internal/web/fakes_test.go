package web

import (
	"context"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
)

// fakeOrch is the engine's edge: a run in memory, a feed and the actions it was given.
type fakeOrch struct {
	mu      sync.Mutex
	run     api.Run
	actions []api.ActionRequest
	subs    []chan api.Event
}

func newFakeOrch(tasks ...api.Task) *fakeOrch {
	r := api.Run{ID: "run1", Name: "demo", State: api.RunRunning, Counts: map[string]int{}, Total: len(tasks), Tasks: tasks, CreatedAt: time.Unix(1e9, 0)}
	return &fakeOrch{run: r}
}

func (f *fakeOrch) Runs(context.Context, int) ([]api.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.run
	r.Tasks = nil
	return []api.Run{r}, nil
}

func (f *fakeOrch) Status(_ context.Context, ref string) (api.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ref != f.run.ID && ref != f.run.Name {
		return api.Run{}, orch.ErrNotFound
	}
	r := f.run
	r.Tasks = append([]api.Task(nil), f.run.Tasks...)
	return r, nil
}

func (f *fakeOrch) Subscribe(string) (<-chan api.Event, func()) {
	ch := make(chan api.Event, 16)
	f.mu.Lock()
	f.subs = append(f.subs, ch)
	f.mu.Unlock()
	return ch, func() {}
}

func (f *fakeOrch) set(task, state string) {
	f.mu.Lock()
	for i := range f.run.Tasks {
		if f.run.Tasks[i].ID == task {
			f.run.Tasks[i].State = state
		}
	}
	subs := f.subs
	f.mu.Unlock()
	for _, ch := range subs {
		ch <- api.Event{Run: f.run.ID, Task: task, State: state, Kind: "orch.task." + state}
	}
}

func (f *fakeOrch) act(req api.ActionRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actions = append(f.actions, req)
	return nil
}

func (f *fakeOrch) Cancel(_ context.Context, req api.ActionRequest) error { return f.act(req) }
func (f *fakeOrch) Answer(_ context.Context, req api.ActionRequest) error { return f.act(req) }
func (f *fakeOrch) Retry(_ context.Context, req api.ActionRequest) error  { return f.act(req) }

type fakeDispatches struct{ recs map[string]*dispatch.Record }

func (f fakeDispatches) Get(_ context.Context, id string) (*dispatch.Record, error) {
	if r, ok := f.recs[id]; ok {
		return r, nil
	}
	return nil, dispatch.ErrNotFound
}

func (f fakeDispatches) List(context.Context, dispatch.ListFilter) ([]*dispatch.Record, error) {
	out := []*dispatch.Record{}
	for _, r := range f.recs {
		out = append(out, r)
	}
	return out, nil
}

func (f fakeDispatches) DecideApproval(_ context.Context, id, call string, approve bool, reason, actor, digest string) (*dispatch.Approval, error) {
	return &dispatch.Approval{CallID: call, Actor: actor}, nil
}
