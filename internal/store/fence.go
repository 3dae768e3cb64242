package store

import "sync/atomic"

// fence is asked before every commit this process makes (see [SetFence]).
var fence atomic.Pointer[func() error]

// SetFence makes every commit of every database this process has open, or opens later, first
// call check and, when it returns an error, roll back and return that error instead. It is how
// a leader that may have lost its lease (agora orch serve with leader:, internal/lease) fails
// closed: leadership belongs to the process, so the fence is the process's too, and a
// database opened after SetFence (a checkpointer's, a handoff's) cannot slip past it. check
// runs on the committing goroutine just before COMMIT, so it must be cheap and must not block.
// A nil check removes the fence. The returned function puts back the fence SetFence replaced.
func SetFence(check func() error) (restore func()) {
	var p *func() error
	if check != nil {
		p = &check
	}
	old := fence.Swap(p)
	return func() { fence.Store(old) }
}

// Fenced reports whether a fence is set at all, open or not: this process leads (serve holding
// its leader Lease) or was started by a leader (its supervisors and standbys, fencefile).
func Fenced() bool { return fence.Load() != nil }

// CheckFence is the fence's answer now: nil when no fence is set. Writers of this process's
// state outside SQLite (the replica uploads) ask it before each write.
func CheckFence() error {
	if p := fence.Load(); p != nil {
		return (*p)()
	}
	return nil
}
