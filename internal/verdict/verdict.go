package verdict

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/jcs"
	"github.com/agora-dev/agora/internal/strictjson"
)

// Why a verdict is red: a closed set. A green verdict has no reason.
const (
	// ReasonExit: the command ran and exited non-zero (or was killed by a signal).
	ReasonExit = "exit-status"
	// ReasonTimeout: the command ran past its timeout and was killed.
	ReasonTimeout = "timeout"
	// ReasonProtected: the patch touches a protected path; the command never ran.
	ReasonProtected = "protected-path"
	// ReasonPatch: the captured patch does not apply to the base tree; the command never ran.
	ReasonPatch = "patch-failed"
	// ReasonOutside: the patch touches a path its gate's changes do not admit; the command
	// never ran.
	ReasonOutside = "outside-changes"
	// ReasonEvidence: the command exited 0, but the report its gate expects is missing,
	// unreadable, names a failure or counts too few tests: its tests did not run to their end.
	ReasonEvidence = "no-evidence"
)

// Reasons lists every reason of a red verdict.
var Reasons = []string{ReasonExit, ReasonTimeout, ReasonProtected, ReasonPatch, ReasonOutside, ReasonEvidence}

// Limits of a [Verdict].
const (
	// MaxTail is the most output a verdict keeps: the last 16 KiB, redacted.
	MaxTail = 16 << 10
	// MaxProtectedPaths is the most protected paths a verdict names; Detail counts the rest.
	MaxProtectedPaths = 64
	// MaxJSON caps a verdict's JSON form (the tail JSON-escaped at worst, and the rest).
	MaxJSON = 256 << 10
	// maxDetail caps Detail in bytes.
	maxDetail = 2048
)

// Verdict is what agora observed running a [Spec]: the host's own reading of the sandbox
// process's exit status and output pipe, never anything the sandbox wrote in a file.
type Verdict struct {
	// Passed is true only when the command ran to its end within its timeout and exited 0.
	Passed bool `json:"passed"`
	// Reason is why it is red (one of [Reasons]); "" when it passed.
	Reason string `json:"reason,omitempty"`
	// Detail says it for a person: "exit status 1", "protected paths touched: a_test.go".
	Detail string `json:"detail,omitempty"`
	// Exit is the command's exit status; -1 when it was killed by a signal or never ran.
	Exit int `json:"exit"`
	// DurationMS is the command's wall clock in milliseconds (0 when it never ran).
	DurationMS int64 `json:"duration_ms"`
	// TimedOut is set when the command ran past its timeout and was killed.
	TimedOut bool `json:"timed_out,omitempty"`
	// Command is the argv that ran (or would have).
	Command []string `json:"command"`
	// ProtectedPaths are the paths the patch touches that a protect glob matches, sorted, at
	// most [MaxProtectedPaths].
	ProtectedPaths []string `json:"protected_paths,omitempty"`
	// OutsidePaths are the paths the patch touches that its gate's changes do not admit, in
	// git's order (the first one first), at most [MaxProtectedPaths]; Detail says why.
	OutsidePaths []string `json:"outside_paths,omitempty"`
	// Evidence is what the report a gate with [Expect] read said, when it read one that
	// parsed; nil otherwise (and always without Expect).
	Evidence *Evidence `json:"evidence,omitempty"`
	// OutputTail is the last [MaxTail] bytes of the command's stdout and stderr together,
	// redacted with the dispatch's secret values, as valid UTF-8.
	OutputTail string `json:"output_tail"`
	// OutputSHA256 is the hex SHA-256 of OutputTail's bytes.
	OutputSHA256 string `json:"output_sha256"`
	// OutputBytes is how many bytes the command wrote in all (after redaction).
	OutputBytes int64 `json:"output_bytes"`
	// Cache is the host directory of the target's verify_cache the command ran with, bound
	// read-only (its contents decide what the toolchain rebuilt); "" when none. It is in the
	// audit form, so a green verdict says it trusted an operator's cache.
	Cache string `json:"cache,omitempty"`
}

// maxCache caps [Verdict.Cache]: a path.
const maxCache = 4096

