// Package codexadapter is the worker's adapter of the codex runtime: it runs the Codex CLI
// (package codexrt) behind a loopback relay to the gateway's Responses route whose gate
// judges each call the model makes before codex sees it (codexgate.go, codexevent.go), checks
// each action again as codex takes it (codexAudit), and, in a learn dispatch, records and
// redirects what the grant would refuse (codexlearn.go).
package codexadapter

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unicode"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/runtime/codexrt"
	"github.com/agora-dev/agora/internal/secret/redact"
	"github.com/agora-dev/agora/internal/shellwords"
	"github.com/agora-dev/agora/internal/toolreg/builtin"
)

// decisionRanOutsideGrant is the decision of an action codex started before agora could judge
// it and that the grant does not allow: it ran (or began to), outside the grant. The gateway
// accepts it only without a phase; it is never "denied", which says the action did not run.
const decisionRanOutsideGrant = "ran-outside-grant"

// Tool names codex's items are audited under (codex's own tool names).
const (
	codexExecTool  = "exec_command"
	codexPatchTool = "apply_patch"
)

// Adapter runs the Codex CLI (`codex exec --json`) with the subagent's prompt, model
// and instructions. codex speaks the Responses API to a loopback relay that forwards to the
// gateway's /model/responses, where the key is added. With approval "never" codex cannot
// ask before it runs a command, so agora decides for it twice, with one judgment
// (codexrt.ArgvAllowed): the relay cuts a call outside the grant out of the model's answer
// before codex sees it (codexgate.go, codexAudit.precheck), recorded denied; and each action
// is checked again as codex takes it (codexAudit): recorded allowed, or, since codex has
// already started it, recorded ran-outside-grant, codex killed and the dispatch failed.
type Adapter struct{}

// Run runs codex for inv.
func (Adapter) Run(ctx context.Context, inv agentrun.Invocation) (agentrun.Exit, error) {
	gw := inv.Gateway()
	defer gw.Close()
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	audit := &codexAudit{ctx: context.WithoutCancel(ctx), gw: gw, red: redact.New(inv.Secrets), grants: inv.Grants, dir: inv.Dir,
		shell: codexDefaultShell(inv.Env), stop: stop, seen: map[string]bool{}, learn: inv.Learn}
	gate := gateResponse(audit.precheck)
	if inv.Learn {
		scratch, err := builtin.NewScratch(inv.Tmp, inv.Dir)
		if err != nil {
			return agentrun.Exit{}, err
		}
		defer scratch.Close()
		audit.patches = &codexPatches{scratch: scratch, dir: inv.Dir}
		gate = learnGate(audit.precheck, audit.patches.rewritten)
	}
	rl, err := startCodexRelay(gw, gate)
	if err != nil {
		return agentrun.Exit{}, fmt.Errorf("start the model relay: %w", err)
	}
	defer rl.Close()
	tr, err := inv.OpenTranscript()
	if err != nil {
		return agentrun.Exit{}, err
	}
	defer tr.Close(inv.Stderr)
	res, err := codexrt.Run(runCtx, codexrt.Config{
		Binary:       inv.Binary,
		Model:        inv.Model,
		SystemPrompt: inv.SystemPrompt,
		// The relay's per-run token, never the model key: the gateway adds that on the host.
		BaseURL: rl.URL, Token: rl.Token,
		// Once codex has used the token it has read its config: the token leaves the file
		// before the model's first answer reaches codex.
		ForgetToken: rl.OnFirst,
		Dir:         inv.Dir,
		Env:         inv.Env,
		Timeout:     inv.Timeout,
		TempDir:     inv.Tmp,
		Stderr:      inv.Stderr,
		Transcript:  tr,
		Observer:    audit,
	}, inv.Prompt)
	if u := res.Usage; res.Completed {
		fmt.Fprintf(inv.Stderr, "codex: turn usage %d input (%d cached), %d output (%d reasoning) tokens\n",
			u.InputTokens, u.CachedInputTokens, u.OutputTokens, u.ReasoningOutputTokens)
	}
	if aerr := audit.failed(); aerr != nil {
		return agentrun.Exit{ExitCode: 1, Failure: "codex runtime: " + aerr.Error()}, nil
	}
	return codexExit(ctx, res, err, inv)
}

