package agoratest

import (
	"errors"
	"testing"
	"time"
)

// Poll is [Await] for a condition: it calls cond, backing off as Await does, until it holds
// (true) or d has passed (false). It is for a wait on something no event announces (a
// Kubernetes object's status, another process's table); the caller fails with what it knows
// when it returns false. d bounds a wait on a loaded machine and is not a timing assertion,
// so make it generous.
func Poll(d time.Duration, cond func() bool) bool {
	return Await(d, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}) == nil
}

// errNotYet is [Poll]'s condition not holding yet.
var errNotYet = errors.New("not yet")

// killWait bounds how long [AwaitOwnKill] waits.
const killWait = time.Minute

// AwaitOwnKill blocks the child process of a crash test once it has set its own SIGKILL in
// motion (a hook the work reaches kills the process), and fails tb naming what if the process
// is still alive a minute on. Nothing inside the process can announce the kill, and the
// parent waits for the child's exit, its event: only a bound is left to wait on here.
func AwaitOwnKill(tb testing.TB, what string) {
	tb.Helper()
	time.Sleep(killWait)
	tb.Fatalf("%s: the process outlived its own kill by %s", what, killWait)
}
