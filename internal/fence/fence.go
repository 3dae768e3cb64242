// Package fence holds the process's leader fence: the check a process that leads (agora orch
// serve holding its leader Lease, internal/lease) or was started by a leader (its supervisors
// and standbys, internal/lease/fencefile) asks before every effect it must not take once the
// lease may be lost. Leadership belongs to the process, so the fence is the process's too.
//
// It is a leaf of its own so that what takes effects outside agora's databases (the
// Kubernetes provider's deletes) asks the same fence as store's commits without importing
// store: providers hold no state in agora.db.
package fence

import "sync/atomic"

var check atomic.Pointer[func() error]

// Set makes c the process's fence; nil removes it. c runs on the goroutine about to take the
// effect, so it must be cheap and must not block. The returned function puts back the fence
// Set replaced.
func Set(c func() error) (restore func()) {
	var p *func() error
	if c != nil {
		p = &c
	}
	old := check.Swap(p)
	return func() { check.Store(old) }
}

// IsSet reports whether a fence is set at all, open or not: this process leads or was started
// by a leader.
func IsSet() bool { return check.Load() != nil }

// Check is the fence's answer now: nil when no fence is set or it is open.
func Check() error {
	if p := check.Load(); p != nil {
		return (*p)()
	}
	return nil
}
