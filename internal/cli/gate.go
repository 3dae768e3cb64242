package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/shellwords"
	"github.com/agora-dev/agora/internal/verdict"
)

// verifyFlags are dispatch run's verify gate flags.
type verifyFlags struct {
	line    string
	timeout time.Duration
	protect []string
}

func (v *verifyFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&v.line, "verify", "", "after the agent, run this command in a fresh sandbox on the base tree plus its patch; a failure ends the dispatch failed/verify-failed (one simple command: no shell operators, expansions or globs)")
	fl.DurationVar(&v.timeout, "verify-timeout", 0, "the verify command's wall clock (default 10m, at most the target's timeout)")
	fl.StringArrayVar(&v.protect, "protect", nil, "with --verify: a path glob the patch must not touch, such as '**/*_test.go' (repeatable)")
}

// spec is the gate the flags ask for, nil without --verify.
func (v *verifyFlags) spec(cmd *cobra.Command) (*verdict.Spec, error) {
	fl := cmd.Flags()
	if !fl.Changed("verify") {
		if fl.Changed("verify-timeout") || fl.Changed("protect") {
			return nil, usageErrorf(cmd, "--verify-timeout and --protect need --verify: name the command that checks the work")
		}
		return nil, nil
	}
	argv, err := shellwords.Split(v.line)
	if err != nil {
		return nil, usageErrorf(cmd, "--verify %q: %v; give one simple command such as 'go test ./...' (for pipes or redirections, name a script in the repository)", v.line, err)
	}
	s := &verdict.Spec{Command: argv, Timeout: v.timeout, Protect: v.protect}
	if fl.Changed("verify-timeout") && v.timeout <= 0 {
		return nil, usageErrorf(cmd, "--verify-timeout must be more than 0s")
	}
	if err := s.Validate(); err != nil {
		return nil, usageErrorf(cmd, "--verify: %v", err)
	}
	return s, nil
}

// printGate writes a verify gate and its verdict for people: the verdict's line, then the
// output's last lines (tailLines of them; 0: all it kept), escaped.
func printGate(w io.Writer, label string, s *verdict.Spec, v *verdict.Verdict, tailLines int) {
	if s != nil {
		line := fmt.Sprintf("%s (timeout %s", quoteArgv(s.Command), s.Effective().Timeout)
		if len(s.Protect) > 0 {
			line += "; protect " + strings.Join(s.Protect, ", ")
		}
		fmt.Fprintf(w, "%s%s)\n", label, agentText(line))
	}
	if v == nil {
		return
	}
	pad := strings.Repeat(" ", len(label))
	fmt.Fprintf(w, "%s%s\n", pad, agentText("verdict "+v.Summary()))
	if v.OutputBytes > 0 {
		fmt.Fprintf(w, "%soutput %d bytes, the last %d kept (sha256 %s):\n", pad, v.OutputBytes, len(v.OutputTail), v.OutputSHA256)
	}
	lines := strings.Split(strings.TrimRight(v.OutputTail, "\n"), "\n")
	if v.OutputTail == "" {
		lines = nil
	}
	if tailLines > 0 && len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	for _, l := range lines {
		fmt.Fprintf(w, "%s| %s\n", pad, agentText(l))
	}
}

// quoteArgv writes an argv as a shell would read it back: words with anything but safe
// characters single-quoted.
func quoteArgv(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