// codexExit maps how codex ended to the agent's exit.
func codexExit(ctx context.Context, res codexrt.Result, err error, inv agentrun.Invocation) (agentrun.Exit, error) {
	var nf *codexrt.NotFoundError
	switch {
	case errors.Is(err, codexrt.ErrTimedOut):
		return agentrun.Exit{ExitCode: -1, TimedOut: true, Failure: fmt.Sprintf("codex killed at its budget of %s", inv.Timeout)}, nil
	case err != nil && ctx.Err() != nil:
		return agentrun.Exit{ExitCode: -1, Failure: "codex cancelled"}, nil
	case errors.As(err, &nf):
		return agentrun.Exit{ExitCode: 127, Failure: err.Error() + "; install the Codex CLI on the host (npm install -g @openai/codex) or set runtimes.codex.binary in agora.yaml (see docs/runtimes.md)"}, nil
	case err != nil:
		return agentrun.Exit{ExitCode: 1, Failure: err.Error()}, nil
	}
	final := res.Final
	fmt.Fprintln(inv.Stdout, final)
	return agentrun.Exit{Final: &final}, nil
}

// codexAudit checks and records codex's actions as they are parsed (a codexrt.Observer).
// A command is allowed when the grant has run_command and one of its command patterns
// matches the command (codexrt.ArgvAllowed, the relay's judgment too); a file change when
// the grant has write_file and every path is inside the workspace; any other action (an MCP
// call, a web search) is outside what agora configured. Codex reports an action once it has
// started it, so one outside the grant is recorded as what it was, ran-outside-grant, never
// denied; codex is killed first, then the record is written: every moment the action runs
// on is worse than a record a moment later. A decision the gateway does not keep also stops
// codex: nothing runs unrecorded.
type codexAudit struct {
	ctx    context.Context
	gw     *agentrun.Gateway
	red    *redact.Redactor
	grants grant.Set
	dir    string
	shell  string // the shell codex runs a command in when the model names none
	stop   context.CancelCauseFunc

	seen map[string]bool // items decided, by kind and id (the parsing goroutine's alone)
	// learn: a learn dispatch (docs/learn.md): the gate reports a call the grant would
	// refuse (a command no pattern matches, no run_command, a patch without write_file) as
	// would_deny before codex sees it and lets it through; paths outside the workspace or in
	// .git, unreadable calls and other shells stay refused.
	learn bool
	// learned are the call ids reported as would_deny (guarded by mu): the gate sees a call
	// in the item's event and again in response.completed, and one call is one entry.
	learned map[string]bool
	// patches learns a learn dispatch's patches outside the workspace (nil otherwise).
	patches *codexPatches

	mu  sync.Mutex
	err error
}

// Started decides a command as codex starts it; Completed decides a file change once it
// is applied, and anything not decided at its start.
func (a *codexAudit) Started(it codexrt.Item) {
	if it.Type == codexrt.KindCommand {
		a.decide(it)
	}
}

func (a *codexAudit) Completed(it codexrt.Item) { a.decide(it) }

// decide checks one item once; messages, reasoning, plans and notices act on nothing.
func (a *codexAudit) decide(it codexrt.Item) {
	switch it.Type {
	case codexrt.KindMessage, "reasoning", "todo_list", "error":
		return
	}
	key := it.Type + "\x00" + it.ID
	if a.seen[key] {
		return
	}
	a.seen[key] = true
	switch it.Type {
	case codexrt.KindCommand:
		a.command(it.ID, it.Command)
	case codexrt.KindFileChange:
		a.fileChange(it.ID, it.Changes)
	default:
		a.unexpected(it.ID, it.Type)
	}
}

func (a *codexAudit) command(id, command string) {
	args, _ := json.Marshal(map[string]string{"command": command})
	if a.learn && !a.commandGranted(command) {
		// The gate reported it as would_deny before codex saw it.
		a.record(id, codexExecTool, args, "allowed", learnAllowedReason)
		return
	}
	if !slices.Contains(a.grants.Tools, "run_command") {
		a.ranOutside(id, codexExecTool, args, "the grant has no run_command tool", fmt.Sprintf("codex ran command %q, but the grant has no run_command tool; codex was stopped", a.red.String(command)))
		return
	}
	argv, err := shellwords.Split(command)
	if err != nil {
		a.ranOutside(id, codexExecTool, args, "codex started a command line agora cannot read exactly", fmt.Sprintf("codex ran command %q, which agora cannot read exactly (%v), so no grant allows it; codex was stopped", a.red.String(command), err))
		return
	}
	if !codexrt.ArgvAllowed(a.grants.Commands, argv) {
		a.ranOutside(id, codexExecTool, args, "command matches no granted pattern", fmt.Sprintf("codex ran command %q, which is outside the grant (no commands pattern matches it); codex was stopped", a.red.String(command)))
		return
	}
	a.record(id, codexExecTool, args, "allowed", "command matches a granted pattern")
}

