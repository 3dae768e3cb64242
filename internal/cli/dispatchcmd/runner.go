package dispatchcmd

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agora-dev/agora/internal/callerctx"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/dispatch/detach"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/strictjson"
)

// frontName is the front (cmd/agora) installed beside the whole program (cmd/agora-full).
const frontName = "agora"

// handoffRunner is serve's side of the one-shot hand-off: a dispatch `agora dispatch
// run` gives to serve runs through runDispatchWith on serve's resident dispatcher (agora.db
// open, keys and the worker resolved once), with the CLI's streams carried back as frames,
// so the CLI prints, exits and is interrupted exactly as if it had supervised it itself.
// What serve cannot run exactly as that CLI would (another home or binary, agora.yaml changed
// since serve started, a peer that is not a person's `agora dispatch run`) is declined, and
// the CLI supervises it itself.
type handoffRunner struct {
	f    *cmdutil.Factory
	d    *dispatch.Dispatcher
	sup  *detach.Supervisors // serve's: --detach and warm slots go through its standbys
	home string              // absolute
	exe  string
	env  string // api.EnvDigest of serve's environment
	// sums are api.EnvSums of serve's environment: a decline for the environment names the
	// variables that differ from them.
	sums []string
	// resident is set for the resident dispatcher (resident.go), whose declines say
	// how to restart it rather than serve.
	resident bool
	// envAll, set for a resident dispatcher whose home runs programs that read any variable
	// for a dispatch (residentWholeEnv), is api.ResidentEnvDigest of its whole environment,
	// which a CLI's must equal; "" otherwise.
	envAll string
	// context, set for the resident, is the callerctx.Process of the resident itself, which the
	// peer's must equal; nil for serve.
	context callerctx.Process
	cfgFile string
	cfgSum  [32]byte // the digest of the agora.yaml bytes serve loaded (config.FileSum)
	// running is the file serve runs from (its /proc/self/exe): a CLI whose exe is no
	// longer that file (agora upgraded in place since serve started) is declined.
	running os.FileInfo
}

