package dispatch

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/errclass"
	"github.com/agora-dev/agora/internal/gitexec"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/runtimes"
	"github.com/agora-dev/agora/internal/verdict"
	"github.com/agora-dev/agora/internal/worker/wire"
	"github.com/agora-dev/agora/internal/workspace"
)

// Request is what a caller may choose for a dispatch: catalog names, a target, an input, a
// repository and a timeout. Nothing that shapes the worker (images, secret references,
// sandbox settings) is part of it: those come from the catalog and the target.
type Request struct {
	// ID is the dispatch id to record; "" means a new one. The orchestrator chooses it before
	// it fires, so a fire repeated after a crash finds the same record ([ErrExists]) instead
	// of starting a second worker.
	ID          string
	Subagent    string          // NAME or NAME@sha256:HEX
	Envs        []string        // env bundle refs, applied in order (a later bundle's key wins)
	Target      string          // "" means the default target
	Input       json.RawMessage // a JSON object; nil means {}
	Repo        string          // a local git repository; "" means an empty workspace
	Revision    string          // a revision of Repo ("" means HEAD) or of Workspace ("" means its default)
	Timeout     time.Duration   // 0 means the target's timeout; more than the target's is refused
	ParentID    string          // set by resume
	Actor       string
	CallbackURL string // CLI and target config only; never from MCP
	// Inputs are upstream products to mount read-only at /agora/inputs/<key>.
	Inputs []InputSpec
	// Grants narrows what the worker may do; nil means the subagent's whole grant (the union
	// of its capabilities'). In it, a nil list keeps that kind (tools, commands, egress) as
	// the subagent has it and an empty one grants none. Anything the subagent's capabilities
	// do not grant is refused with a [RequestError] naming the item: a dispatch may narrow,
	// never widen.
	Grants *grant.Set

	// Budget narrows the dispatch's budget: each field set must be at most the subagent's,
	// the target's and every Ceilings' (a higher one is a [RequestError] naming the
	// ceiling). Zero fields take the tightest ceiling.
	Budget budget.Budget
	// Ceilings are further budgets the caller is held to (a plan's, what is left of its
	// run's): the effective budget is at most each, without an error.
	Ceilings []budget.Ceiling

	// Workspace names a workspace of the catalog (NAME or NAME@sha256:HEX) instead of Repo:
	// the dispatch works on its repository at Revision, which the workspace must allow.
	Workspace string
	// CurrentCatalog marks a caller that starts new work on the catalog as people registered
	// it now (an MCP client): a version it pins of the subagent, an env bundle or the
	// workspace must be that name's current one, and no version of a retired name is found
	// ([view.Catalog.ResolveCurrent], docs/adr/0025). Unset, pins are honoured as recorded:
	// a person's CLI, a resumed dispatch's child, a run's tasks.
	CurrentCatalog bool

	// Traceparent is the W3C traceparent the dispatch's span is a child of (a task's span);
	// "" takes the span in Accept's context, if any. A malformed one is ignored.
	Traceparent string

	// RunID and TaskID name the run and task whose attempt this is (the orchestrator sets
	// them): the record keeps them, so the attempt is answered only through its run.
	RunID  string
	TaskID string

	// Verify is the dispatch's verify gate, nil for none: after the agent, its command runs
	// in a fresh sandbox of the target on the base tree plus the captured patch, and a red
	// verdict ends the dispatch failed/verify-failed. A kubernetes target refuses it.
	Verify *verdict.Spec

	// Learn makes this a learn dispatch (docs/learn.md): what its grant would refuse is
	// recorded as *.would_deny instead of refused, inside the same sandbox and limits. A
	// person's decision: `agora dispatch run --learn`, a plan task's learn: true submitted
	// from the CLI. A target with mode: learn makes every dispatch on it one.
	Learn bool
	// NoLearn marks a caller that may not learn (an MCP client): a learn request, or a
	// target in mode: learn, is refused with a [RequestError] that says why.
	NoLearn bool

	// answer is set by [Dispatcher.ResumeRequest]: who answers ParentID, through which door.
	answer *answerNote
}