// Green returns a passed verdict for command with its output tail t.
func Green(command []string, took time.Duration, t TailText) Verdict {
	return Verdict{Passed: true, Exit: 0, DurationMS: took.Milliseconds(), Command: command}.withTail(t)
}

// Red returns a failed verdict; reason is one of [Reasons].
func Red(reason, detail string, exit int, command []string, took time.Duration, t TailText) Verdict {
	v := Verdict{Reason: reason, Detail: clip(detail, maxDetail), Exit: exit, DurationMS: took.Milliseconds(),
		TimedOut: reason == ReasonTimeout, Command: command}
	return v.withTail(t)
}

// Protected returns the red verdict of a patch touching the protected paths (sorted): the
// command never ran.
func Protected(command, paths []string) Verdict {
	shown := paths
	shown = shown[:min(len(shown), MaxProtectedPaths)]
	detail := fmt.Sprintf("the patch touches %d protected path(s): ", len(paths))
	for i, p := range shown {
		if i > 0 {
			detail += ", "
		}
		detail += fmt.Sprintf("%q", p)
	}
	if len(paths) > len(shown) {
		detail += fmt.Sprintf(" and %d more", len(paths)-len(shown))
	}
	v := Red(ReasonProtected, detail+"; the command did not run", -1, command, 0, TailText{})
	v.ProtectedPaths = make([]string, len(shown))
	for i, p := range shown {
		v.ProtectedPaths[i] = ShownPath(p)
	}
	return v
}

// ShownPath is a repository path as a verdict names it: itself when it is valid UTF-8 (as
// nearly every path is), else Go-quoted ("\xff.py" in quotes), since a record and the audit
// hold only valid UTF-8.
func ShownPath(p string) string {
	if utf8.ValidString(p) {
		return p
	}
	return strconv.Quote(p)
}

