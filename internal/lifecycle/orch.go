package lifecycle

// States of an orchestrator task. pending, ready and running are live; needs_input waits for
// an answer; the rest are terminal.
const (
	TaskPending    = "pending"
	TaskReady      = "ready"
	TaskRunning    = "running"
	TaskSucceeded  = "succeeded"
	TaskFailed     = "failed"
	TaskNeedsInput = "needs_input"
	TaskCancelled  = "cancelled"
	TaskSkipped    = "skipped"
	// TaskRejected is a fix whose work its loop's gates judged red: a later fix, or the
	// loop's failure, took over. It counts as done for the run.
	TaskRejected = "rejected"
)

// TaskStates lists every task state: what a reader that counts tasks by state (the
// orchestrator's metrics) reports, zero included.
func TaskStates() []string {
	return []string{TaskPending, TaskReady, TaskRunning, TaskSucceeded, TaskFailed, TaskNeedsInput,
		TaskCancelled, TaskSkipped, TaskRejected}
}

// TaskEnded reports whether a task in state s is final (needs_input is not: an answer moves
// it on).
func TaskEnded(s string) bool {
	switch s {
	case TaskSucceeded, TaskFailed, TaskCancelled, TaskSkipped, TaskRejected:
		return true
	}
	return false
}

// States of a run, derived from its tasks: running while any task can still make progress,
// needs_input when only answers can, then succeeded, failed or cancelled.
const (
	RunRunning    = "running"
	RunNeedsInput = "needs_input"
	RunSucceeded  = "succeeded"
	RunFailed     = "failed"
	RunCancelled  = "cancelled"
)

// RunStates lists every run state: what a reader that counts runs by state reports, zero
// included.
func RunStates() []string {
	return []string{RunRunning, RunNeedsInput, RunSucceeded, RunFailed, RunCancelled}
}

// RunEnded reports whether a run in state s will not change without a retry.
func RunEnded(s string) bool {
	return s == RunSucceeded || s == RunFailed || s == RunCancelled
}

// AttemptLive is the state of a task's attempt (its dispatch) until it ends; an ended attempt
// is recorded in the state its task's outcome names.
const AttemptLive = "live"
