package dispatch_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// orderProvider is a provider whose Cancel notes what the dispatch's record said when the
// task was stopped.
type orderProvider struct {
	records *dispatch.Records
	id      string
	state   string // the record's state at Cancel; "" when Cancel was not called
}

func (p *orderProvider) Start(context.Context, compute.Spec) (compute.Handle, error) {
	return nil, errors.New("not for starting")
}

func (p *orderProvider) Cancel(ctx context.Context, taskID string) error {
	r, err := p.records.Get(ctx, p.id)
	if err != nil {
		return err
	}
	p.state = string(r.State)
	return nil
}

// deadSupervised accepts a dispatch and records it started, with a task, by a supervisor that
// no longer runs (pid 2^22+1 is above any pid_max default and never allocated; its start time
// matches nothing).
func deadSupervised(t *testing.T) (*env, *dispatch.Record) {
	t.Helper()
	e := newEnv(t)
	e.subagent("long", "sleep 1000")
	r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "long", Actor: "test", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.d.Records.Started(t.Context(), r.ID, "task-of-a-dead-supervisor", "4194305:1"); err != nil {
		t.Fatal(err)
	}
	return e, r
}

// TestReap_RecordsTheEndBeforeStoppingTheTask: a dispatch whose supervisor is gone is
// recorded failed/lost (its audit entry with it) before Reap has the provider stop its task:
// every decision is on record before its effect, so a reap that dies in between leaves a
// record that says what happened, and a sandbox the held index still names (Reap's second
// pass stops it).
func TestReap_RecordsTheEndBeforeStoppingTheTask(t *testing.T) {
	e, r := deadSupervised(t)
	p := &orderProvider{records: e.d.Records, id: r.ID}
	e.d.LocalProvider = p
	n, err := e.d.Reap(t.Context())
	if err != nil || n != 1 {
		t.Fatalf("Reap = %d, %v", n, err)
	}
	if p.state == "" {
		t.Fatal("Reap never had the provider stop the task of a dispatch whose supervisor is gone")
	}
	if p.state != string(lifecycle.DispatchFailed) {
		t.Fatalf("the task was stopped while its record said %q: the end must be on record first", p.state)
	}
}

// releaseOrderProvider is orderProvider that can release a dispatch's leftovers too, noting
// what the record said then.
type releaseOrderProvider struct {
	orderProvider
	released string // the record's state at Release; "" when not called
}

func (p *releaseOrderProvider) Release(ctx context.Context, dispatchID string) error {
	r, err := p.records.Get(ctx, p.id)
	if err != nil {
		return err
	}
	p.released = string(r.State)
	return nil
}

// TestCancel_RecordsTheEndBeforeReleasing: `dispatch cancel` of a dispatch whose supervisor is
// gone records it cancelled before it releases what the dispatch holds on the host (audit
// before effect).
func TestCancel_RecordsTheEndBeforeReleasing(t *testing.T) {
	e, r := deadSupervised(t)
	p := &releaseOrderProvider{orderProvider: orderProvider{records: e.d.Records, id: r.ID}}
	e.d.LocalProvider = p
	got, err := e.d.Cancel(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != lifecycle.DispatchCancelled {
		t.Fatalf("cancel ended it %s, want cancelled", got.State)
	}
	if p.released == "" {
		t.Fatal("cancel never released the leftovers of a dispatch whose supervisor is gone")
	}
	if p.released != string(lifecycle.DispatchCancelled) {
		t.Fatalf("released while the record said %q: the end must be on record first", p.released)
	}
}
