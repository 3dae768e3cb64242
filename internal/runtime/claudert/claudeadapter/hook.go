package claudeadapter

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/secret/redact"
	"github.com/agora-dev/agora/internal/shellwords"
	"github.com/agora-dev/agora/internal/strictjson"
)

// Claude Code runs its own tools, so agora audits them through Claude Code's hooks: the
// worker gives claude a settings file of its own (package claudert) whose PreToolUse,
// PostToolUse and PostToolUseFailure hook is this binary, as `agora worker hook`. The hook
// reports each phase of each call to the gateway's /audit/tool itself, live:
//
//   - PreToolUse, before the tool runs (and before claude's own permission check): a tool
//     the grant does not cover is refused here ("denied", exit 2), whatever claude loaded;
//     any other call is recorded "requested". A report the gateway did not keep blocks the
//     call (exit 2, which claude honours by not running the tool; any other failure of a
//     PreToolUse hook would let the call through, so every failure here exits 2).
//   - PostToolUse or PostToolUseFailure, after the tool ran and before its result reaches
//     the model: "allowed" (it ran), or "error" (it ran and failed or was interrupted).
//
// So a call that ran is on record before it ran, and a cancel that kills claude mid-call
// cannot erase it. The hook reports through the worker (hookrelay.go), which keeps in its
// own memory what the gateway recorded per call id: that, and claude's output, is how the
// worker tells a call its hooks recorded from one they never saw (a tool that is not loaded,
// or refused by claude's permission rules) and from one that ran without them, which fails
// the dispatch. The hook leaves nothing in the file system.
//
// The hook's argv is in the settings file claude reads once at start; it holds the relay's
// address, tool and server names and the names (never the values) of the secret variables
// whose values are masked before the arguments are hashed.

// Hook exit codes, as Claude Code reads them.
const (
	hookContinue = 0
	hookBlock    = 2
)

// Reasons of the tool.call entries of claude-code calls.
const (
	reasonRequested  = "claude-code: about to run; claude's permission rules derived from the grant decide"
	reasonRan        = "claude-code: ran, allowed by the permission rules derived from the grant"
	reasonFailed     = "claude-code: ran, allowed by the permission rules derived from the grant, and failed"
	reasonInterrupt  = "claude-code: ran, allowed by the permission rules derived from the grant, and was interrupted"
	reasonNotCovered = "claude-code: not covered by the grant; refused by agora's pre-tool hook"
	// Bash lines the hook judges against the grant's command patterns itself, whatever
	// claude's own rules would allow (claude runs its read-only commands without any rule).
	reasonCommandNotGranted = "claude-code: command not covered by the grant; refused by agora's pre-tool hook"
	reasonLineNotSimple     = "claude-code: not one simple command, and the grant names no shell; refused by agora's pre-tool hook"
	reasonInputUnreadable   = "claude-code: the tool's input could not be read exactly; refused by agora's pre-tool hook"
	reasonEditPath          = "claude-code: a write inside a .git directory or outside the workspace; refused by agora's pre-tool hook"
	reasonNotLoaded         = "claude-code: not loaded: the grant does not cover this tool"
	reasonRuleDenied        = "claude-code: denied by the permission rules derived from the grant"
	reasonRefused           = "claude-code: refused by claude or its tool before it ran (invalid input)"
	reasonHookBlocked       = "claude-code: refused by a blocking pre-tool hook"
	reasonNoPreHook         = "claude-code: ran without agora's pre-tool hook; the dispatch is stopped"
)

// hookConfig is the hook's command line.
type hookConfig struct {
	gateway    string              // the worker's hook relay: an abstract socket "@name" (or a path)
	tools      []string            // built-in tools the grant covers (claudert.Tools)
	mcp        []string            // MCP servers the grant covers: their mcp__SERVER__* tools
	commands   []string            // the grant's command patterns: every Bash line is judged against them
	secretEnvs []string            // variables whose values are masked before hashing
	approve    []grant.ApproveRule // the grant's approve rules: calls held for a person
	// learn: a learn dispatch (docs/learn.md): a call the grant does not cover is reported
	// as would_deny and goes on to claude's own rules (which the worker widened). The
	// gateway refuses a would_deny from any other dispatch, and then the call is blocked.
	learn bool
}

