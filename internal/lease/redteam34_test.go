package lease

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// memLeases is one Lease kept in memory with the apiserver's optimistic concurrency (an
// update must carry the current resourceVersion), so an attack test can order a standby's
// read and a leader's renew exactly, which a real apiserver cannot be made to do.
type memLeases struct {
	mu      sync.Mutex
	cur     *coordv1.Lease
	rv      int
	getHook func() // run inside Get before the record is read; nil for none
}

func (m *memLeases) Get(_ context.Context, name string) (*coordv1.Lease, error) {
	if h := m.getHook; h != nil {
		h()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur == nil {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, name)
	}
	return m.cur.DeepCopy(), nil
}

func (m *memLeases) Create(_ context.Context, l *coordv1.Lease) (*coordv1.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur != nil {
		return nil, apierrors.NewAlreadyExists(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, l.Name)
	}
	return m.store(l), nil
}

func (m *memLeases) Update(_ context.Context, l *coordv1.Lease) (*coordv1.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur == nil || l.ResourceVersion != m.cur.ResourceVersion {
		return nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, l.Name, nil)
	}
	return m.store(l), nil
}

func (m *memLeases) store(l *coordv1.Lease) *coordv1.Lease {
	m.rv++
	m.cur = l.DeepCopy()
	m.cur.ResourceVersion = strconv.Itoa(m.rv)
	return m.cur.DeepCopy()
}

// edit is someone else's write to the Lease (kubectl edit): a new resourceVersion.
func (m *memLeases) edit(fn func(*coordv1.Lease)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.cur.DeepCopy()
	fn(l)
	m.store(l)
}

func testElector(api leaseAPI, identity string, d time.Duration) *elector {
	return &elector{cfg: Config{Name: "leader", Namespace: "agora", Identity: identity, Duration: d},
		api: api, log: slog.New(slog.DiscardHandler), fence: NewFence("agora/leader", d)}
}

// fenceEnd is when f closes, on its boot clock.
func fenceEnd(f *Fence) instant { return instant(f.deadline.Load()) }

// TestRedTeam34Lease_StandbyViewStartsAfterRead is the attack of a standby whose read of the
// Lease is slow: it took its clock reading before the Get, the leader renewed while the Get
// was on its way, and the Get returned the renewed record. The standby's wait must start no
// earlier than the renew's send (the fence's origin), or its wait ends before the leader's
// fence plus the fifth of margin fence.go promises.
func TestRedTeam34Lease_StandbyViewStartsAfterRead(t *testing.T) {
	const d = 10 * time.Second
	api := &memLeases{}
	a, b := testElector(api, "replica-a", d), testElector(api, "replica-b", d)
	if ok, _ := a.try(t.Context()); !ok {
		t.Fatal("replica-a did not create the Lease")
	}
	// replica-b's Get is held until replica-a has renewed: the renew lands while it travels.
	api.getHook = func() {
		api.getHook = nil
		if ok, _ := a.try(context.Background()); !ok {
			t.Error("replica-a could not renew its own Lease")
		}
	}
	if ok, holder := b.try(t.Context()); ok || holder != "replica-a" {
		t.Fatalf("replica-b: took %v, holder %q; want to wait for replica-a", ok, holder)
	}
	takeover := b.observedAt.add(b.holderDuration(b.observed))
	if margin := takeover.sub(fenceEnd(a.fence)); margin < d/5 {
		t.Errorf("replica-b may take over %s after replica-a's fence closes; want at least %s (the fence's fifth)", margin, d/5)
	}
}

// TestRedTeam34Lease_EditedDurationNotTrusted is the attack of a Lease edited by someone else
// while its leader is cut off from the apiserver: leaseDurationSeconds lowered to 1 (or 0, or
// removed). The leader never reads the edit and keeps its fence open 4/5 of its duration; a
// standby that trusted the record would take over after a second.
func TestRedTeam34Lease_EditedDurationNotTrusted(t *testing.T) {
	const d = 10 * time.Second
	for _, c := range []struct {
		name string
		secs *int32
	}{{"1s", ptr[int32](1)}, {"0", ptr[int32](0)}, {"none", nil}} {
		t.Run(c.name, func(t *testing.T) {
			api := &memLeases{}
			a, b := testElector(api, "replica-a", d), testElector(api, "replica-b", d)
			if ok, _ := a.try(t.Context()); !ok {
				t.Fatal("replica-a did not create the Lease")
			}
			api.edit(func(l *coordv1.Lease) { l.Spec.LeaseDurationSeconds = c.secs })
			if ok, _ := b.try(t.Context()); ok {
				t.Fatal("replica-b took a Lease it had just seen renewed")
			}
			// Two seconds pass on replica-b's clock with no new record (replica-a is cut off).
			b.observedAt = b.observedAt.add(-2 * time.Second)
			if a.fence.Check() != nil {
				t.Fatal("replica-a's fence closed early; the attack needs it open")
			}
			if ok, _ := b.try(t.Context()); ok {
				t.Errorf("replica-b took the Lease 2s after an edit to leaseDurationSeconds=%s while replica-a's fence is open until %s from now",
					c.name, fenceEnd(a.fence).sub(bootNow()).Round(time.Second))
			}
		})
	}
}

// TestRedTeam34Lease_RecordNeverUnderstatesFence: a duration that is not whole seconds is
// written rounded up, so a standby waiting out the record's duration never waits less than
// the holder's fence runs.
func TestRedTeam34Lease_RecordNeverUnderstatesFence(t *testing.T) {
	for _, d := range []time.Duration{2 * time.Second, 2500 * time.Millisecond, 2999 * time.Millisecond, 10 * time.Second, 5 * time.Minute} {
		api := &memLeases{}
		a := testElector(api, "replica-a", d)
		if ok, _ := a.try(t.Context()); !ok {
			t.Fatal("replica-a did not create the Lease")
		}
		if said := time.Duration(*api.cur.Spec.LeaseDurationSeconds) * time.Second; said < d {
			t.Errorf("duration %s: the Lease says %s, less than the duration the fence runs on", d, said)
		}
	}
}
