// Package lease makes `agora orch serve` one of several replicas of which only the holder of
// a Kubernetes Lease serves: [Elect] waits as a standby until this process holds the
// Lease (client-go's leader election algorithm over a coordination.k8s.io/v1 Lease, elector.go),
// and its [Fence]
// says, before every commit and every replica upload, whether the process may still write.
//
// The fence is local and fails closed: it holds a deadline on this host's CLOCK_BOOTTIME
// (clock.go), the time the last successful renew was sent plus 4/5 of the lease duration. A
// standby cannot take the Lease before it has seen the record unchanged for the whole duration
// on its own clock, and that view starts after the renew was sent, so while the fence passes
// no one else leads, whatever the apiserver or the network do (a hung apiserver, a SIGSTOP, a
// long pause, a host suspended and resumed: the boot clock counts the time asleep). The fifth
// left is the margin for clock rate and the time between the check and the COMMIT it guards.
package lease

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/agora-dev/agora/internal/lease/fencefile"
)

// Fence is a leader's permission to write, valid until a deadline its renews push forward.
// It is safe for concurrent use; [Fence.Check] is a clock read and an atomic load.
type Fence struct {
	name  string        // namespace/lease, for errors
	valid time.Duration // how long a renew keeps the fence open
	// deadline is the fence's end, an instant of now's clock; 0 is never renewed, -1 shut.
	deadline atomic.Int64
	now      clock
	// file, once [Fence.Publish] set it, mirrors the deadline for the processes this one
	// starts (fencefile).
	file atomic.Pointer[fencefile.Writer]
}

// NewFence returns a shut fence for the lease named name (namespace/lease) of duration d.
func NewFence(name string, d time.Duration) *Fence {
	return &Fence{name: name, valid: d - d/5, now: bootNow}
}

// renewed opens the fence until sent + 4/5 of the lease duration, sent being when the
// successful create or renew of the Lease was sent, read from the fence's own clock (the
// elector reads every instant from it). It only ever moves the deadline forward, and never
// reopens a fence [Fence.Shut] closed. It takes no time.Time: a wall time can jump, and a
// monotonic one stops while the host sleeps; the fence must follow neither.
func (f *Fence) renewed(sent instant) {
	end := int64(sent.add(f.valid))
	for {
		old := f.deadline.Load()
		if old < 0 || end <= old || f.deadline.CompareAndSwap(old, end) {
			break
		}
	}
	// After the fence's own move: the file never runs ahead of it. Advance refuses to
	// reopen a file Shut closed, so a renew racing a Shut cannot reopen the children's fence.
	if w := f.file.Load(); w != nil {
		w.Advance(end)
	}
}

// Shut closes the fence for good: no commit passes it again, in this process or in a child
// told its file. Called when leadership ends (lost, or released on a clean stop) before
// anything else is done.
func (f *Fence) Shut() {
	f.deadline.Store(-1)
	if w := f.file.Load(); w != nil {
		w.Shut()
	}
}

// Publish mirrors the fence into w from now on, for the processes this one starts: the
// deadline it holds now, and every renew and the Shut that follow. A child's fence is never
// ahead of this one's.
func (f *Fence) Publish(w *fencefile.Writer) {
	f.file.Store(w)
	switch d := f.deadline.Load(); {
	case d < 0:
		w.Shut()
	case d > 0:
		w.Advance(d)
	}
	if f.deadline.Load() < 0 {
		w.Shut() // shut between the load above and Advance
	}
}

// Check is nil while the fence is open and otherwise an error naming the lease.
func (f *Fence) Check() error {
	d := f.deadline.Load()
	now := f.now()
	if d > 0 && int64(now) < d {
		return nil
	}
	switch {
	case d == 0:
		return fmt.Errorf("lease %s: not held yet; refusing to commit", f.name)
	case d < 0:
		return fmt.Errorf("lease %s: leadership ended; refusing to commit", f.name)
	}
	late := now.sub(instant(d))
	return fmt.Errorf("lease %s: not renewed in time (fence passed %s ago); refusing to commit, another replica may lead", f.name, late.Round(time.Millisecond))
}

// Valid is how long a renew keeps the fence open (4/5 of the lease duration).
func (f *Fence) Valid() time.Duration { return f.valid }