// args is the hook's argv after `agora worker hook`.
func (c hookConfig) args() []string {
	a := []string{"--gateway=" + c.gateway}
	for _, t := range c.tools {
		a = append(a, "--tool="+t)
	}
	for _, s := range c.mcp {
		a = append(a, "--mcp="+s)
	}
	for _, p := range c.commands {
		a = append(a, "--command="+p)
	}
	for _, e := range c.secretEnvs {
		a = append(a, "--secret-env="+e)
	}
	a = append(a, approveArgs(c.approve)...)
	if c.learn {
		a = append(a, "--learn")
	}
	return a
}

// list is a repeatable flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func parseHookArgs(args []string) (hookConfig, error) {
	var c hookConfig
	fs := flag.NewFlagSet("agora worker hook", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.gateway, "gateway", "", "")
	fs.Var((*list)(&c.tools), "tool", "")
	fs.Var((*list)(&c.mcp), "mcp", "")
	fs.Var((*list)(&c.commands), "command", "")
	fs.Var((*list)(&c.secretEnvs), "secret-env", "")
	fs.BoolVar(&c.learn, "learn", false, "")
	var approve list
	fs.Var(&approve, "approve", "")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var err error
	if c.approve, err = parseApprove(approve); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() != 0:
		return c, errors.New("unexpected arguments")
	case !filepath.IsAbs(c.gateway) && !(len(c.gateway) > 1 && c.gateway[0] == '@'):
		return c, errors.New("--gateway must be an absolute path or an abstract socket name")
	}
	return c, nil
}

// covers reports whether the grant covers tool: a built-in tool it loads, or a tool of one
// of its MCP servers.
func (c hookConfig) covers(tool string) bool {
	return coveredBy(tool, c.tools, c.mcp)
}

func coveredBy(tool string, tools, mcp []string) bool {
	if slices.Contains(tools, tool) {
		return true
	}
	return slices.ContainsFunc(mcp, func(s string) bool { return strings.HasPrefix(tool, "mcp__"+s+"__") })
}

// HookMain is `agora worker hook`, the command Claude Code runs for each tool event (see
// above). It reads the event from stdin and returns the exit code for claude: 0 to let the
// call go on, 2 to refuse it; what it writes to stderr, claude gives the model. It never
// writes to stdout (claude would read it as a decision).
func (Adapter) HookMain(ctx context.Context, args []string, stdin io.Reader, stderr io.Writer) int {
	return HookMain(ctx, args, stdin, stderr)
}

// HookMain is [Adapter.HookMain].
func HookMain(ctx context.Context, args []string, stdin io.Reader, stderr io.Writer) int {
	refuse := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "agora: "+format+"\n", a...)
		return hookBlock
	}
	c, err := parseHookArgs(args)
	if err != nil {
		return refuse("the audit hook is misconfigured (%v); the call is refused", err)
	}
	if err := checkNoPreload(os.Environ()); err != nil {
		return refuse("%v; the call is refused", err)
	}
	b, err := io.ReadAll(io.LimitReader(stdin, maxHookInput+1))
	if err != nil {
		return refuse("the audit hook could not read its input; the call is refused")
	}
	in, err := parseHookInput(b)
	if err != nil {
		return refuse("%v; the call is refused", err)
	}
	var secrets [][]byte
	for _, name := range c.secretEnvs {
		v, ok := os.LookupEnv(name)
		if !ok {
			return refuse("secret variable %s is not in the hook's environment, so the call's arguments cannot be masked; the call is refused", name)
		}
		secrets = append(secrets, []byte(v))
	}
	h := hook{cfg: c, gw: agentrun.DialGateway(c.gateway), red: redact.New(secrets)}
	defer h.gw.Close()
	return h.run(ctx, in, stderr)
}

// hook handles one event.
type hook struct {
	cfg hookConfig
	gw  *agentrun.Gateway
	red *redact.Redactor
}

