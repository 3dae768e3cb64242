package toolreg

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/agora-dev/agora/internal/grant"
)

// View is the default-deny set of tools of one role in one dispatch, made by [Registry.For].
// It holds only the granted tools that are registered, never the registry, and is immutable,
// so it is safe for concurrent use. [View.List], [View.Lookup] and [View.Call] use the same
// check.
type View struct {
	dispatchID string
	role       string
	grants     grant.Set
	auditor    Auditor
	approver   Approver // nil: a call an approve rule holds is refused
	redact     func([]byte) []byte
	tools      map[string]*entry // the granted, registered tools
	names      []string          // keys of tools, sorted
	refusals   map[string]string // names outside the view with a known reason
	broken     string            // non-empty: the view refuses everything, for this reason
	// learn: a learn dispatch's view ([WithLearn]): it holds every registered tool, and a
	// call grants refuses (its tool, its command) is reported as would_deny, then runs.
	learn bool
}

// lookup is the one access check.
func (v *View) lookup(name string) (*entry, bool) {
	e, ok := v.tools[name]
	return e, ok
}

// List returns the tools of the view, sorted by name. The result is the caller's to keep.
func (v *View) List() []ToolInfo {
	out := make([]ToolInfo, 0, len(v.names))
	for _, name := range v.names {
		if e, ok := v.lookup(name); ok {
			info := e.info
			info.Schema = slices.Clone(info.Schema)
			out = append(out, info)
		}
	}
	return out
}

// Lookup returns the tool called name when the view holds it. It does not allocate; the
// returned Schema is shared and MUST NOT be modified.
func (v *View) Lookup(name string) (ToolInfo, bool) {
	e, ok := v.lookup(name)
	if !ok {
		return ToolInfo{}, false
	}
	return e.info, true
}

// Grants returns a copy of the grant the view was made with.
func (v *View) Grants() grant.Set { return v.grants.Clone() }

// Role returns the role the view was made for.
func (v *View) Role() string { return v.role }

// Call runs the tool called name with args, when the view holds it and args satisfy its
// schema, and audits the outcome: exactly one [Decision] per call, whatever happens (a
// panicking handler is recorded before the panic goes on). It returns [*ToolNotPermitted] for
// a tool outside the view, [*ArgsError] for arguments that do not satisfy the schema, and
// otherwise what the handler returned.
func (v *View) Call(ctx context.Context, name string, args json.RawMessage) (res Result, err error) {
	start := time.Now()
	e, ok := v.lookup(name)
	if !ok || v.broken != "" {
		return Result{}, v.refuse(ctx, name, args, start)
	}
	d := Decision{DispatchID: v.dispatchID, Role: v.role, Tool: e.info.Name}
	if len(args) > MaxArgsSize {
		d.ArgsHash = v.argsHash(args[:MaxArgsSize])
		d.Decision, d.Reason = DecisionError, ReasonArgsTooLarge
		v.record(ctx, &d, start)
		return Result{}, &ArgsError{Tool: e.info.Name, Reason: ReasonArgsTooLarge}
	}
	d.ArgsHash = v.argsHash(args)
	if r := e.schema.validate(args); r != "" {
		d.Decision, d.Reason = DecisionError, v.redactReason("invalid arguments: "+r)
		v.record(ctx, &d, start)
		return Result{}, &ArgsError{Tool: e.info.Name, Reason: r}
	}
	learned := false
	if v.learn {
		if why, cmd := v.wouldDeny(e.info.Name, args); why != "" {
			w := Decision{DispatchID: v.dispatchID, Role: v.role, Tool: e.info.Name, Decision: DecisionWouldDeny,
				Reason: why, ArgsHash: d.ArgsHash, Command: v.redactCommand(cmd)}
			la, ok := v.auditor.(LearnAuditor)
			if !ok {
				d.Decision, d.Reason = DecisionDenied, why
				v.record(ctx, &d, start)
				return Result{}, &DeniedError{Tool: e.info.Name, Reason: why}
			}
			if err := la.WouldDeny(context.WithoutCancel(ctx), w); err != nil {
				// Not on record: the call does not run.
				d.Decision, d.Reason = DecisionError, ReasonWouldDenyNotRecorded
				v.record(ctx, &d, start)
				return Result{}, err
			}
			learned = true
		}
	}
	if rule, held := v.heldBy(e.info.Name, args); held {
		if err := v.hold(ctx, &d, rule, args); err != nil {
			v.record(ctx, &d, start)
			return Result{}, err
		}
	}
	finished := false
	defer func() {
		if !finished {
			d.Decision, d.Reason = DecisionError, ReasonPanicked
			v.record(ctx, &d, start)
		}
	}()
	res, err = e.handler(ctx, Call{Args: args, Grants: v.grants, DispatchID: v.dispatchID, Role: v.role, Learn: learned})
	finished = true
	d.Decision, d.Reason = classify(err)
	if d.Decision == DecisionError {
		d.Reason = v.redactReason(d.Reason)
	}
	v.record(ctx, &d, start)
	return res, err
}

// classify maps a handler's outcome to a decision and reason.
func classify(err error) (decision, reason string) {
	if err == nil {
		return DecisionAllowed, ReasonGranted
	}
	var ni *NeedsInput
	if errors.As(err, &ni) {
		return DecisionAllowed, ReasonNeedsInput
	}
	var de *DeniedError
	if errors.As(err, &de) {
		return DecisionDenied, de.Reason
	}
	return DecisionError, "tool error: " + err.Error()
}

// refuse audits and returns the refusal of a call outside the view.
func (v *View) refuse(ctx context.Context, name string, args []byte, start time.Time) error {
	tool, reason := name, ""
	switch {
	case v.broken != "":
		reason = ReasonBrokenView + ": " + v.broken
	case !validName(name):
		tool, reason = cut(name, MaxToolNameLen), ReasonInvalidName
	default:
		reason = v.refusals[name]
		reason = cmp.Or(reason, ReasonUnknownTool)
	}
	args = args[:min(len(args), MaxArgsSize)]
	if v.auditor != nil {
		d := Decision{DispatchID: v.dispatchID, Role: v.role, Tool: tool,
			Decision: DecisionDenied, Reason: reason, ArgsHash: v.argsHash(args)}
		v.record(ctx, &d, start)
	}
	return &ToolNotPermitted{Role: v.role, Tool: tool}
}