// InputSpec names an upstream dispatch's product: Select is "patch", "outputs" or
// "output:PATH". The dispatcher reads the upstream record itself; the caller never names blobs.
type InputSpec struct {
	Key          string
	Select       string
	FromDispatch string
	// Dir, when set, mounts the product under /agora/inputs/<key>/<dir>/ instead: one of
	// many products under one key (the items of an orchestrator fan-out, by item key).
	Dir string
	// Apply, for one patch input at most, has the worker apply that patch to the workspace
	// before the agent starts (a fix loop's rejected work): the dispatch's own patch then
	// holds it too.
	Apply bool
	// Stack makes the patch part of the dispatch's stacked base: the host applies every Stack
	// input's patch, in order, to the revision as one commit each (stack.go), the workspace
	// and the verify gate start from the last, and the dispatch's own patch is taken against
	// it. Each is a patch under a Dir of its own (the upstream task), from a finished
	// dispatch. One that does not apply ends the dispatch failed/stack-conflict at accept.
	Stack bool
}

// RequestError is a request that cannot be dispatched; nothing was recorded.
type RequestError struct{ Err error }

func (e *RequestError) Error() string { return e.Err.Error() }
func (e *RequestError) Unwrap() error { return e.Err }

func reqErr(format string, args ...any) error {
	return &RequestError{Err: fmt.Errorf(format, args...)}
}

