// Package gate is a dispatch's verify gate on the command line: the flags that ask for one
// (--verify, --changes, --protect, --expect-junit ...) parsed into a verdict.Spec, and the gate
// and its verdict written for people. dispatch run parses them; dispatch's status and describe
// print them.
package gate

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/shellwords"
	"github.com/agora-dev/agora/internal/verdict"
)

// Flags are dispatch run's verify gate flags.
type Flags struct {
	line     string
	timeout  time.Duration
	protect  []string
	changes  []string
	junit    string
	minTests int
}

// Add declares the flags on cmd.
func (v *Flags) Add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&v.line, "verify", "", "after the agent, run this command in a fresh sandbox on the base tree plus its patch; a failure ends the dispatch failed/verify-failed (one simple command: no shell operators, expansions or globs)")
	fl.DurationVar(&v.timeout, "verify-timeout", 0, "the verify command's wall clock (default 10m, at most the target's timeout)")
	fl.StringArrayVar(&v.protect, "protect", nil, "with --verify: a path glob the patch must not touch, such as '**/*_test.go' (repeatable)")
	fl.StringArrayVar(&v.changes, "changes", nil, "with --verify: a path glob the patch may touch, such as 'src/**' (repeatable); with any, a patch touching another path, linking outside them or adding a submodule is red before the command runs (a directory needs /**: 'tests' is that path alone)")
	fl.StringVar(&v.junit, "expect-junit", "", "with --verify: the JUnit XML report NAME the command writes in $AGORA_REPORT (/agora/report); exit 0 is green only when it shows its tests ran and passed")
	fl.IntVar(&v.minTests, "expect-min-tests", 0, "with --expect-junit: the fewest tests the report must show ran (default 1)")
}

// Spec is the gate the flags ask for, nil without --verify.
func (v *Flags) Spec(cmd *cobra.Command) (*verdict.Spec, error) {
	fl := cmd.Flags()
	if !fl.Changed("verify") {
		for _, name := range []string{"verify-timeout", "protect", "changes", "expect-junit", "expect-min-tests"} {
			if fl.Changed(name) {
				return nil, cmdutil.UsageErrorf(cmd, "--%s needs --verify: name the command that checks the work", name)
			}
		}
		return nil, nil
	}
	if fl.Changed("expect-min-tests") && !fl.Changed("expect-junit") {
		return nil, cmdutil.UsageErrorf(cmd, "--expect-min-tests needs --expect-junit: name the report the command writes")
	}
	if fl.Changed("expect-min-tests") && v.minTests < 1 {
		return nil, cmdutil.UsageErrorf(cmd, "--expect-min-tests must be at least 1")
	}
	argv, err := shellwords.Split(v.line)
	if err != nil {
		return nil, cmdutil.UsageErrorf(cmd, "--verify %q: %v; give one simple command such as 'go test ./...' (for pipes or redirections, name a script in the repository)", v.line, err)
	}
	s := &verdict.Spec{Command: argv, Timeout: v.timeout, Protect: v.protect, Changes: v.changes}
	if fl.Changed("expect-junit") {
		s.Expect = &verdict.Expect{JUnit: v.junit, MinTests: v.minTests}
	}
	if fl.Changed("verify-timeout") && v.timeout <= 0 {
		return nil, cmdutil.UsageErrorf(cmd, "--verify-timeout must be more than 0s")
	}
	if err := s.Validate(); err != nil {
		return nil, cmdutil.UsageErrorf(cmd, "--verify: %v", err)
	}
	return s, nil
}

// Print writes a verify gate and its verdict for people: the verdict's line, then the
// output's last lines (tailLines of them; 0: all it kept), escaped.
func Print(w io.Writer, label string, s *verdict.Spec, v *verdict.Verdict, tailLines int) {
	if s != nil {
		line := fmt.Sprintf("%s (timeout %s", quoteArgv(s.Command), s.Effective().Timeout)
		if len(s.Changes) > 0 {
			line += "; changes " + strings.Join(s.Changes, ", ")
		}
		if len(s.Protect) > 0 {
			line += "; protect " + strings.Join(s.Protect, ", ")
		}
		if e := s.Expect; e != nil {
			line += fmt.Sprintf("; expect %s with at least %d test(s)", e.JUnit, e.Min())
		}
		fmt.Fprintf(w, "%s%s)\n", label, cmdutil.AgentText(line))
	}
	if v == nil {
		return
	}
	pad := strings.Repeat(" ", len(label))
	fmt.Fprintf(w, "%s%s\n", pad, cmdutil.AgentText("verdict "+v.Summary()))
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
		fmt.Fprintf(w, "%s| %s\n", pad, cmdutil.AgentText(l))
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
