package store

import "github.com/agora-dev/agora/internal/fence"

// SetFence makes every commit of every database this process has open, or opens later, first
// call check and, when it returns an error, roll back and return that error instead. It is how
// a leader that may have lost its lease (agora orch serve with leader:, internal/lease) fails
// closed: leadership belongs to the process, so the fence is the process's too (internal/fence,
// which effects outside the databases ask as well), and a database opened after SetFence (a
// checkpointer's, a handoff's) cannot slip past it. check runs on the committing goroutine just
// before COMMIT, so it must be cheap and must not block. A nil check removes the fence. The
// returned function puts back the fence SetFence replaced.
func SetFence(check func() error) (restore func()) { return fence.Set(check) }

// Fenced reports whether a fence is set at all, open or not: this process leads (serve holding
// its leader Lease) or was started by a leader (its supervisors and standbys, fencefile).
func Fenced() bool { return fence.IsSet() }

// CheckFence is the fence's answer now: nil when no fence is set. Writers of this process's
// state outside SQLite (the replica uploads) ask it before each write.
func CheckFence() error { return fence.Check() }
