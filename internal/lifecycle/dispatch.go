package lifecycle

// States of a dispatch. accepted and started are live; the rest are terminal. answered is the
// one move a terminal state makes: a dispatch that needs input becomes answered, naming its
// child, when its question is answered (once; accepting the child moves it). A dispatch's
// lifecycle events are spelled as the states they enter.
const (
	DispatchAccepted   = "accepted"
	DispatchStarted    = "started"
	DispatchFinished   = "finished"
	DispatchNeedsInput = "needs_input"
	DispatchFailed     = "failed"
	DispatchCancelled  = "cancelled"
	DispatchAnswered   = "answered"
)

// DispatchStates lists every dispatch state in the order a dispatch can reach them: a closed
// set (a --state filter accepts these and nothing else).
func DispatchStates() []string {
	return []string{DispatchAccepted, DispatchStarted, DispatchFinished, DispatchNeedsInput,
		DispatchFailed, DispatchCancelled, DispatchAnswered}
}

// DispatchEnded reports whether a dispatch in state s has ended: its worker is gone and its
// products are final. needs_input has ended too; an answer starts a child dispatch.
func DispatchEnded(s string) bool {
	switch s {
	case DispatchFinished, DispatchNeedsInput, DispatchFailed, DispatchCancelled, DispatchAnswered:
		return true
	}
	return false
}
