package worker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/agora-dev/agora/internal/secret/redact"
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
// cannot erase it. The hook leaves a mark per phase in a directory the worker made (see
// hookaudit.go), which is how the worker, reading claude's output, tells a call its hooks
// recorded from one they never saw (a tool that is not loaded, or refused by claude's
// permission rules) and from one that ran without them, which fails the dispatch.
//
// The hook's argv is in the settings file claude reads once at start; it holds paths, tool
// and server names and the names (never the values) of the secret variables whose values are
// masked before the arguments are hashed.

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
	reasonNotLoaded  = "claude-code: not loaded: the grant does not cover this tool"
	reasonRuleDenied = "claude-code: denied by the permission rules derived from the grant"
	reasonRefused    = "claude-code: refused by claude before agora's pre-tool hook saw it (invalid input or a blocked hook)"
	reasonNoPreHook  = "claude-code: ran without agora's pre-tool hook; the dispatch is stopped"
)

// Marks a hook leaves for the worker, per call: markPre once its pre report is on record
// (holding decisionRequested or "denied"), markRan before it reports the outcome (holding
// the outcome's decision, so the worker can report it when the hook could not) and markPost
// once the outcome is on record.
const (
	markPre  = "pre"
	markRan  = "ran"
	markPost = "post"
)

// hookConfig is the hook's command line.
type hookConfig struct {
	gateway    string   // the gateway's socket
	marks      string   // the worker's mark directory
	tools      []string // built-in tools the grant covers (claudert.Tools)
	mcp        []string // MCP servers the grant covers: their mcp__SERVER__* tools
	secretEnvs []string // variables whose values are masked before hashing
}

// args is the hook's argv after `agora worker hook`.
func (c hookConfig) args() []string {
	a := []string{"--gateway=" + c.gateway, "--marks=" + c.marks}
	for _, t := range c.tools {
		a = append(a, "--tool="+t)
	}
	for _, s := range c.mcp {
		a = append(a, "--mcp="+s)
	}
	for _, e := range c.secretEnvs {
		a = append(a, "--secret-env="+e)
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
	fs.StringVar(&c.marks, "marks", "", "")
	fs.Var((*list)(&c.tools), "tool", "")
	fs.Var((*list)(&c.mcp), "mcp", "")
	fs.Var((*list)(&c.secretEnvs), "secret-env", "")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() != 0:
		return c, errors.New("unexpected arguments")
	case !filepath.IsAbs(c.gateway) || !filepath.IsAbs(c.marks):
		return c, errors.New("--gateway and --marks must be absolute paths")
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
func HookMain(ctx context.Context, args []string, stdin io.Reader, stderr io.Writer) int {
	refuse := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "agora: "+format+"\n", a...)
		return hookBlock
	}
	c, err := parseHookArgs(args)
	if err != nil {
		return refuse("the audit hook is misconfigured (%v); the call is refused", err)
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
	h := hook{cfg: c, gw: dialGateway(c.gateway), red: redact.New(secrets)}
	defer h.gw.close()
	return h.run(ctx, in, stderr)
}

// hook handles one event.
type hook struct {
	cfg hookConfig
	gw  *gatewayClient
	red *redact.Redactor
}

func (h hook) run(ctx context.Context, in hookInput, stderr io.Writer) int {
	r := toolReport{Tool: in.Tool, ArgsHash: argsHash(h.red, in.Input), CallID: auditCallID(in.CallID)}
	if in.Event == "PreToolUse" {
		r.Phase = phasePre
		r.Decision, r.Reason = decisionRequested, reasonRequested
		covered := h.cfg.covers(in.Tool)
		if !covered {
			r.Decision, r.Reason = "denied", reasonNotCovered
		}
		if err := h.gw.report(ctx, r); err != nil {
			fmt.Fprintf(stderr, "agora: the call could not be recorded in the audit log, so it is refused: %v\n", err)
			return hookBlock
		}
		if err := writeMark(h.cfg.marks, in.CallID, markPre, r.Decision); err != nil {
			fmt.Fprintf(stderr, "agora: the call's audit mark could not be written, so it is refused: %v\n", err)
			return hookBlock
		}
		if !covered {
			fmt.Fprintf(stderr, "agora: tool %q is not covered by this subagent's grant; the call is refused\n", auditToolName(in.Tool))
			return hookBlock
		}
		return hookContinue
	}
	r.Phase = phasePost
	r.Decision, r.Reason = "allowed", reasonRan
	if in.Event == "PostToolUseFailure" {
		r.Decision, r.Reason = "error", reasonFailed
		if in.Interrupt {
			r.Reason = reasonInterrupt
		}
	}
	r.Duration = h.duration(in)
	// The tool ran: say so before anything can fail, so the worker reports the outcome
	// itself when this hook cannot.
	ranErr := writeMark(h.cfg.marks, in.CallID, markRan, r.Decision+"\n"+r.Reason)
	err := h.gw.report(ctx, r)
	if err == nil {
		err = writeMark(h.cfg.marks, in.CallID, markPost, r.Decision)
	}
	if err = errors.Join(ranErr, err); err != nil {
		// The tool already ran; exit 2 only tells the model.
		fmt.Fprintf(stderr, "agora: the outcome of this call could not be recorded in the audit log: %v\n", err)
		return hookBlock
	}
	return hookContinue
}

// duration is claude's measure of the tool's run, or else the time since the pre report.
func (h hook) duration(in hookInput) time.Duration {
	if in.DurationMS >= 0 {
		return time.Duration(in.DurationMS) * time.Millisecond
	}
	fi, err := os.Lstat(markPath(h.cfg.marks, in.CallID, markPre))
	if err != nil {
		return 0
	}
	return max(time.Since(fi.ModTime()), 0)
}

// argsHash is "sha256:" and the hex SHA-256 of a tool input as compact JSON with the
// secret values masked, so it cannot confirm a guess of one. The hook and the worker hash
// the same JSON claude printed, so a call's entries carry the same hash.
func argsHash(red *redact.Redactor, input json.RawMessage) string {
	var b bytes.Buffer
	if len(input) == 0 || json.Compact(&b, input) != nil {
		b.Reset()
		b.WriteString("null")
	}
	sum := sha256.Sum256(red.Bytes(b.Bytes()))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// auditCallID returns id when the gateway accepts it as a call id (1 to 128 letters,
// digits, '_' and '-', as Claude's "toolu_…" ids are), and else a stable stand-in derived
// from it, so a call's entries still pair up.
func auditCallID(id string) string {
	ok := id != "" && len(id) <= 128
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	}
	if ok {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "id-sha256-" + hex.EncodeToString(sum[:16])
}

// markPath is the mark of kind for a call: named by a hash of the id, which is claude's
// (and so the model endpoint's) string, never a path.
func markPath(dir, callID, kind string) string {
	sum := sha256.Sum256([]byte(callID))
	return filepath.Join(dir, hex.EncodeToString(sum[:16])+"."+kind)
}

// writeMark writes a mark, never through a symlink planted in its place.
func writeMark(dir, callID, kind, content string) error {
	f, err := os.OpenFile(markPath(dir, callID, kind), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(content)
	return errors.Join(werr, f.Close())
}

// readMark returns a mark's content, "" when there is none (or it is not a regular file).
func readMark(dir, callID, kind string) string {
	f, err := os.OpenFile(markPath(dir, callID, kind), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(f, 1024))
	return string(b)
}
