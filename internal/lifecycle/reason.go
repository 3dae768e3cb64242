package lifecycle

// Reasons a dispatch fails, a closed set; a failed task's attempt carries its dispatch's.
// The worker decides only those of [WorkerReasons] (in result.json); the host decides the
// rest.
const (
	// ReasonWorkerFailed: the agent or the worker failed (a non-zero exit, no usable
	// result). Plans retry it unless their retry policy says on_worker_failed: false.
	ReasonWorkerFailed = "worker-failed"
	// ReasonProviderFailed: the host could not prepare, run, follow or keep the dispatch
	// (its sandbox provider, the binaries it binds, its blob store, its verify sandbox);
	// nothing is blamed on the agent.
	ReasonProviderFailed = "provider-failed"
	// ReasonTimeout: the dispatch ran out of its wall-clock limit.
	ReasonTimeout = "timeout"
	// ReasonCancelled: a person or a program cancelled the dispatch.
	ReasonCancelled = "cancelled"
	// ReasonFetchFailed: the worker could not obtain what the dispatch runs with (its
	// secrets, its inputs).
	ReasonFetchFailed = "fetch-failed"
	// ReasonIntegrityFailed: what the worker checked, or what the host read back from it, is
	// not what was declared (a digest, a pin, the out directory).
	ReasonIntegrityFailed = "integrity-failed"
	// ReasonDenied: what the dispatch asks for is not permitted (by its grant, or a limit on
	// its request).
	ReasonDenied = "denied"
	// ReasonLost: the process supervising the dispatch died before it ended, and the worker
	// died with it (bubblewrap's --die-with-parent). Nothing the worker did is known.
	ReasonLost = "lost"
	// ReasonLimitExceeded: a limit the host enforces was exceeded (the audit budget, the
	// disk quota); the host stopped the sandbox.
	ReasonLimitExceeded = "limit-exceeded"
	// ReasonBudgetExceeded: the dispatch's budget (tokens, usd or model calls) was spent and
	// the gateway refused a model call; the host stopped the sandbox. A task that may not
	// fire because its run's budget is spent fails with it too.
	ReasonBudgetExceeded = "budget-exceeded"
	// ReasonGatewayUnreachable: a remote worker (a kubernetes target's pod) could not reach
	// agora's network gateway across its retries (the gateway was down longer than the
	// worker's outage limit), so its mounts or its result never crossed. Nothing the agent
	// did is known or blamed; plans retry it.
	ReasonGatewayUnreachable = "gateway-unreachable"
	// ReasonVerifyFailed: the dispatch's verify gate was red (its command failed or timed
	// out, or the patch touches a protected path or does not apply); the record's Verdict
	// says which. The patch and outputs are kept. Never retried: the same patch fails the
	// same way.
	ReasonVerifyFailed = "verify-failed"
	// ReasonStackConflict: the dispatch is stacked on upstream work (its Stack inputs) and
	// one of those patches does not apply on the run's commit with the ones before it; the
	// detail names the upstream task and dispatch and git's words. Found on the host before
	// the sandbox starts: the agent never ran. Never retried: the same patches conflict the
	// same way.
	ReasonStackConflict = "stack-conflict"
)

// Reasons lists every reason a dispatch fails with.
func Reasons() []string {
	return []string{ReasonWorkerFailed, ReasonProviderFailed, ReasonTimeout, ReasonCancelled,
		ReasonFetchFailed, ReasonIntegrityFailed, ReasonDenied, ReasonLost, ReasonLimitExceeded,
		ReasonBudgetExceeded, ReasonGatewayUnreachable, ReasonVerifyFailed, ReasonStackConflict}
}

// WorkerReasons lists the reasons the worker decides and writes in result.json; the host
// decides the others (provider-failed and cancelled among them) and a result naming one is
// refused.
func WorkerReasons() []string {
	return []string{ReasonWorkerFailed, ReasonTimeout, ReasonFetchFailed, ReasonIntegrityFailed, ReasonDenied}
}

// Retryable reports whether a plan may retry an attempt that failed for reason (attempts
// left permitting): provider-failed, timeout, lost and gateway-unreachable say nothing of
// the agent's work, and worker-failed may be a flake (a plan's retry policy can refuse it,
// on_worker_failed: false). Every other reason, and any reason not listed, fails the same
// way again: denied, integrity-failed, limit-exceeded, budget-exceeded, fetch-failed,
// cancelled, verify-failed and stack-conflict.
func Retryable(reason string) bool {
	switch reason {
	case ReasonProviderFailed, ReasonTimeout, ReasonLost, ReasonGatewayUnreachable, ReasonWorkerFailed:
		return true
	}
	return false
}

// Reasons a task fails, is skipped or waits with that are the orchestrator's own, not an
// attempt's (a task's attempt carries its dispatch's reason).
const (
	// ReasonFanOutRefused: a fan-out's list cannot be used (unreadable, too long, a bad key).
	ReasonFanOutRefused = "fan-out-refused"
	// ReasonReviewRejected: the task's reviewers rejected its work and no fix loop took it.
	ReasonReviewRejected = "review-rejected"
	// ReasonFixFailed: the task's fix loop ran out of fixes, the last one rejected.
	ReasonFixFailed = "fix-failed"
	// ReasonAncestorFailed and ReasonAncestorCancelled: a skipped task's ancestor failed or
	// was cancelled ([AncestorReason]).
	ReasonAncestorFailed    = "ancestor-" + TaskFailed
	ReasonAncestorCancelled = "ancestor-" + TaskCancelled
	// ReasonAwaitingReview and ReasonAwaitingFix: a pending task whose work waits for its
	// reviewers or its fix loop; a reader of a succeeded task shows them as no reason.
	ReasonAwaitingReview = "awaiting-review"
	ReasonAwaitingFix    = "awaiting-fix"
)

// TaskReasons lists the orchestrator's own task reasons.
func TaskReasons() []string {
	return []string{ReasonFanOutRefused, ReasonReviewRejected, ReasonFixFailed, ReasonAncestorFailed,
		ReasonAncestorCancelled, ReasonAwaitingReview, ReasonAwaitingFix}
}

// AncestorReason is the reason of a task skipped because its ancestor ended in state
// (failed or cancelled): "ancestor-" and the state.
func AncestorReason(state string) string { return "ancestor-" + state }