// NewHandoffRunner is serve's runner of the dispatches `agora dispatch run` hands it, over
// serve's dispatcher d and supervisors sup ([cmdutil.Factory.Handoff]).
func NewHandoffRunner(f *cmdutil.Factory, d *dispatch.Dispatcher, sup *detach.Supervisors, h *home.Home) (api.Handoff, error) {
	r, err := newHandoffRunner(f, d, sup, h)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func newHandoffRunner(f *cmdutil.Factory, d *dispatch.Dispatcher, sup *detach.Supervisors, h *home.Home) (*handoffRunner, error) {
	abs, err := filepath.Abs(h.Dir)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	running, err := os.Stat("/proc/self/exe")
	if err != nil {
		return nil, err
	}
	r := &handoffRunner{f: f, d: d, sup: sup, home: abs, exe: exe, env: api.EnvDigest(os.Environ()), sums: api.EnvSums(os.Environ()), cfgFile: filepath.Join(abs, config.FileName), running: running}
	// The digest of the bytes h.Config was parsed from, not of a read now: an edit between
	// the two would pass for the file this process runs with.
	r.cfgSum = h.Config.FileSum()
	return r, nil
}

// fileSum is the sha256 of path's bytes; a missing or unreadable file sums to zero.
func fileSum(path string) [32]byte {
	b, err := os.ReadFile(path)
	if err != nil {
		return [32]byte{}
	}
	return sha256.Sum256(b)
}

// isRunning reports whether path is still the file running was, unchanged.
func isRunning(path string, running os.FileInfo) bool {
	fi, err := os.Stat(path)
	return err == nil && os.SameFile(fi, running) && fi.Size() == running.Size() && fi.ModTime().Equal(running.ModTime())
}

// Prepare implements api.Handoff.
func (r *handoffRunner) Prepare(ctx context.Context, req *api.HandoffRequest, peer api.Peer) (func(context.Context, func(api.HandoffFrame) error), error) {
	switch {
	case req.StartBy != 0 && time.Now().UnixNano() > req.StartBy:
		return nil, &api.Declined{Why: "the CLI stopped waiting for this answer"}
	case filepath.Clean(req.Home) != r.home:
		return nil, &api.Declined{Why: "serve's home is " + r.home}
	case req.Exe != r.exe:
		return nil, &api.Declined{Why: "serve runs another agora binary: " + r.exe}
	case !isRunning(req.Exe, r.running):
		return nil, &api.Declined{Why: r.exe + " was replaced since serve started (restart serve to hand it dispatches)"}
	case req.Env != r.env:
		return nil, &api.Declined{Why: r.envDeclined(req.EnvSums, api.DispatchEnv, ""), Kind: "environment"}
	case r.envAll != "" && req.EnvAll != r.envAll:
		return nil, &api.Declined{Why: r.envDeclined(req.EnvSums, func(string) bool { return true },
			"this home has a kubernetes target whose kubeconfig's credential plugins may read any variable"), Kind: "whole environment"}
	case fileSum(r.cfgFile) != r.cfgSum:
		return nil, &api.Declined{Why: "agora.yaml changed since serve started"}
	}
	// Learn is a person's act, never an MCP client's: only a person's `agora dispatch run`
	// (this binary, those words) may hand a dispatch over. The MCP server (`agora mcp serve`)
	// runs as the same user; its code never calls this route, and this check refuses it if it
	// ever did.
	if why := peerNotDispatchRun(peer.PID, r.exe); why != "" {
		return nil, &api.Declined{Why: why}
	}
	if r.context != nil {
		c, err := callerctx.ReadProcess(int(peer.PID))
		if err != nil {
			return nil, &api.Declined{Why: "the CLI's umask, groups, cgroup, namespaces and limits are unreadable"}
		}
		if parts := c.Differ(r.context); len(parts) > 0 {
			return nil, &api.Declined{Why: "the CLI's process context differs from the resident dispatcher's in: " + strings.Join(parts, ", ") +
				" (a dispatch runs with it); " + restartResident}
		}
	}
	// The actor is the peer's user, as the CLI's own (no --actor: the CLI hands off only
	// without it) would be: never a name the client sends.
	u, err := user.LookupId(strconv.FormatUint(uint64(peer.UID), 10))
	if err != nil || u.Username == "" {
		return nil, &api.Declined{Why: fmt.Sprintf("uid %d has no user name", peer.UID)}
	}
	dreq := dispatch.Request{
		Subagent: req.Subagent, Envs: req.Envs, Target: req.Target, Input: req.Input,
		Repo: req.Repo, Workspace: req.Workspace, Revision: req.Revision, Timeout: req.Timeout(), Actor: u.Username,
		CallbackURL: req.Callback, Budget: req.Budget, Verify: req.Verify, Learn: req.Learn,
	}
	if len(req.Grants) > 0 {
		var g grant.Set
		if err := strictjson.Unmarshal(req.Grants, &g); err != nil {
			return nil, fmt.Errorf("hand-off request: grants: %w", err)
		}
		dreq.Grants = &g
	}
	return func(ctx context.Context, send func(api.HandoffFrame) error) {
		if errors.Is(context.Cause(ctx), api.ErrNotStarted) {
			return
		}
		rf := *r.f
		rf.ActorFlag = ""
		rf.IO = &cmdutil.IOStreams{In: bytes.NewReader(nil), Out: frameWriter{send, false}, ErrOut: frameWriter{send, true}}
		err := runDispatchWith(ctx, &rf, r.d, r.sup, dreq, req.Detach, req.Output, req.Progress, func(id string) { send(api.HandoffFrame{ID: id}) })
		send(api.HandoffFrame{End: handoffEnd(err)})
	}, nil
}

// maxNamed caps the variables a decline names, the rest counted, and maxNameLen the bytes of
// each name said.
const (
	maxNamed   = 8
	maxNameLen = 64
)

// envDeclined says why a CLI whose environment is not the taker's is declined: the
// variables that differ (its sums against the taker's, those keep keeps) by name only, since
// a value may be a secret; why the taker holds to its whole environment (whole, or "" when
// it holds only to what a dispatch reads); and how to get the fast path from there. A CLI
// that sent no sums, or whose sums name nothing, is told its environment differs.
func (r *handoffRunner) envDeclined(theirs []string, keep func(string) bool, whole string) string {
	var names []string
	if len(theirs) > 0 {
		names = api.EnvDiff(theirs, r.sums, keep)
	}
	if n := len(names); n > maxNamed {
		names = append(names[:maxNamed:maxNamed], fmt.Sprintf("%d more", n-maxNamed))
	}
	for i, k := range names {
		// A name is the CLI's to choose, and the reason goes into resident.log.
		if len(k) > maxNameLen {
			names[i] = strings.ToValidUTF8(k[:maxNameLen-3], "") + "..."
		}
	}
	what := "it differs"
	switch {
	case len(names) == 1:
		what = names[0] + " differs"
	case len(names) > 1:
		what = strings.Join(names, ", ") + " differ"
	}
	switch {
	case r.resident && whole != "":
		return "this environment is not the one the resident dispatcher was started in: " + what + "; " + whole +
			", so it takes dispatches only from that environment, all of it; " + restartResident
	case r.resident:
		return "this environment is not the one the resident dispatcher was started in, in what a dispatch reads: " + what + "; " + restartResident
	}
	return "the CLI's environment is not serve's in what a dispatch reads: " + what + "; for the fast path, dispatch from serve's environment or restart serve from this one"
}

// restartResident says how a CLI the resident declines for its environment gets the fast
// path.
const restartResident = "for the fast path here, restart it from this environment (agora dispatch resident --stop; the next dispatch starts one)"

// frameWriter carries what a command writes to one of its streams as frames.
type frameWriter struct {
	send   func(api.HandoffFrame) error
	stderr bool
}

// maxFramePart caps the bytes of one frame's text: JSON may spell each byte in six
// ("\u003c"), and the frame must stay under api.MaxHandoffFrame, which the CLI refuses
// (one write can be a whole -o json record, an agent's output names in it).
const maxFramePart = (api.MaxHandoffFrame - 1024) / 6

func (w frameWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		n := min(len(p), maxFramePart)
		// Whole runes only: half of one would reach the CLI as U+FFFD.
		for n < len(p) && n > 0 && !utf8.RuneStart(p[n]) {
			n--
		}
		n = cmp.Or(n, min(len(p), maxFramePart))
		f := api.HandoffFrame{Out: string(p[:n])}
		if w.stderr {
			f = api.HandoffFrame{Err: string(p[:n])}
		}
		if err := w.send(f); err != nil {
			return written, err
		}
		written += n
		p = p[n:]
	}
	return written, nil
}

