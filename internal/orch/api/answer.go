package api

import "github.com/agora-dev/agora/internal/shellwords"

// AnswerCommand is the command a person runs on the host to answer task taskID of run runID,
// as hints quote it for pasting into a shell: each id is one shell word. The engine's own task
// ids hold '[' and ']' (a fan-out item, fan[KEY]), a glob that a shell would expand to a file's
// name, such as another task's id; such an id is single-quoted.
func AnswerCommand(runID, taskID string) string {
	return "agora orch answer " + shellwords.Quote(runID) + " " + shellwords.Quote(taskID) + " --answer TEXT"
}

// CancelCommand is the command a person runs on the host to cancel task taskID of run runID
// (and its dependents), quoted as [AnswerCommand] quotes its ids.
func CancelCommand(runID, taskID string) string {
	return "agora orch cancel " + shellwords.Quote(runID) + " --task " + shellwords.Quote(taskID)
}
