package web

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/store"
)

// fakeOrch is the engine's edge: a run, a feed and the actions it was given. The run is
// written into a real orch.db (store), as the engine would have committed it, and read
// through orch.Reader; set changes a task there and announces it, as the engine does.
type fakeOrch struct {
	mu      sync.Mutex
	run     api.Run
	actions []api.ActionRequest
	subs    []chan api.Event
	db      *store.DB
	// refuse, when set, is every action's answer (nothing is recorded).
	refuse error
}

// store writes the run into a new orch.db and returns its reader (over a read-only
// connection, as serve's).
func (f *fakeOrch) store(t testing.TB) *orch.Reader {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "orch.db")
	db, err := store.Open(ctx, path, orch.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r := f.run
	f.db = db
	ro, err := store.OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ro.Close() })
	if len(r.Tasks) == 0 {
		return orch.NewReader(ro.SQL()) // no run
	}
	planned, exts := fakePlan(t, r.Tasks)
	src, _ := json.Marshal(map[string]any{"version": 1, "name": r.Name, "tasks": planned})
	p, err := plan.Parse("fake.json", src)
	if err != nil {
		t.Fatalf("the fake's plan: %v", err)
	}
	// The tasks' positions: the plan's, then those the run added, in the order given.
	var tasks []api.Task
	for _, task := range r.Tasks {
		if task.Added == nil {
			tasks = append(tasks, task)
		}
	}
	for _, task := range r.Tasks {
		if task.Added != nil {
			tasks = append(tasks, task)
		}
	}
	ts := func(at time.Time) string { return at.UTC().Format(time.RFC3339Nano) }
	err = db.Tx(ctx, func(tx *sql.Tx) error {
		var slot string
		if r.Slot != nil {
			slot = ts(*r.Slot)
		}
		if _, err := tx.Exec(`INSERT INTO runs(id, name, digest, state, actor, repo, created_at, queue, schedule, slot, missed) VALUES (?, ?, ?, ?, 'tester', ?, ?, ?, ?, ?, ?)`,
			r.ID, r.Name, p.Digest(), r.State, r.Repo, ts(r.CreatedAt), r.Queue, r.Schedule, slot, r.Missed); err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO run_plans(run_id, plan) VALUES (?, ?)`, r.ID, p.Canonical()); err != nil {
			return err
		}
		for _, x := range exts {
			if _, err := tx.Exec(`INSERT INTO run_extensions(run_id, seq, cause, task, first, count, data) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				r.ID, x.seq, x.cause, x.task, x.first, x.count, x.data); err != nil {
				return err
			}
		}
		for i, task := range tasks {
			var review string
			if task.Review != nil {
				b, _ := json.Marshal(task.Review)
				review = string(b)
			}
			if _, err := tx.Exec(`INSERT INTO tasks(run_id, idx, id, state, attempts, dispatch_id, reason, detail, question, review) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				r.ID, i, task.ID, task.State, len(task.Dispatches), task.DispatchID, task.Reason, task.Detail, task.Question, review); err != nil {
				return err
			}
			for n, d := range task.Dispatches {
				var vj string
				if d == task.DispatchID && task.Verdict != nil {
					b, _ := json.Marshal(task.Verdict)
					vj = string(b)
				}
				if _, err := tx.Exec(`INSERT INTO attempts(dispatch_id, run_id, task_idx, number, state, fired_at, verdict) VALUES (?, ?, ?, ?, 'live', ?, ?)`,
					d, r.ID, i, n+1, ts(r.CreatedAt), vj); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return orch.NewReader(ro.SQL())
}

func newFakeOrch(tasks ...api.Task) *fakeOrch {
	r := api.Run{ID: "run1", Name: "demo", State: lifecycle.RunRunning, Counts: map[string]int{}, Total: len(tasks), Tasks: tasks, CreatedAt: time.Unix(1e9, 0)}
	return &fakeOrch{run: r}
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
	if f.db != nil {
		f.db.SQL().Exec(`UPDATE tasks SET state = ? WHERE run_id = ? AND id = ?`, state, f.run.ID, task)
	}
	for _, ch := range subs {
		ch <- api.Event{Run: f.run.ID, Task: task, State: state, Kind: "orch.task." + state}
	}
}

func (f *fakeOrch) act(req api.ActionRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		return f.refuse
	}
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

func (f fakeDispatches) LearnInRun(_ context.Context, runID string) (map[string]bool, error) {
	out := map[string]bool{}
	for id, r := range f.recs {
		if r.Learn && r.RunID == runID {
			out[id] = true
		}
	}
	return out, nil
}

func (f fakeDispatches) DecideApproval(_ context.Context, id, call string, approve bool, reason, actor, digest string) (*dispatch.Approval, error) {
	return &dispatch.Approval{CallID: call, Actor: actor}, nil
}
