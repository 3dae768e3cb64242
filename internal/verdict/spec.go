// Package verdict owns agora's verify gate in data: the [Spec] a task or a dispatch declares
// (a command, a timeout, the paths its work may change and the protected ones, the evidence
// it expects) and the [Verdict] the host records after running the command on the base tree
// plus the dispatch's captured patch in a fresh sandbox. The verdict is agora's observation,
// never the agent's report: its exit status is the sandbox process's own, its output the pipe
// the host read (the last [MaxTail] bytes, redacted, then hashed); a patch that touches a
// protected path, or a path its changes do not admit ([Admit]), is red before the command
// runs; and with [Expect] a command that exits 0 is green only when the JUnit report agora
// reads from the gate's own report directory ([ParseJUnit]) shows its tests ran and passed.
//
// The package is pure (no I/O, no sandbox) and runs on the host side: the dispatcher fills a
// Verdict, the orchestrator carries it, the CLI, MCP and the web view show it. It also holds
// the glob matcher ([Matcher]: doublestar semantics), the changes check, the JUnit parser and
// the [Tail] writer that keeps the end of a stream. It imports only strictjson and jcs.
//
// "verify" alone means verifying an audit bundle (agora verify); the gate's result is a
// verdict, and a reviewer's opinion is a review, never a verdict.
package verdict

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/strictjson"
)

// Limits of a [Spec]. A spec beyond them is refused, not cut.
const (
	DefaultTimeout  = 10 * time.Minute // a spec's timeout when it names none
	MaxTimeout      = 24 * time.Hour   // the longest verify timeout
	MaxArgs         = 256              // argv entries of the command
	MaxCommandBytes = 16 << 10         // bytes of the whole argv
	MaxProtect      = 64               // protect patterns
	MaxChanges      = 64               // changes patterns
	MaxPatternBytes = 256              // bytes of one protect or changes pattern
	// MaxSpecJSON caps a spec's JSON form as records and requests carry it.
	MaxSpecJSON = 64 << 10
)

// Spec is a verify gate: run Command (an argv, no shell) in a fresh sandbox of the dispatch's
// target on the base tree plus its patch, with at most Timeout of wall clock; a patch touching
// a path one of Protect's globs matches, or (when Changes is set) a path no Changes glob
// matches, is red before the command runs; with Expect, exit status 0 is green only with a
// report showing the tests ran and passed.
type Spec struct {
	Command []string
	// Timeout is the command's wall clock; 0 means [DefaultTimeout] (see [Spec.Effective]).
	Timeout time.Duration
	// Protect are doublestar globs over repository-relative paths ("**/*_test.go",
	// ".github/**"); see [Matcher].
	Protect []string
	// Changes, when set, are the only paths the patch may touch (doublestar globs, as
	// Protect): an allow-list, checked with [Admit]. Empty admits any path Protect does not
	// name (a deny-list alone).
	Changes []string
	// Expect, when set, is the evidence a green verdict needs beyond exit status 0.
	Expect *Expect
}

// Expect is a gate's demand for evidence: the command writes a JUnit XML report named JUnit
// into the report directory agora gives it ($AGORA_REPORT, [ReportPath]), and the verdict is
// green only when that report exists, parses, names no failure or error, and counts at least
// MinTests tests that ran (not skipped).
type Expect struct {
	JUnit string
	// MinTests is the fewest tests that must have run; 0 means 1 (see [Expect.Min]).
	MinTests int
}

// ReportPath is where a gate with [Expect] finds its report directory inside the sandbox;
// its environment names it as AGORA_REPORT.
const ReportPath = "/agora/report"

// MaxMinTests caps [Expect.MinTests].
const MaxMinTests = 1_000_000

// maxReportName caps the bytes of [Expect.JUnit].
const maxReportName = 128

// Min is the fewest tests e needs: MinTests, or 1 when it names none.
func (e Expect) Min() int { return max(e.MinTests, 1) }

// Check says what is wrong with e, or nil: JUnit is a plain file name (letters, digits, '.',
// '_', '-', not starting with '.'), MinTests within 0..[MaxMinTests].
func (e Expect) Check() error {
	if err := checkReportName(e.JUnit); err != nil {
		return fmt.Errorf("verify expect junit: %w", err)
	}
	if e.MinTests < 0 || e.MinTests > MaxMinTests {
		return fmt.Errorf("verify expect min_tests %d: want 1 to %d (0 or none means 1)", e.MinTests, MaxMinTests)
	}
	return nil
}

// checkReportName checks a report's file name: one segment of safe characters.
func checkReportName(n string) error {
	switch {
	case n == "":
		return errors.New("empty; name the report file the command writes in $AGORA_REPORT, such as junit.xml")
	case len(n) > maxReportName:
		return fmt.Errorf("%d bytes; at most %d", len(n), maxReportName)
	case n[0] == '.':
		return fmt.Errorf("%q starts with '.'; name a plain file such as junit.xml", n)
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%q: a file name directly in the report directory, of letters, digits, '.', '_' and '-'", n)
		}
	}
	return nil
}

// Effective is s with its default timeout applied.
func (s Spec) Effective() Spec {
	s.Timeout = cmp.Or(s.Timeout, DefaultTimeout)
	return s
}

// Validate reports the first problem of s, worded for the person or model who wrote it.
func (s Spec) Validate() error {
	if err := CheckCommand(s.Command); err != nil {
		return err
	}
	if s.Timeout < 0 || s.Timeout > MaxTimeout {
		return fmt.Errorf("verify timeout %s: want more than 0s and at most %s", s.Timeout, MaxTimeout)
	}
	if err := CheckProtect(s.Protect); err != nil {
		return err
	}
	if err := CheckChanges(s.Changes); err != nil {
		return err
	}
	if s.Expect != nil {
		return s.Expect.Check()
	}
	return nil
}