func (h hook) run(ctx context.Context, in hookInput, stderr io.Writer) int {
	r := agentrun.ToolReport{Tool: in.Tool, ArgsHash: callHash(h.red, in.Tool, in.Input, in.Cwd), CallID: agentrun.AuditCallID(in.CallID)}
	if in.Event == "PreToolUse" {
		r.Phase = agentrun.PhasePre
		r.Decision, r.Reason = agentrun.DecisionRequested, reasonRequested
		refusal := h.judge(in, &r)
		if refusal != "" && h.cfg.learn && learnable(r.Reason) {
			// Recorded instead of refused; a report not kept blocks the call.
			w := agentrun.ToolReport{Tool: r.Tool, Decision: agentrun.DecisionWouldDeny, Reason: r.Reason, ArgsHash: r.ArgsHash,
				Phase: agentrun.PhasePre, CallID: r.CallID, Command: learnCommand(h.red, in)}
			if err := h.gw.Report(ctx, w); err != nil {
				fmt.Fprintf(stderr, "agora: the call could not be recorded in the audit log, so it is refused: %v\n", err)
				return hookBlock
			}
			refusal, r.Decision, r.Reason = "", agentrun.DecisionRequested, reasonRequested
		}
		if refusal != "" && h.cfg.learn && r.Reason == reasonEditPath {
			refusal = h.learnWrite(ctx, in, &r, refusal)
		}
		approved := true
		if refusal == "" {
			rule, held, err := heldBy(h.cfg.approve, in.Tool, in.Input)
			switch {
			case err != nil:
				r.Decision, r.Reason = "denied", reasonInputUnreadable
				refusal = err.Error() + "; the call is refused"
			case held:
				approved = h.hold(ctx, in, rule, &r, stderr)
			}
		}
		if err := h.gw.Report(ctx, r); err != nil {
			fmt.Fprintf(stderr, "agora: the call could not be recorded in the audit log, so it is refused: %v\n", err)
			return hookBlock
		}
		if !approved {
			return hookBlock
		}
		if refusal != "" {
			fmt.Fprintf(stderr, "agora: %s\n", refusal)
			return hookBlock
		}
		return hookContinue
	}
	r.Phase = agentrun.PhasePost
	r.Decision, r.Reason = "allowed", reasonRan
	if in.Event == "PostToolUseFailure" {
		r.Decision, r.Reason = "error", reasonFailed
		if in.Interrupt {
			r.Reason = reasonInterrupt
		}
	}
	if in.DurationMS >= 0 {
		r.Duration = time.Duration(in.DurationMS) * time.Millisecond
	} // else the relay measures it from the pre report
	if err := h.gw.Report(ctx, r); err != nil {
		// The tool already ran; exit 2 only tells the model. The worker reports the outcome
		// itself from claude's output.
		fmt.Fprintf(stderr, "agora: the outcome of this call could not be recorded in the audit log: %v\n", err)
		return hookBlock
	}
	return hookContinue
}

// judge decides a PreToolUse call against the grant before anything else: a tool the grant
// does not cover, and a Bash line that is not one simple command the grant's patterns name
// (unless they name a shell), are refused here, whatever claude's own permission rules
// would allow (claude runs its built-in read-only commands, cat, ls, git log, without any
// rule). It fills r with the refusal and returns what the model reads, or "".
func (h hook) judge(in hookInput, r *agentrun.ToolReport) string {
	if !h.cfg.covers(in.Tool) {
		r.Decision, r.Reason = "denied", reasonNotCovered
		return fmt.Sprintf("tool %q is not covered by this subagent's grant; the call is refused", agentrun.AuditToolName(in.Tool))
	}
	if path, ok, err := editedPath(in.Tool, in.Input); ok {
		switch {
		case err != nil:
			r.Decision, r.Reason = "denied", reasonInputUnreadable
			return err.Error() + "; the call is refused"
		default:
			if why := editRefusal(path, in.Cwd, os.Getenv("AGORA_WORKSPACE")); why != "" {
				r.Decision, r.Reason = "denied", reasonEditPath
				return why + "; the call is refused"
			}
		}
		return ""
	}
	if in.Tool != "Bash" {
		return ""
	}
	line, err := bashCommand(in.Input)
	if err != nil {
		r.Decision, r.Reason = "denied", reasonInputUnreadable
		return err.Error() + "; the call is refused"
	}
	ok, why := grant.CommandLineAllowed(h.cfg.commands, line)
	if ok {
		return ""
	}
	r.Decision, r.Reason = "denied", reasonCommandNotGranted
	if _, err := shellwords.Split(line); err != nil {
		r.Reason = reasonLineNotSimple
	}
	return h.red.String(why) + "; the call is refused"
}