func (a *codexAudit) fileChange(id string, changes []codexrt.Change) {
	args, _ := json.Marshal(changes)
	if !slices.Contains(a.grants.Tools, "write_file") && !a.learn {
		a.ranOutside(id, codexPatchTool, args, "the grant has no write_file tool", "codex changed files but the grant has no write_file tool; codex was stopped")
		return
	}
	for _, c := range changes {
		if a.patches != nil && a.patches.inScratch(c.Path) {
			continue // a learned write, in the scratch directory
		}
		if reason := outsideWorkspace(a.dir, c.Path); reason != "" {
			a.ranOutside(id, codexPatchTool, args, reason, fmt.Sprintf("codex changed %q: %s; codex was stopped", a.red.String(c.Path), reason))
			return
		}
	}
	a.record(id, codexPatchTool, args, "allowed", "file changes inside the workspace")
}

// outsideWorkspace says why path (absolute, or relative to the workspace dir, as codex
// resolves a patch's paths) is not a file inside the workspace, or "" when it is.
func outsideWorkspace(dir, path string) string {
	p := path
	if p == "" {
		return "a changed file has no path"
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	rel, err := filepath.Rel(dir, filepath.Clean(p))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "a changed file is outside the workspace"
	}
	if grant.InGitDir(rel) {
		return "a changed file is inside a .git directory (git's own configuration names programs git runs)"
	}
	// codex writes through symlinks: a path inside the workspace whose directory (or itself)
	// is a link out of it changed a file elsewhere, so judge where it resolves.
	resolved, ok := agentrun.ResolvedRel(dir, p)
	if !ok {
		return "a changed file resolves outside the workspace through a symlink"
	}
	if grant.InGitDir(resolved) {
		return "a changed file resolves inside a .git directory through a symlink (git's own configuration names programs git runs)"
	}
	return ""
}

// precheck decides a call the model made before codex sees it (the relay's gate): a call the
// gate refused (unreadable, or a tool or item agora does not let codex act on), a command
// outside the grant, or a patch without write_file is recorded denied and codex stopped, and
// the gate cuts the stream, so codex never runs it. A command it lets through is checked
// again, by the same judgment, as codex starts it.
func (a *codexAudit) precheck(c modelCall) error {
	var argv []string
	switch {
	case c.Refused != "":
		return a.refuse(c, nil, c.Refused, c.Refused)
	case c.Tool == codexExecTool && c.Exec != nil:
		if argv = execArgv(c.Exec, a.shell); argv == nil {
			why := fmt.Sprintf("exec_command names the shell %q, which agora does not judge", a.red.String(clipText(*c.Exec.Shell, 64)))
			return a.refuse(c, nil, why, why)
		}
		args, _ := json.Marshal(map[string][]string{"argv": argv})
		if !slices.Contains(a.grants.Tools, "run_command") || !codexrt.ArgvAllowed(a.grants.Commands, argv) {
			if a.learn {
				return a.wouldDeny(c, args, learnLine(argv), "command matches no granted pattern, or no run_command")
			}
			return a.refuse(c, args, "command matches no granted pattern; refused before it ran",
				fmt.Sprintf("the model asked codex to run %q (in %s %s), which is outside the grant (no commands pattern matches it, or no run_command)", a.red.String(*c.Exec.Cmd), argv[0], argv[1]))
		}
	case c.Tool == codexPatchTool && !slices.Contains(a.grants.Tools, "write_file") && !a.learn:
		return a.refuse(c, nil, "the grant has no write_file tool; refused before it ran", "the model asked codex to change files, but the grant has no write_file tool")
	case c.Tool == codexPatchTool:
		if !slices.Contains(a.grants.Tools, "write_file") {
			// A learn dispatch: recorded, then its paths are judged as any patch's.
			if err := a.wouldDeny(c, nil, "", "the grant has no write_file tool"); err != nil {
				return err
			}
		}
		if a.patches != nil && c.Patch != nil {
			// A learn dispatch: paths outside the workspace are recorded and rewritten
			// into the scratch directory (codexlearn.go); the patch codex will read is
			// judged.
			paths, err := a.learnCodexPatch(c)
			if err != nil {
				return err
			}
			c.Paths = paths
		}
		// Every path the patch names is judged before codex applies it, as the check of what
		// codex changed judges it after: a move's destination is judged here only (codex
		// reports the moved file's old path), and a change inside .git is refused before a
		// granted git command could run what it configures.
		for _, p := range c.Paths {
			for _, path := range []string{p, strings.TrimSpace(p)} {
				if a.patches != nil && a.patches.inScratch(path) {
					continue
				}
				if reason := outsideWorkspace(a.dir, path); reason != "" {
					args, _ := json.Marshal(map[string]string{"path": path})
					return a.refuse(c, args, "a patch names a path "+strings.TrimPrefix(reason, "a changed file ")+"; refused before it ran",
						fmt.Sprintf("the model asked codex to change %q: %s (every path of a patch is checked before codex applies it)", a.red.String(clipText(path, 256)), reason))
				}
			}
		}
	}
	return nil
}

// learnAllowedReason is a learn dispatch's record of a codex action the grant would refuse,
// reported as would_deny before codex saw it.
const learnAllowedReason = "learn: outside the grant, recorded as tool.would_deny before it ran"