// CheckCommand checks a verify command: at least one argument, the first naming a program,
// no NUL byte, valid UTF-8, within [MaxArgs] and [MaxCommandBytes].
func CheckCommand(argv []string) error {
	switch {
	case len(argv) == 0:
		return errors.New("verify command: empty; give the program and its arguments, such as [go, test, ./...]")
	case len(argv) > MaxArgs:
		return fmt.Errorf("verify command: %d arguments; at most %d", len(argv), MaxArgs)
	case argv[0] == "":
		return errors.New("verify command: the program (its first argument) is empty")
	}
	n := 0
	for i, a := range argv {
		n += len(a)
		switch {
		case strings.IndexByte(a, 0) >= 0:
			return fmt.Errorf("verify command: argument %d holds a NUL byte", i)
		case !utf8.ValidString(a):
			return fmt.Errorf("verify command: argument %d is not valid UTF-8", i)
		}
	}
	if n > MaxCommandBytes {
		return fmt.Errorf("verify command: %d bytes; at most %d", n, MaxCommandBytes)
	}
	return nil
}

// CheckProtect checks protect globs: each valid ([CheckPattern]), none twice, at most
// [MaxProtect].
func CheckProtect(patterns []string) error { return checkGlobs("protect", patterns, MaxProtect) }

// CheckChanges checks changes globs as [CheckProtect] does protect globs, at most
// [MaxChanges].
func CheckChanges(patterns []string) error { return checkGlobs("changes", patterns, MaxChanges) }

func checkGlobs(field string, patterns []string, most int) error {
	if len(patterns) > most {
		return fmt.Errorf("verify %s: %d patterns; at most %d", field, len(patterns), most)
	}
	for i, p := range patterns {
		if err := CheckPattern(p); err != nil {
			return fmt.Errorf("verify %s[%d]: %w", field, i, err)
		}
		for _, q := range patterns[:i] {
			if q == p {
				return fmt.Errorf("verify %s[%d]: %q listed twice", field, i, p)
			}
		}
	}
	return nil
}

// specJSON is a spec's JSON form: the timeout as a Go duration string ("10m0s").
type specJSON struct {
	Command []string    `json:"command"`
	Timeout string      `json:"timeout,omitempty"`
	Protect []string    `json:"protect,omitempty"`
	Changes []string    `json:"changes,omitempty"`
	Expect  *expectJSON `json:"expect,omitempty"`
}

// expectJSON is an [Expect]'s JSON form.
type expectJSON struct {
	JUnit    string `json:"junit"`
	MinTests int    `json:"min_tests,omitempty"`
}

// MarshalJSON writes {"command": [...], "timeout": "10m0s", "protect": [...], "changes":
// [...], "expect": {"junit": "junit.xml", "min_tests": 3}}; a field not set is left out, so
// a spec without changes or expect has the bytes it had before they existed.
func (s Spec) MarshalJSON() ([]byte, error) {
	j := specJSON{Command: s.Command, Protect: s.Protect, Changes: s.Changes}
	if s.Expect != nil {
		j.Expect = &expectJSON{JUnit: s.Expect.JUnit, MinTests: s.Expect.MinTests}
	}
	if s.Timeout != 0 {
		j.Timeout = s.Timeout.String()
	}
	if j.Command == nil {
		j.Command = []string{}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes, exactly (strictjson: no unknown, duplicate or
// case-folded key), and validates it.
func (s *Spec) UnmarshalJSON(b []byte) error {
	v, err := ParseSpec(b)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// ParseSpec reads a spec's JSON form exactly and validates it.
func ParseSpec(b []byte) (Spec, error) {
	var j specJSON
	if err := strictjson.Decode("verify spec", b, MaxSpecJSON, &j); err != nil {
		return Spec{}, err
	}
	if j.Changes != nil && len(j.Changes) == 0 {
		return Spec{}, errors.New("read verify spec: changes is empty; name the paths the work may change, or leave it out")
	}
	s := Spec{Command: j.Command, Protect: j.Protect, Changes: j.Changes}
	if j.Expect != nil {
		s.Expect = &Expect{JUnit: j.Expect.JUnit, MinTests: j.Expect.MinTests}
	}
	if j.Timeout != "" {
		d, err := time.ParseDuration(j.Timeout)
		if err != nil {
			return Spec{}, fmt.Errorf("read verify spec: timeout %q: %w", j.Timeout, err)
		}
		if d == 0 {
			return Spec{}, errors.New("read verify spec: timeout 0s: leave it out for the default")
		}
		s.Timeout = d
	}
	if err := s.Validate(); err != nil {
		return Spec{}, fmt.Errorf("read verify spec: %w", err)
	}
	return s, nil
}

// Details is s as an audit entry's details: the command, the timeout in milliseconds, the
// protect and changes globs and the evidence expected (each only when set).
func (s Spec) Details() map[string]any {
	d := map[string]any{"command": anyStrings(s.Command), "timeout_ms": s.Effective().Timeout.Milliseconds()}
	if len(s.Protect) > 0 {
		d["protect"] = anyStrings(s.Protect)
	}
	if len(s.Changes) > 0 {
		d["changes"] = anyStrings(s.Changes)
	}
	if s.Expect != nil {
		d["expect"] = map[string]any{"junit": s.Expect.JUnit, "min_tests": int64(s.Expect.Min())}
	}
	return d
}

// Clone is s sharing no slice or pointer with the original.
func (s Spec) Clone() Spec {
	s.Command, s.Protect, s.Changes = slices.Clone(s.Command), slices.Clone(s.Protect), slices.Clone(s.Changes)
	if s.Expect != nil {
		e := *s.Expect
		s.Expect = &e
	}
	return s
}

func anyStrings(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
