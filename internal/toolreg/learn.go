package toolreg

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/shellwords"
)

// Learn views (docs/learn.md): a learn dispatch's worker builds its view [WithLearn]. The view
// offers every registered tool; a call its grant would refuse (a tool the grant does not
// name, a run_command argv no pattern matches) is reported to a [LearnAuditor] as a
// [DecisionWouldDeny] first and runs only once that report is on record. What the tools
// themselves enforce beyond the grant (the workspace's bounds, argument limits) is unchanged.

// commandTool is the one tool whose argv the grant's commands judge.
const commandTool = "run_command"

// Reasons of a learn view's would_deny.
const (
	ReasonCommandNotGranted = "command not granted"
)

// maxLearnCommand caps the command line a would_deny carries.
const maxLearnCommand = 2048

// WithLearn makes the view a learn dispatch's. Only the host decides a dispatch is one (the
// manifest it writes); the gateway refuses a would_deny report from any other dispatch.
func WithLearn() ViewOption {
	return func(v *View) { v.learn = true }
}

// wouldDeny returns why the view's grant would refuse a call of tool with args, and for
// run_command the command line; "" when the grant allows it.
func (v *View) wouldDeny(tool string, args json.RawMessage) (why, command string) {
	if !slices.Contains(v.grants.Tools, tool) {
		why = ReasonNotGranted
	}
	if tool == commandTool {
		var a struct {
			Argv []string `json:"argv"`
		}
		// Decoded as the run_command handler decodes it (builtin.decodeArgs), after the same
		// schema check, so the argv judged is the argv run; one that does not decode is
		// judged as empty (would_deny), and the handler refuses it.
		_ = json.Unmarshal(args, &a)
		if !grant.CommandAllowed(v.grants.Commands, a.Argv) {
			command = commandLine(a.Argv)
			if why == "" {
				why = ReasonCommandNotGranted
			} else {
				why += "; " + ReasonCommandNotGranted
			}
		}
	}
	return why, command
}

// redactCommand masks secrets in a would_deny's command line and caps it.
func (v *View) redactCommand(s string) string {
	if s == "" {
		return ""
	}
	if v.redact != nil {
		s = string(v.redact([]byte(s)))
	}
	return cut(s, maxLearnCommand)
}

// commandLine is argv as one shell line, each word [shellwords.Quote]d, which
// [shellwords.Split] reads back as exactly argv: `agora capability suggest` proposes a grant
// from it, and words joined with bare spaces read back as another argv when one holds a space
// (["git", "status --exec=x"] would read as a three-word command that never ran).
func commandLine(argv []string) string {
	q := make([]string, len(argv))
	for i, w := range argv {
		q[i] = shellwords.Quote(w)
	}
	return strings.Join(q, " ")
}