// hinter is an error that knows how to fix itself, as the root's renderError reads it.
type hinter interface{ Hint() string }

// handoffEnd is how the CLI ends for err, as renderError and renderInterrupt would see it.
func handoffEnd(err error) *api.HandoffEnd {
	if err == nil {
		return &api.HandoffEnd{Exit: cmdutil.ExitOK}
	}
	end := &api.HandoffEnd{Exit: cmdutil.ExitCode(err)}
	var (
		ee *cmdutil.ExitCodeError
		ie *cmdutil.InterruptedError
		ue *cmdutil.UsageError
		h  hinter
	)
	switch {
	case errors.As(err, &ie):
		end.Interrupted, end.Error = true, ie.What
		return end
	case errors.As(err, &ee) && ee.Err == nil:
		return end
	}
	end.Error = err.Error()
	if errors.As(err, &h) {
		end.Hint = h.Hint()
	}
	end.Usage = errors.As(err, &ue)
	return end
}

// peerNotDispatchRun says why the process pid is not this agora binary running `dispatch
// run`, or "" when it is. Its executable and command line are read from /proc while its
// connection is open.
func peerNotDispatchRun(pid int32, exe string) string {
	return peerNotAgora(pid, exe, "dispatch", "run")
}

// peerNotAgora says why the process pid is not this agora binary (or the front beside it)
// running `agora VERB SUB`, or "" when it is.
func peerNotAgora(pid int32, exe, verb, sub string) string {
	if pid <= 0 {
		return "the peer's process is unknown"
	}
	proc := "/proc/" + strconv.Itoa(int(pid))
	// The peer is this binary, or the front people type as `agora` (cmd/agora), installed
	// beside it, which hands `dispatch run` over without exec'ing this binary.
	if got, err := os.Readlink(proc + "/exe"); err != nil || (got != exe && got != filepath.Join(filepath.Dir(exe), frontName)) {
		return "the peer is not this agora binary"
	}
	b, err := os.ReadFile(proc + "/cmdline")
	if err != nil {
		return "the peer's command line is unreadable"
	}
	var words []string
	for i, a := range strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00") {
		if i == 0 || strings.HasPrefix(a, "-") {
			continue
		}
		words = append(words, a)
		if len(words) == 2 {
			break
		}
	}
	if len(words) != 2 || words[0] != verb || words[1] != sub {
		return "the peer is not 'agora " + verb + " " + sub + "'"
	}
	return ""
}
