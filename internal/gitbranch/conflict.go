package gitbranch

import (
	"cmp"
	"slices"
	"strings"

	"github.com/agora-dev/agora/internal/agenttext"
)

// Where names the conflict's files for a report a person reads on a terminal: the unmerged
// paths, else the paths git's own messages name (two changes adding one file leave nothing
// unmerged), else git's last error. Paths come from agents' patches: escaped
// ([agenttext.Escape]) and kept on one line.
func (e *ConflictError) Where() string {
	files := e.Files
	if len(files) == 0 {
		files = gitNamedPaths(e.Git)
	}
	if len(files) > 0 {
		return pathLine(agenttext.Escape(strings.Join(files, ", ")))
	}
	last := ""
	for _, line := range strings.Split(e.Git, "\n") {
		if strings.HasPrefix(line, "error: ") {
			last = strings.TrimPrefix(line, "error: ")
		}
	}
	last = cmp.Or(last, "-")
	return "(git: " + pathLine(agenttext.Escape(last)) + ")"
}

// pathLine keeps a path with a newline from starting a line of its own in the report (a forged
// "agora: hint:" line): newlines and tabs are written as \n and \t.
func pathLine(s string) string { return strings.NewReplacer("\n", `\n`, "\t", `\t`).Replace(s) }

// gitPathMessages are git apply's messages that name the path in the way.
var gitPathMessages = []struct{ prefix, suffix string }{
	{"error: patch failed: ", ":"},
	{"error: ", ": already exists in index"},
	{"error: ", ": does not exist in index"},
	{"error: ", ": does not match index"},
	{"Applied patch to '", "' with conflicts."},
	{"U ", ""},
}

// gitNamedPaths lists, once each, the paths git apply's stderr names as in the way.
func gitNamedPaths(stderr string) []string {
	var out []string
	for _, line := range strings.Split(stderr, "\n") {
		for _, m := range gitPathMessages {
			rest, ok := strings.CutPrefix(line, m.prefix)
			if !ok {
				continue
			}
			if m.suffix == ":" { // patch failed: PATH:LINE
				if i := strings.LastIndex(rest, ":"); i > 0 {
					rest, ok = rest[:i], true
				}
			} else if m.suffix != "" {
				rest, ok = strings.CutSuffix(rest, m.suffix)
			}
			if ok && rest != "" && !slices.Contains(out, rest) {
				out = append(out, rest)
			}
			break
		}
	}
	return out
}
