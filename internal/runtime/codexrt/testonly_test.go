package codexrt

import (
	"io"

	"github.com/agora-dev/agora/internal/shellwords"
)

// Helpers only the tests call: the product reaches what they wrap by another way, so they
// live with the tests rather than in the package.

// CommandArgv returns the argv forms of a command line as codex reports it (see [ArgvForms]);
// a line that is not one simple command of literal words ([shellwords.Split]) yields none,
// which no grant allows.
func CommandArgv(line string) [][]string {
	argv, err := shellwords.Split(line)
	if err != nil {
		return nil
	}
	return ArgvForms(argv)
}

// CommandAllowed is [ArgvAllowed] of a command line as codex reports it, read by
// [shellwords.Split]: a line it cannot read exactly is allowed by no grant.
func CommandAllowed(patterns []string, line string) bool {
	argv, err := shellwords.Split(line)
	return err == nil && ArgvAllowed(patterns, argv)
}

// ParseStream is parseStream without a hook on the first unreadable line.
func ParseStream(r io.Reader, transcript io.Writer, obs Observer) (Result, error) {
	return parseStream(r, transcript, obs, nil)
}
