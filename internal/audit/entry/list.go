package entry

// Kinds returns every fixed kind this package names (not the [Catalog] or [DispatchState]
// families built from a name), for tests that want each one covered.
func Kinds() []string {
	return []string{
		CatalogImport, CatalogApply,
		DispatchAccepted, DispatchStarted, DispatchFinished, DispatchNeedsInput, DispatchFailed, DispatchCancelled,
		DispatchAnswered, DispatchVerified, DispatchCancelRequested, DispatchResumeRefused,
		ApprovalRequest, ApprovalDecision,
		ToolGateway, ToolGatewayRefused, ToolGatewayBudget, ToolCall,
		NetConnect, NetRequest, NetClose,
		MCPToolCall, MCPToolDenied, MCPResourceRead, MCPResourceDenied,
		RunSubmitted, RunExtended, RunState, RunEnded, RunSealRequested, RunSealed, RunCancelRequested,
		TaskReady, TaskFired, TaskSucceeded, TaskFailed, TaskCancelled, TaskNeedsInput, TaskRetryScheduled,
		TaskSkipped, TaskUnskipped, TaskVerified, TaskProduced, TaskReviewed, TaskRejected, TaskAnswered,
		TaskRetried, TaskCancelRequested,
		ScheduleAdded, ScheduleRemoved, ScheduleFired, ScheduleMissed, ScheduleRefused, ScheduleClockBack,
		ToolWouldDeny, NetWouldDeny, FileWouldDeny,
	}
}
