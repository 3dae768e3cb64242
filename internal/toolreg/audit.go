package toolreg

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
)

// Decisions recorded in [Decision.Decision].
const (
	DecisionAllowed = "allowed" // the handler ran and returned (with or without a tool error)
	DecisionDenied  = "denied"  // refused by policy: outside the view, or a [*DeniedError]
	DecisionError   = "error"   // the call could not run: bad arguments, or the handler failed
	// DecisionWouldDeny: a learn view's call the grant would refuse, reported before it runs
	// (the gateway records it as tool.would_deny); the call's own decision follows.
	DecisionWouldDeny = "would_deny"
)

// Reasons the view itself records. Handlers add their own through [*DeniedError].
const (
	ReasonGranted       = "granted"
	ReasonNeedsInput    = "needs input from a person"
	ReasonNotGranted    = "tool not granted to role"
	ReasonNotRegistered = "tool granted but not registered"
	ReasonUnknownTool   = "unknown tool"
	ReasonInvalidName   = "invalid tool name"
	ReasonArgsTooLarge  = "arguments too large"
	ReasonPanicked      = "tool panicked"
	ReasonBrokenView    = "view cannot audit" // prefix; the rest says what is missing
	// ReasonWouldDenyNotRecorded: a learn view's would_deny report failed, so the call did
	// not run.
	ReasonWouldDenyNotRecorded = "would_deny not recorded"
)

// maxReasonLen caps the reason of an audit record (a handler's error text).
const maxReasonLen = 512

// Decision is the audit record of one call through a [View].
type Decision struct {
	DispatchID string
	Role       string // "subagent@sha256:…"
	Tool       string // cut to [MaxToolNameLen] bytes when the name was invalid
	Decision   string // [DecisionAllowed], [DecisionDenied] or [DecisionError]
	Reason     string
	// ArgsHash is "sha256:" and the hex SHA-256 of the arguments after the view's redactor;
	// never the arguments themselves.
	ArgsHash string
	// Duration is from the call's entry to its end, including the tool's own work.
	Duration time.Duration
	// Command is, on a [DecisionWouldDeny] of a command tool, the command line (argv joined
	// by spaces, the redactor applied); "" otherwise.
	Command string
}

// LearnAuditor is an [Auditor] that can say whether a [DecisionWouldDeny] is on record: a
// learn view runs a call its grant would refuse only once its report returned nil. A learn
// view whose auditor is not one refuses such calls.
type LearnAuditor interface {
	Auditor
	WouldDeny(ctx context.Context, d Decision) error
}

// Auditor receives one [Decision] per call. The worker wires it to the host-side gateway.
// ToolCall MUST NOT block for long: it runs on the call path. Its failures are its own
// business; the view does not learn of them. ctx is never cancelled, so the record of a call
// whose context was cancelled still goes out.
type Auditor interface {
	ToolCall(ctx context.Context, d Decision)
}

// ViewOption configures a [View] at [Registry.For].
type ViewOption func(*View)

// WithRedactor makes the view hash redact(args) instead of the raw arguments, and pass a
// handler's error text through redact before it is recorded. redact MUST NOT modify its
// input and MUST be safe for concurrent use. The default is the identity.
func WithRedactor(redact func([]byte) []byte) ViewOption {
	return func(v *View) { v.redact = redact }
}

// argsHash returns the hash of the redacted arguments.
func (v *View) argsHash(args []byte) string {
	b := args
	if v.redact != nil {
		b = v.redact(args)
	}
	sum := sha256.Sum256(b)
	var buf [len("sha256:") + 2*sha256.Size]byte
	copy(buf[:], "sha256:")
	hex.Encode(buf[len("sha256:"):], sum[:])
	return string(buf[:])
}

// record completes d and hands it to the auditor.
func (v *View) record(ctx context.Context, d *Decision, start time.Time) {
	d.Duration = time.Since(start)
	v.auditor.ToolCall(context.WithoutCancel(ctx), *d)
}

// redactReason applies the redactor to a reason built from handler output and caps it.
func (v *View) redactReason(s string) string {
	if v.redact != nil {
		s = string(v.redact([]byte(s)))
	}
	return cut(s, maxReasonLen)
}

// cut returns s cut to at most n bytes on a rune boundary, made valid UTF-8.
func cut(s string, n int) string {
	if len(s) > n {
		for n > 0 && s[n]&0xC0 == 0x80 {
			n--
		}
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
