// Package verdict owns agora's verify gate in data: the [Spec] a task or a dispatch declares
// (a command, a timeout, the protected paths) and the [Verdict] the host records after running
// the command on the base tree plus the dispatch's captured patch in a fresh sandbox. The
// verdict is agora's observation, never the agent's report: its exit status is the sandbox
// process's own, its output the pipe the host read (the last [MaxTail] bytes, redacted, then
// hashed), and a patch that touches a protected path is red before the command runs.
//
// The package is pure (no I/O, no sandbox) and runs on the host side: the dispatcher fills a
// Verdict, the orchestrator carries it, the CLI, MCP and the web view show it. It also holds
// the protect glob matcher ([Match]: doublestar semantics) and the [Tail] writer that keeps
// the end of a stream. It imports only strictjson and jcs.
//
// "verify" alone means verifying an audit bundle (agora verify); the gate's result is a
// verdict, and a reviewer's opinion is a review, never a verdict.
package verdict

import (
	"encoding/json"
	"errors"
	"fmt"
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
	MaxPatternBytes = 256              // bytes of one protect pattern
	// MaxSpecJSON caps a spec's JSON form as records and requests carry it.
	MaxSpecJSON = 64 << 10
)

// Spec is a verify gate: run Command (an argv, no shell) in a fresh sandbox of the dispatch's
// target on the base tree plus its patch, with at most Timeout of wall clock; a patch touching
// a path one of Protect's globs matches is red before the command runs.
type Spec struct {
	Command []string
	// Timeout is the command's wall clock; 0 means [DefaultTimeout] (see [Spec.Effective]).
	Timeout time.Duration
	// Protect are doublestar globs over repository-relative paths ("**/*_test.go",
	// ".github/**"); see [Match].
	Protect []string
}

// Effective is s with its default timeout applied.
func (s Spec) Effective() Spec {
	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
	}
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
	return CheckProtect(s.Protect)
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
func CheckProtect(patterns []string) error {
	if len(patterns) > MaxProtect {
		return fmt.Errorf("verify protect: %d patterns; at most %d", len(patterns), MaxProtect)
	}
	for i, p := range patterns {
		if err := CheckPattern(p); err != nil {
			return fmt.Errorf("verify protect[%d]: %w", i, err)
		}
		for _, q := range patterns[:i] {
			if q == p {
				return fmt.Errorf("verify protect[%d]: %q listed twice", i, p)
			}
		}
	}
	return nil
}

// specJSON is a spec's JSON form: the timeout as a Go duration string ("10m0s").
type specJSON struct {
	Command []string `json:"command"`
	Timeout string   `json:"timeout,omitempty"`
	Protect []string `json:"protect,omitempty"`
}

// MarshalJSON writes {"command": [...], "timeout": "10m0s", "protect": [...]}.
func (s Spec) MarshalJSON() ([]byte, error) {
	j := specJSON{Command: s.Command, Protect: s.Protect}
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
	s := Spec{Command: j.Command, Protect: j.Protect}
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

// Details is s as an audit entry's details: the command, the timeout in milliseconds and the
// protect globs.
func (s Spec) Details() map[string]any {
	d := map[string]any{"command": anyStrings(s.Command), "timeout_ms": s.Effective().Timeout.Milliseconds()}
	if len(s.Protect) > 0 {
		d["protect"] = anyStrings(s.Protect)
	}
	return d
}

func anyStrings(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