// Accept resolves req against the catalog and the target, then writes the record in state
// accepted. A command the subagent's capabilities do not grant is recorded and immediately
// ends failed/denied: nothing starts. Accept never starts a worker; [Dispatcher.Supervise]
// does.
func (d *Dispatcher) Accept(ctx context.Context, req Request) (*Record, error) {
	began := time.Now()
	resolve := d.Catalog.Resolve
	if req.CurrentCatalog {
		resolve = d.Catalog.ResolveCurrent
	}
	sub, err := resolve(ctx, catalog.KindSubagent, req.Subagent)
	if err != nil {
		return nil, &RequestError{Err: err}
	}
	content, err := d.Catalog.Content(sub)
	if err != nil {
		return nil, err
	}
	doc, err := catalog.ParseSubagentDoc(content)
	if err != nil {
		return nil, err
	}
	catalogGrants, err := SubagentGrants(ctx, d.Catalog, doc)
	if err != nil {
		return nil, err
	}
	grants, err := d.effectiveGrants(ctx, sub.Name, catalogGrants, req)
	if err != nil {
		return nil, &RequestError{Err: err}
	}
	var envs []EnvRef
	seen := map[string]bool{}
	for _, ref := range req.Envs {
		v, err := resolve(ctx, catalog.KindEnv, ref)
		if err != nil {
			return nil, &RequestError{Err: err}
		}
		if seen[v.Name] {
			return nil, reqErr("env bundle %q named twice", v.Name)
		}
		seen[v.Name] = true
		envs = append(envs, EnvRef{Name: v.Name, Digest: v.Digest})
	}
	target, err := d.Config.Target(req.Target)
	if err != nil {
		return nil, &RequestError{Err: err}
	}
	req.Target = cmp.Or(req.Target, "local")
	timeout := req.Timeout
	switch {
	case timeout < 0:
		return nil, reqErr("timeout must be positive")
	case timeout == 0:
		timeout = target.Timeout
	case timeout > target.Timeout:
		return nil, reqErr("timeout %s is over target %q's limit of %s", timeout, req.Target, target.Timeout)
	}
	learn, err := learnMode(req, target.Mode)
	if err != nil {
		return nil, err
	}
	verify, err := checkVerify(req.Verify, req.Target, target)
	if err != nil {
		return nil, err
	}
	input, err := wire.CanonicalInput(req.Input)
	if err != nil {
		return nil, &RequestError{Err: err}
	}
	inputDigest, err := d.Blobs.Put(input)
	if err != nil {
		return nil, err
	}
	repo, rev, wsRef := "", "", ""
	switch {
	case req.Workspace != "" && req.Repo != "":
		return nil, reqErr("a dispatch names a workspace or a repository, not both")
	case req.Workspace != "":
		if wsRef, repo, rev, err = d.resolveWorkspace(ctx, req.Workspace, req.Revision, req.CurrentCatalog); err != nil {
			return nil, err
		}
	case req.Repo != "":
		if repo, rev, err = resolveRevision(ctx, req.Repo, req.Revision); err != nil {
			return nil, &RequestError{Err: err}
		}
	case req.Revision != "":
		return nil, reqErr("a revision needs a workspace or a repository (--workspace NAME@REV or --repo PATH@REV)")
	}
	if err := d.checkOverlays(ctx, doc, repo, rev, checkoutName(req, rev)); err != nil {
		return nil, err
	}
	inputs, err := d.resolveInputs(ctx, req.Inputs)
	if err != nil {
		return nil, &RequestError{Err: err}
	}
	id := req.ID
	if id == "" {
		id = NewID(d.now())
	} else if !wire.ValidDispatchID(id) {
		return nil, reqErr("dispatch id %q is not valid", id)
	}
	stackBase, stackConflict, err := d.stackBase(ctx, id, repo, rev, inputs)
	if err != nil {
		return nil, err
	}
	eff, err := d.effectiveBudget(req, sub.Name, doc, target)
	if err != nil {
		return nil, err
	}
	callback := cmp.Or(req.CallbackURL, target.CallbackURL)
	rec := &Record{
		ID: id, Subagent: sub.Name, SubagentDigest: sub.Digest, Envs: envs, Target: req.Target,
		Sandbox: target.Sandbox, Network: resolveNetwork(target.Network, grants), InputDigest: inputDigest, Repo: repo, Revision: rev, Workspace: wsRef,
		Timeout: Duration(timeout), ParentID: req.ParentID, Actor: req.Actor, CallbackURL: callback, Inputs: inputs,
		Grants: &grants, Budget: eff, RunID: req.RunID, TaskID: req.TaskID, answer: req.answer, Verify: verify,
		Learn: learn, StackBase: stackBase,
	}
	var learnRules []grant.EgressRule
	if learn {
		if learnRules, err = d.learnRules(); err != nil {
			return nil, &RequestError{Err: err}
		}
	}
	if len(learnRules) > 0 && target.Network == NetworkProxy {
		// A learn dispatch reaches egress.learn_hosts through its proxy, even when its grant
		// allows no host (which would otherwise mean no network at all).
		rec.Network = NetworkProxy
	}
	denial, learnable := checkCommand(doc, grants)
	if learn && learnable {
		// Recorded instead of refused, in the accept's transaction, before the worker starts.
		rec.wouldDeny = commandWouldDeny(doc.Command, denial)
		denial = ""
	}
	rec.TraceID, rec.TraceSpan, rec.TraceParent = d.traceIDs(ctx, req.Traceparent)
	if rec.Envs == nil {
		rec.Envs = []EnvRef{}
	}
	if err := d.Records.Accept(ctx, rec); err != nil {
		if refused := answerRefusal(err); refused != nil && req.ParentID != "" {
			// Another answer won the race for the parent: nothing was recorded but this.
			return nil, d.refuseAnswer(ctx, req.ParentID, req.answer.answerer(req.Actor), refused)
		}
		return nil, err
	}
	d.traceAccept(ctx, rec, began)
	switch {
	case denial != "":
		if _, err := d.Records.Finish(ctx, rec.ID, Outcome{State: lifecycle.DispatchFailed, Reason: lifecycle.ReasonDenied, Detail: denial}); err != nil {
			return nil, err
		}
	case stackConflict != "":
		// Nothing was staged or started: the agent never runs on a base that does not build.
		// (A crash before this line leaves it accepted; its supervisor's staging builds the
		// stack again and fails it the same way.)
		if _, err := d.Records.Finish(ctx, rec.ID, Outcome{State: lifecycle.DispatchFailed, Reason: lifecycle.ReasonStackConflict, Detail: stackConflict}); err != nil {
			return nil, err
		}
	}
	return d.Records.Get(ctx, rec.ID)
}