// commandGranted is [codexAudit.command]'s judgment of a command line.
func (a *codexAudit) commandGranted(command string) bool {
	argv, err := shellwords.Split(command)
	return err == nil && slices.Contains(a.grants.Tools, "run_command") && codexrt.ArgvAllowed(a.grants.Commands, argv)
}

// wouldDeny reports a learn dispatch's call the grant would refuse before codex sees it; a
// report not kept refuses the call as any refusal does.
func (a *codexAudit) wouldDeny(c modelCall, args []byte, command, reason string) error {
	a.mu.Lock()
	seen := c.ID != "" && a.learned[c.ID]
	a.mu.Unlock()
	if seen {
		return nil
	}
	cmd := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, a.red.String(command))
	if len(cmd) > 2048 {
		cmd = strings.ToValidUTF8(cmd[:2048], "")
	}
	err := a.gw.Report(a.ctx, agentrun.ToolReport{Tool: c.Tool, Decision: agentrun.DecisionWouldDeny, Reason: reason,
		ArgsHash: agentrun.ArgsHash(a.red, args), CallID: agentrun.AuditCallID(c.ID), Command: cmd})
	if err != nil {
		return a.refuse(c, args, "its would_deny could not be recorded", "a learn dispatch's call could not be recorded: "+err.Error())
	}
	a.mu.Lock()
	if a.learned == nil {
		a.learned = map[string]bool{}
	}
	a.learned[c.ID] = true
	a.mu.Unlock()
	return nil
}

// refuse records a call the gate refuses as denied, stops codex and returns the error that
// cuts the model's answer. why is the dispatch's failure detail, reason the entry's.
func (a *codexAudit) refuse(c modelCall, args []byte, reason, why string) error {
	a.deny(c.ID, c.Tool, args, reason, why+"; refused before it ran, codex was stopped")
	return errors.New("refused by agora: " + why)
}

func (a *codexAudit) unexpected(id, kind string) {
	a.ranOutside(id, agentrun.AuditToolName(kind), nil, "an action agora does not configure for codex", fmt.Sprintf("codex performed a %q action, which agora does not configure; codex was stopped", kind))
}

// deny stops codex, then records the refusal of a call codex never saw; failure is the
// dispatch's failure detail.
func (a *codexAudit) deny(id, tool string, args []byte, reason, failure string) {
	a.fail(errors.New(failure))
	a.record(id, tool, args, "denied", reason)
}

// ranOutside stops codex, then records an action codex had already started (or done)
// outside the grant as what it was: decisionRanOutsideGrant, never denied.
func (a *codexAudit) ranOutside(id, tool string, args []byte, reason, failure string) {
	a.fail(errors.New(failure))
	a.record(id, tool, args, decisionRanOutsideGrant, reason+"; codex had already started it")
}

// record sends one decision to the gateway; a decision not on record stops codex.
func (a *codexAudit) record(id, tool string, args []byte, decision, reason string) {
	err := a.gw.Report(a.ctx, agentrun.ToolReport{Tool: tool, Decision: decision, Reason: reason,
		ArgsHash: agentrun.ArgsHash(a.red, args), CallID: agentrun.AuditCallID(id)})
	if err != nil {
		a.fail(fmt.Errorf("%s %s could not be recorded: %w; codex was stopped", tool, decision, err))
	}
}

// fail keeps the first failure and kills codex.
func (a *codexAudit) fail(err error) {
	a.mu.Lock()
	a.err = cmp.Or(a.err, err)
	a.mu.Unlock()
	a.stop(err)
}

func (a *codexAudit) failed() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// learnLine is a would_deny's argv as one shell line, each word shellwords.Quote'd, so that it
// reads back (shellwords.Split) as exactly argv: `agora capability suggest` proposes a pattern
// from it, and words joined with bare spaces read as another argv when one holds a space
// (["bash", "-lc", "make test"] would read as a four-word command that never ran).
func learnLine(argv []string) string {
	q := make([]string, len(argv))
	for i, w := range argv {
		q[i] = shellwords.Quote(w)
	}
	return strings.Join(q, " ")
}

// codexRelayPath is the only path codex's relay forwards: the gateway's Responses route.
const codexRelayPath = "/model/responses"

// startCodexRelay serves codex's Responses requests (base URL http://127.0.0.1:PORT/model)
// until close; every other path is refused. Each response passes through gate (see
// codexgate.go) before codex reads it.
func startCodexRelay(gw *agentrun.Gateway, gate func(*http.Response) error) (*agentrun.Relay, error) {
	tok, err := agentrun.NewRelayToken()
	if err != nil {
		return nil, err
	}
	return agentrun.StartRelay(gw, tok, "/model/", func(p string) bool { return p == codexRelayPath }, gate)
}
