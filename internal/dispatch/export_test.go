package dispatch

// StageAsInvokingUser makes d stage and run its sandboxes as an unprivileged agora does, even
// when the test runs as root: as the invoking user, with no disk quota, on shared bundles.
func StageAsInvokingUser(d *Dispatcher) { d.testOnlyInvokingUser = true }

// CheckCommand is checkCommand's refusal text, for the runtimes no test can register yet (codex).
var CheckCommand = checkCommandText