func validStrings(ss []string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

func (v Verdict) withTail(t TailText) Verdict {
	v.OutputTail, v.OutputBytes = t.Text, t.Total
	sum := sha256.Sum256([]byte(t.Text))
	v.OutputSHA256 = hex.EncodeToString(sum[:])
	if v.Command == nil {
		v.Command = []string{}
	}
	return v
}

// Check reports the first way v is not a verdict agora writes: a reason outside the closed
// set, a green verdict with a reason (or a red one without), a tail over [MaxTail] or not
// valid UTF-8, a hash that is not the tail's.
func (v *Verdict) Check() error {
	switch {
	case v.Passed && (v.Reason != "" || v.Exit != 0 || v.TimedOut || len(v.ProtectedPaths) > 0 || len(v.OutsidePaths) > 0):
		return errors.New("verdict passed but names a reason, a non-zero exit, a timeout, protected paths or paths outside changes")
	case v.Passed && v.Evidence != nil && (v.Evidence.Failures > 0 || v.Evidence.Errors > 0 || v.Evidence.Tests-v.Evidence.Skipped < 1):
		return errors.New("verdict passed but its evidence names a failure or no test that ran")
	case !v.Passed && !knownReason(v.Reason):
		return fmt.Errorf("verdict reason %q: want one of %v", clip(v.Reason, 64), Reasons)
	case len(v.OutputTail) > MaxTail:
		return fmt.Errorf("verdict output tail is %d bytes; at most %d", len(v.OutputTail), MaxTail)
	case !utf8.ValidString(v.OutputTail):
		return errors.New("verdict output tail is not valid UTF-8")
	case int64(len(v.OutputTail)) > v.OutputBytes:
		return fmt.Errorf("verdict output tail is %d bytes of %d written", len(v.OutputTail), v.OutputBytes)
	case len(v.ProtectedPaths) > MaxProtectedPaths:
		return fmt.Errorf("verdict names %d protected paths; at most %d", len(v.ProtectedPaths), MaxProtectedPaths)
	case len(v.OutsidePaths) > MaxProtectedPaths:
		return fmt.Errorf("verdict names %d paths outside changes; at most %d", len(v.OutsidePaths), MaxProtectedPaths)
	case !validStrings(v.ProtectedPaths) || !validStrings(v.OutsidePaths):
		return errors.New("verdict names a path that is not valid UTF-8")
	case v.DurationMS < 0:
		return errors.New("verdict duration is negative")
	case len(v.Detail) > maxDetail:
		return fmt.Errorf("verdict detail is %d bytes; at most %d", len(v.Detail), maxDetail)
	case v.Cache != "" && (len(v.Cache) > maxCache || !path.IsAbs(v.Cache) || path.Clean(v.Cache) != v.Cache || !utf8.ValidString(v.Cache)):
		return fmt.Errorf("verdict cache %q: want an absolute, clean path of at most %d bytes", clip(v.Cache, 80), maxCache)
	}
	if err := CheckCommand(v.Command); err != nil {
		return err
	}
	if v.Evidence != nil {
		if err := v.Evidence.check(); err != nil {
			return err
		}
	}
	sum := sha256.Sum256([]byte(v.OutputTail))
	if got := hex.EncodeToString(sum[:]); got != v.OutputSHA256 {
		return fmt.Errorf("verdict output_sha256 %q is not the tail's (%s)", clip(v.OutputSHA256, 80), got)
	}
	return nil
}

func knownReason(r string) bool {
	for _, k := range Reasons {
		if r == k {
			return true
		}
	}
	return false
}

// Parse reads a verdict's JSON form exactly (strictjson: no unknown, duplicate or case-folded
// key, at most [MaxJSON] bytes) and checks it ([Verdict.Check]).
func Parse(b []byte) (Verdict, error) {
	var v Verdict
	if err := strictjson.Decode("verdict", b, MaxJSON, &v); err != nil {
		return Verdict{}, err
	}
	if err := v.Check(); err != nil {
		return Verdict{}, fmt.Errorf("read verdict: %w", err)
	}
	return v, nil
}

// Details is v as an audit entry's details: everything but the tail itself, which
// output_sha256 binds (integers only, as the audit's canonical JSON holds).
func (v Verdict) Details() map[string]any {
	d := map[string]any{
		"passed": v.Passed, "exit": int64(v.Exit), "duration_ms": v.DurationMS,
		"command": anyStrings(v.Command), "output_sha256": v.OutputSHA256, "output_bytes": v.OutputBytes,
	}
	if v.Reason != "" {
		d["reason"] = v.Reason
	}
	if v.Detail != "" {
		d["detail"] = v.Detail
	}
	if v.TimedOut {
		d["timed_out"] = true
	}
	if v.Cache != "" {
		d["cache"] = v.Cache
	}
	if len(v.ProtectedPaths) > 0 {
		d["protected_paths"] = anyStrings(v.ProtectedPaths)
	}
	if len(v.OutsidePaths) > 0 {
		d["outside_paths"] = anyStrings(v.OutsidePaths)
	}
	if e := v.Evidence; e != nil {
		d["evidence"] = map[string]any{"report": e.Report, "tests": e.Tests, "failures": e.Failures,
			"errors": e.Errors, "skipped": e.Skipped}
	}
	return d
}

// Digest is "sha256:" and the hex SHA-256 of [Verdict.Details] in RFC 8785 form: what a
// dispatch's terminal entry and manifest record, binding its dispatch.verified entry.
func (v Verdict) Digest() string {
	b, err := jcs.Marshal(v.Details())
	if err != nil {
		// Strings are valid UTF-8 (Check), numbers integers: this cannot fail.
		panic(fmt.Sprintf("verdict digest: %v", err))
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Summary is one line for a person: "passed (exit 0, 1.2s)", "failed: exit-status (exit 1,
// 3.4s)", "failed: protected-path (...)".
func (v Verdict) Summary() string {
	if v.Passed {
		if e := v.Evidence; e != nil {
			return fmt.Sprintf("passed (exit 0, %s; %s)", v.Took(), e.Summary())
		}
		return fmt.Sprintf("passed (exit 0, %s)", v.Took())
	}
	switch v.Reason {
	case ReasonProtected, ReasonPatch, ReasonOutside, ReasonEvidence:
		return "failed: " + v.Reason + ": " + v.Detail
	case ReasonTimeout:
		return fmt.Sprintf("failed: timeout (killed after %s)", v.Took())
	}
	return fmt.Sprintf("failed: %s (exit %d, %s)", v.Reason, v.Exit, v.Took())
}

// Took is the command's wall clock.
func (v Verdict) Took() time.Duration { return time.Duration(v.DurationMS) * time.Millisecond }

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