// stackBase builds the stacked base of inputs' stack inputs (stack.go) on repo's commit rev:
// the commit the dispatch starts from, or, when a patch does not apply, why (its failure
// detail); both "" when it has no stack.
func (d *Dispatcher) stackBase(ctx context.Context, id, repo, rev string, inputs []Input) (base, conflict string, err error) {
	patches, err := d.stackPatches(inputs)
	if err != nil {
		return "", "", &RequestError{Err: err}
	}
	if len(patches) == 0 {
		return "", "", nil
	}
	state := cmp.Or(d.StateDir, os.TempDir())
	scratch := filepath.Join(state, stackScratchDir)
	sweepStackScratch(scratch, time.Now())
	ctx, cancel := context.WithTimeout(ctx, stackBuildTimeout)
	defer cancel()
	base, err = stackBaseAt(ctx, filepath.Join(scratch, id), repo, rev, patches)
	var ce *StackConflictError
	var re *stackReadError
	switch {
	case errors.As(err, &ce):
		return "", ce.Error(), nil
	case errors.As(err, &re):
		return "", "", &RequestError{Err: err}
	}
	if err != nil {
		return "", "", fmt.Errorf("build the stacked base: %w", err)
	}
	return base, "", nil
}

// checkoutName names what a dispatch of req checks out, for refusals: a workspace by its
// name (an orchestrator never sees its path), a repository by the path its caller gave.
func checkoutName(req Request, commit string) string {
	short := commit
	short = short[:min(len(short), 12)]
	if req.Workspace != "" {
		return fmt.Sprintf("workspace %q at %s", strings.SplitN(req.Workspace, "@", 2)[0], short)
	}
	return fmt.Sprintf("repository %s at %s", req.Repo, short)
}

// checkCommand returns why the subagent of doc may not run under grants, or "": a runtime the
// table does not hold, approve rules for an agent that cannot hold a call, an exec command
// not granted or marked for approval. learnable is true only for a command the grant does
// not allow: the one refusal a learn dispatch records (tool.would_deny) instead.
func checkCommand(doc catalog.SubagentDoc, grants grant.Set) (denial string, learnable bool) {
	denial = checkCommandText(doc, grants)
	if denial != "" && !grant.CommandAllowed(grants.Commands, doc.Command) {
		if rt, ok := runtimes.Lookup(doc.Runtime); ok && rt.Needs.Command && (rt.HoldsApproval || len(grants.Approve) == 0) {
			return denial, true
		}
	}
	return denial, false
}

// checkCommandText is [checkCommand]'s refusal, or "".
func checkCommandText(doc catalog.SubagentDoc, grants grant.Set) string {
	rt, known := runtimes.Lookup(doc.Runtime)
	if !known {
		// Provision refuses such a document; one in the catalog anyway (an older or altered
		// agora wrote it) is refused here, not judged as a runtime with no needs.
		return fmt.Sprintf("runtime %q is not one of %s", doc.Runtime, strings.Join(runtimes.Names(), ", "))
	}
	if !rt.HoldsApproval && !rt.Needs.Command && len(grants.Approve) > 0 {
		// An agent that cannot hold a call (codex exec runs with approval_policy "never":
		// nothing waits before a command or a file change, and its events arrive as one
		// starts or after it ran) is refused rather than audited after the fact
		// (docs/runtimes.md, Approvals).
		return fmt.Sprintf("the grant marks calls for a person's approval (%s), and the %s runtime cannot hold a call", approveList(grants.Approve), rt.Name)
	}
	if !rt.Needs.Command {
		return ""
	}
	patterns := grants.Commands
	if !grant.CommandAllowed(patterns, doc.Command) {
		if len(patterns) == 0 {
			return fmt.Sprintf("command %q is not granted: the dispatch's grant has no commands", strings.Join(doc.Command, " "))
		}
		return fmt.Sprintf("command %q matches none of the granted patterns %q", strings.Join(doc.Command, " "), patterns)
	}
	// The exec runtime has no tool loop to hold a call in: a command a person must approve
	// is refused rather than run unheld.
	if r, held := grant.NeedsApproval(grants.Approve, "run_command", doc.Command); held {
		return fmt.Sprintf("command %q needs a person's approval (approve rule %q), and the %s runtime cannot hold a call", strings.Join(doc.Command, " "), r.String(), rt.Name)
	}
	return ""
}

