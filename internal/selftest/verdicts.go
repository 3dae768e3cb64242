package selftest

import (
	"slices"

	// Named gate: this package already has a verdict (a row's result, runner.go).
	gate "github.com/agora-dev/agora/internal/verdict"
)

// The verdict attacks are dispatched with a verify gate (the "# dispatch:" header's
// --verify, --protect, --changes and --expect-junit) whose command is red on the base tree:
// the workspace has no gate/ and no tests/. The program writes the patch that would turn
// it green (the gate's own script, a protected test, a file that shadows the runner, a
// forged report or verdict), and the runner reads the verdict agora recorded: red for the
// reason the attack names is blocked, green is allowed, red for any other reason did not
// test the attack and is not run.

// verdictReasons are the reasons of a red verdict, the arguments of the verdict observation.
var verdictReasons = gate.Reasons

func validVerdictReason(r string) bool { return slices.Contains(verdictReasons, r) }

func decideVerdict(h hostRecord, reason string) (string, string) {
	v := h.Verdict
	switch {
	case v == nil:
		return NotRun, "the dispatch has no verdict: its gate did not run (" + h.State + " " + h.Reason + ")"
	case v.Passed:
		return Allowed, "the gate is green: the patch turned it"
	case v.Reason == reason:
		return Blocked, "the gate is red " + v.Reason + ": " + clip(v.Detail, 120)
	}
	return NotRun, "the gate is red for another reason than " + reason + ", so the attack was not tested: " + v.Reason + ": " + clip(v.Detail, 100)
}
