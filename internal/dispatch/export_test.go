package dispatch

import (
	"context"
	"time"
)

// StageAsInvokingUser makes d stage and run its sandboxes as an unprivileged agora does, even
// when the test runs as root: as the invoking user, with no disk quota, on shared bundles.
func StageAsInvokingUser(d *Dispatcher) { d.testOnlyInvokingUser = true }

// SetCancelWait makes d's Cancel wait w, not cancelWait, for a live supervisor to record the end.
func SetCancelWait(d *Dispatcher, w time.Duration) { d.testOnlyCancelWait = w }

// SetBeforeRelease makes every supervision of d call hold first when it releases its sandbox,
// stage and uid lease (teardown.go).
func SetBeforeRelease(d *Dispatcher, hold func()) { d.testOnlyBeforeRelease = hold }

// SetSettling makes every dispatch of d that found no free uid call hook before it waits for
// the background releases (teardown.go).
func SetSettling(d *Dispatcher, hook func()) { d.testOnlySettling = hook }

// CheckCommand is checkCommand's refusal text, for the runtimes no test can register yet (codex).
var CheckCommand = checkCommandText

// TakeOrphan is Records.takeOrphan for dispatch id as a reaper that read its supervisor as
// supervisor sees it.
func TakeOrphan(ctx context.Context, s *Records, id, supervisor string) (bool, error) {
	return s.takeOrphan(ctx, &Record{ID: id, supervisor: supervisor})
}

// WaitWarmTeardowns waits for what the claimed slots of w still take down in the background
// (their stages, directories and namespaces), for benchmarks that time one dispatch alone.
func WaitWarmTeardowns(w *WarmPools) { w.teardowns.Wait() }