// reasonLearnedWrite is the record of a learn dispatch's Write outside the workspace: claude's
// call is refused, and the worker made the write in the scratch directory instead
// (claudelearn.go), after its file.would_deny.
const reasonLearnedWrite = "claude-code: a write outside the workspace; recorded as file.would_deny and made in the learn scratch directory, claude's own write refused by agora's pre-tool hook"

// learnWrite asks the worker to learn a Write outside the workspace (never into .git) and
// returns what claude reads: where the write went, or the refusal as it was.
func (h hook) learnWrite(ctx context.Context, in hookInput, r *agentrun.ToolReport, refusal string) string {
	path, ok, err := editedPath(in.Tool, in.Input)
	if in.Tool != "Write" || !ok || err != nil || editRefusal(path, in.Cwd, os.Getenv("AGORA_WORKSPACE")) != agentrun.RefusalOutsideWorkspace {
		return refusal
	}
	status, reply, err := h.gw.Post(ctx, "/learn/file", map[string]string{"call_id": in.CallID})
	var a struct {
		Path string `json:"path"`
	}
	if err != nil || status != http.StatusOK || json.Unmarshal(reply, &a) != nil || a.Path == "" {
		return refusal
	}
	r.Reason = reasonLearnedWrite
	return fmt.Sprintf("learn: %s is outside the workspace; agora recorded the write (file.would_deny) and made it at %s instead. Nothing was written at %s", path, a.Path, path)
}

// learnable reports whether a pre-tool refusal is the grant's, which a learn dispatch
// records instead (a tool not covered, a Bash line its patterns do not name); a write
// outside the workspace or into .git, and an input that cannot be read exactly, stay refused.
func learnable(reason string) bool {
	switch reason {
	case reasonNotCovered, reasonCommandNotGranted, reasonLineNotSimple:
		return true
	}
	return false
}

// learnCommand is a Bash call's command line for a would_deny, secrets masked and cut to
// what the gateway takes; "" for another tool.
func learnCommand(red *redact.Redactor, in hookInput) string {
	if in.Tool != "Bash" {
		return ""
	}
	line, err := bashCommand(in.Input)
	if err != nil {
		return ""
	}
	// The gateway refuses control characters in a command. A tab separates words as a space
	// does; any other (a newline ends a command) cannot become a space without making the
	// line another command ("git\npush" would read as `git push`, which never ran, and
	// `agora capability suggest` would propose it): the line is then left out.
	line = strings.ReplaceAll(red.String(line), "\t", " ")
	if strings.ContainsFunc(line, unicode.IsControl) {
		return ""
	}
	const max = 2048
	if len(line) > max {
		line = strings.ToValidUTF8(line[:max], "")
	}
	return line
}

// callHash is a Claude Code call's args hash as both of the worker's views of the call make
// it: claude gives its hooks a file tool's relative path made absolute against its working
// directory, while its output prints the model's input as given. So a relative path is joined
// to dir first (the hook's: the cwd claude reports; the output's: the workspace claude starts
// in). A relative path claude made absolute against another directory (after a Bash cd) still
// differs, and the run stops as before: the pre-report then names another call.
func callHash(red *redact.Redactor, tool string, input json.RawMessage, dir string) string {
	return agentrun.ArgsHash(red, absToolPath(tool, input, dir))
}

// absToolPath is input with its file path joined to dir when it is relative, else input.
func absToolPath(tool string, input json.RawMessage, dir string) json.RawMessage {
	field := editField(tool)
	if tool == "Read" {
		field = "file_path"
	}
	if field == "" || dir == "" {
		return input
	}
	var m map[string]json.RawMessage
	var path string
	if strictjson.Unmarshal(input, &m) != nil || strictjson.Unmarshal(m[field], &path) != nil || path == "" || filepath.IsAbs(path) {
		return input
	}
	abs, err := json.Marshal(filepath.Join(dir, path))
	if err != nil {
		return input
	}
	m[field] = abs
	out, err := json.Marshal(m)
	if err != nil {
		return input
	}
	return out
}