// approveList is rules as a person reads them, comma-separated.
func approveList(rules []grant.ApproveRule) string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = r.String()
	}
	return strings.Join(out, ", ")
}

// resolveWorkspace pins the workspace ref names to its version and rev to a commit the
// workspace allows; with current, the version must be the workspace's current one. Its
// refusals are [RequestError]s that name the workspace, never its path.
func (d *Dispatcher) resolveWorkspace(ctx context.Context, ref, rev string, current bool) (wsRef, repo, commit string, err error) {
	lookup := workspace.Lookup
	if current {
		lookup = workspace.LookupCurrent
	}
	ws, err := lookup(ctx, d.Catalog, ref)
	if err != nil {
		return "", "", "", &RequestError{Err: err}
	}
	commit, err = workspace.Resolve(ctx, ws, rev)
	if errors.Is(err, workspace.ErrRevision) {
		return "", "", "", &RequestError{Err: err}
	}
	if err != nil {
		return "", "", "", err
	}
	return ws.Ref(), ws.Doc.Repo, commit, nil
}

// resolveRevision checks that repo is a git repository and pins rev to a commit id.
func resolveRevision(ctx context.Context, repo, rev string) (string, string, error) {
	abs, err := filepath.Abs(repo)
	if err != nil {
		return "", "", err
	}
	// The path is recorded in JSON (the record, its audit entries and its manifest, which
	// must be canonical): a path that is not UTF-8 (a Latin-1 directory name, or the current
	// directory under one for --repo .) would end the dispatch with a manifest that cannot be
	// written, and every later reap, run and list of the home would fail on it.
	if !utf8.ValidString(abs) {
		return "", "", fmt.Errorf("repository %q: the path is not valid UTF-8 (agora records it in JSON); rename the directory or give a UTF-8 path (a symlink) to it", abs)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return "", "", fmt.Errorf("repository %s is not a directory", repo)
	}
	rev = cmp.Or(rev, "HEAD")
	commit, err := gitexec.Commit(ctx, abs, rev)
	if errors.As(err, new(*gitexec.RefusedRevisionError)) {
		return "", "", err
	}
	if err != nil {
		return "", "", &errclass.NotFoundError{Kind: "revision", ID: rev, In: "repository " + repo}
	}
	return abs, commit, nil
}

// gitCmd runs git on the host (package gitexec), so a repository's own hooks and filters and
// the user's configuration never run.
func gitCmd(ctx context.Context, dir string, args ...string) *exec.Cmd {
	return gitexec.Command(ctx, dir, args...)
}

// PinWorkspace pins the workspace ref names to its version and rev ("" means its default) to a
// commit the workspace allows: what a run of a plan on it records, so every task sees one tree.
// A plan starts new work, so a version it names must be the workspace's current one.
// Refusals name the workspace, never its path.
func (d *Dispatcher) PinWorkspace(ctx context.Context, ref, rev string) (wsRef, commit string, err error) {
	wsRef, _, commit, err = d.resolveWorkspace(ctx, ref, rev, true)
	return wsRef, commit, err
}

// PinRevision checks that repo is a git repository and returns its absolute path and the
// commit id rev names ("" means HEAD): what a dispatch records, so it never moves.
func PinRevision(ctx context.Context, repo, rev string) (string, string, error) {
	return resolveRevision(ctx, repo, rev)
}
