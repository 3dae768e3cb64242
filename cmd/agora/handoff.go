package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agora-dev/agora/internal/agenttext"
	"github.com/agora-dev/agora/internal/callerctx"
	"github.com/agora-dev/agora/internal/orch/api"
	"golang.org/x/sys/unix"
)

// The front's side of the hand-off is internal/cli/dispatchcmd/handoff.go's, step for step: the
// same request, the same checks of serve's socket and peer, the same frames written the same
// way, the same end rendered as the whole program's Run renders it.

const (
	envNoHandoff = "AGORA_NO_HANDOFF"
	// envHandoffLost tells the whole program that serve's stream broke after it accepted the
	// dispatch named: it reads the dispatch's end from agora.db as its own hand-off would.
	envHandoffLost = "AGORA_HANDOFF_LOST"
	handoffDial    = time.Second
	handoffAnswer  = 5 * time.Second
	orchDir        = "orch"
	orchSocket     = "orch.sock"
	residentSocket = "resident.sock" // internal/cli's: the resident dispatcher's
)

// Exit codes the front ends with itself (internal/cli/cmdutil/exitcode.go).
const (
	exitError       = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// tryHandoff hands `agora dispatch run` to serve when it can. handled false: the whole
// program runs the command line (as given, or told serve declined).
func tryHandoff(full string, args []string) (int, bool) {
	if len(args) < 2 || args[0] != "dispatch" || args[1] != "run" {
		return 0, false
	}
	if os.Getenv(envNoHandoff) != "" || os.Getenv("TRACEPARENT") != "" || os.Getenv(envHandoffLost) != "" || tracing() {
		return 0, false
	}
	flags, ok := parseRun(args[2:])
	if !ok {
		return 0, false
	}
	hr, socks, ok := handoffRequest(full, flags)
	if !ok {
		return 0, false
	}
	// Connected first: serve takes the connection while the front makes its signal handler.
	// Before the handler, a Ctrl-C ends the front as it would have ended before it dialed
	// (no request was sent); after it, the command's Ctrl-C is the front's (notTaken).
	// serve's socket first, then the resident dispatcher's. Each is first asked for its
	// challenge (prove), on a connection of its own.
	var sc *serveConn
	var sock string
	for _, s := range socks {
		c, err := dialServe(s)
		if err != nil {
			continue
		}
		if !prove(c, hr) {
			// Stopped or stuck: given up on, as for the hand-off's own answer.
			execFull(full, envNoHandoff+"=1")
		}
		if c, err = dialServe(s); err == nil {
			sc, sock = c, s
			break
		}
	}
	if sc == nil {
		// Nobody listens: the whole program runs the dispatch, and starts the resident
		// dispatcher for the next one (internal/cli, startResident).
		execFull(full, envNoHandoff+"=1")
	}
	body, err := encodeRequest(hr)
	if err != nil {
		sc.Close()
		execFull(full, envNoHandoff+"=1")
	}
	in := watchInterrupts()
	status, answer, err := sc.post(api.HandoffPath, body)
	if err != nil || status != 200 {
		// No answer, or 404 (an older serve), 409 (declined), 400, 403: serve did not take
		// it, and the whole program need not ask again. A decline says why, once, as
		// agora-full's own hand-off says it.
		said := ""
		if err == nil {
			if why, ok := declinedWhy(status, answer); ok {
				said = fmt.Sprintf("agora: %s declined this dispatch (%s); it runs in this process\n", taker(sock), agenttext.EscapeLine(why))
			}
		}
		sc.Close()
		return notTaken(in, full, said), true
	}
	// The end is written once follow returns: the process exits at once, its signal watch
	// and serve's connection ending with it (their teardown cost a no-op 0.1 ms).
	os.Exit(follow(in.ctx, full, sock, answer))
	return 0, true
}

// prove asks serve on c (closed after) for its hand-off challenge and puts the answer into
// hr (internal/cli's handoffProve): left without one when this process may not read it, and
// serve then declines, saying why. false: serve did not answer within handoffAnswer.
func prove(c *serveConn, hr *api.HandoffRequest) bool {
	defer c.Close()
	status, answer, err := c.post(api.HandoffProofPath, nil)
	if err != nil {
		return false
	}
	if status != 200 {
		return true
	}
	var ch api.HandoffChallenge
	if json.NewDecoder(io.LimitReader(answer, 4<<10)).Decode(&ch) != nil {
		return true
	}
	if secret, err := callerctx.Answer(c.peer, ch.FD); err == nil {
		hr.ProofFD, hr.Proof = ch.FD, secret
	}
	return true
}

// declinedWhy reads serve's refusal: its reason when it is a decline (api.HandoffDeclined).
func declinedWhy(status int, answer io.Reader) (string, bool) {
	if status != 409 {
		return "", false
	}
	var e api.Error
	if json.NewDecoder(io.LimitReader(answer, 64<<10)).Decode(&e) != nil || e.Code != api.HandoffDeclined {
		return "", false
	}
	return e.Error, true
}

// taker names, for the user, what listens on sock (internal/cli's handoffTaker).
func taker(sock string) string {
	if filepath.Base(sock) == residentSocket {
		return "the resident dispatcher (agora dispatch resident)"
	}
	return "the orchestrator (agora orch serve)"
}

// notTaken ends a dispatch serve did not take (declined, no answer): the whole program runs
// it, told not to ask serve again, after declined (the line saying why serve declined, or ""). A Ctrl-C that came while serve was asked (it may take up
// to handoffAnswer) is this command's, as it is the whole program's, whose own hand-off
// ends interrupted then: the front's handler took that signal, so the program it execs
// would never see it and would run the dispatch.
func notTaken(in *interrupts, full, declined string) int {
	if in.stop() {
		fmt.Fprintf(os.Stderr, "agora: interrupted: agora dispatch run stopped before it finished (%v); what it had written is committed, see 'agora audit log'\n", context.Canceled)
		return exitInterrupted
	}
	// The line that says why serve declined (once, before the dispatch runs here).
	os.Stderr.WriteString(declined)
	execFull(full, envNoHandoff+"=1")
	return exitError
}

// homeDir is config.HomeDir; without AGORA_HOME, XDG_DATA_HOME or HOME the whole program
// says what is missing.
func homeDir() (string, bool) {
	if h := os.Getenv("AGORA_HOME"); h != "" {
		d, err := filepath.Abs(h)
		return d, err == nil
	}
	if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		d, err := filepath.Abs(filepath.Join(x, "agora"))
		return d, err == nil
	}
	if h := os.Getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "share", "agora"), true
	}
	return "", false
}

// handoffRequest is internal/cli's handoffRequest for the flags the front read. Exe is the
// whole program, which serve runs as and the front would exec.
func handoffRequest(full string, r *runFlags) (*api.HandoffRequest, []string, bool) {
	dir, ok := homeDir()
	if !ok {
		return nil, nil, false
	}
	var socks []string
	for _, name := range []string{orchSocket, residentSocket} {
		if sock := filepath.Join(dir, orchDir, name); trustedSocket(filepath.Join(dir, orchDir), sock) {
			socks = append(socks, sock)
		}
	}
	if len(socks) == 0 {
		return nil, nil, false
	}
	hr := api.HandoffRequest{
		Home: dir, Exe: full, Env: api.EnvDigest(os.Environ()), EnvAll: api.ResidentEnvDigest(os.Environ()),
		EnvSums:  api.EnvSums(os.Environ()),
		Subagent: r.subagent, Envs: r.envs, Target: r.target, Repo: r.repo, Workspace: r.workspace,
		Revision: r.rev, TimeoutNS: int64(r.timeout), Callback: r.callback,
		Learn: r.learn, Detach: r.detach, Progress: r.progress || isTerminal(os.Stderr), Output: r.output,
		StartBy: time.Now().Add(handoffAnswer - time.Second).UnixNano(),
	}
	if r.input != "" {
		hr.Input = json.RawMessage(r.input)
	}
	return &hr, socks, true
}

// tracing reports whether an OTEL_* variable is set: the whole program then runs the
// command, which exports its spans (the front links no tracing).
func tracing() bool {
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "OTEL_") {
			return true
		}
	}
	return false
}

// dispatchID reports whether id has the form of a dispatch id (a ULID): the front passes it
// to the whole program in its environment, so a malformed one is a malformed frame.
func dispatchID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// trustedSocket is internal/cli's: the directory and socket are this user's own, not
// symlinks, and no one else may use them.
func trustedSocket(dir, sock string) bool {
	uid := uint32(os.Getuid())
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{dir, os.ModeDir}, {sock, os.ModeSocket}} {
		fi, err := os.Lstat(c.path)
		if err != nil || fi.Mode().Type() != c.mode || fi.Mode().Perm()&0o077 != 0 {
			return false
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || st.Uid != uid {
			return false
		}
	}
	return true
}

// follow writes serve's frames to stdout and stderr until the end frame, turns a Ctrl-C into
// a cancel of the dispatch in serve, and returns the exit code.
func follow(ctx context.Context, full, sock string, body io.Reader) int {
	handles := make(chan string, 1)
	// done ends the canceller. follow's caller exits (or execs) as soon as follow returns, and
	// never ends ctx itself, so the canceller cannot read an ended hand-off as a Ctrl-C.
	done := make(chan struct{})
	defer close(done)
	go func() {
		var handle string
		select {
		case handle = <-handles:
		case <-done:
			return
		}
		select {
		case <-ctx.Done():
			cancelHandoff(sock, handle)
		case <-done:
		}
	}()
	br := bufio.NewReaderSize(body, 64<<10)
	id := ""
	for {
		line, err := readFrameLine(br)
		if err == nil {
			var fr *api.HandoffFrame
			if fr, err = api.DecodeHandoffFrame(line); err == nil {
				switch {
				case fr.Handle != "":
					select {
					case handles <- fr.Handle:
					default: // a second handle: the first one is the hand-off's
					}
				case fr.ID != "":
					if !dispatchID(fr.ID) {
						err = fmt.Errorf("hand-off frame: malformed dispatch id %q", fr.ID)
						break
					}
					id = fr.ID
				case fr.Out != "":
					io.WriteString(os.Stdout, fr.Out)
				case fr.Err != "":
					io.WriteString(os.Stderr, fr.Err)
				case fr.End != nil:
					return renderEnd(ctx, fr.End)
				}
				if err == nil {
					continue
				}
			}
		}
		return lost(ctx, full, sock, id, err)
	}
}

// readFrameLine reads one newline-ended frame of at most api.MaxHandoffFrame bytes.
func readFrameLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, err := br.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > api.MaxHandoffFrame {
			return nil, fmt.Errorf("a frame over %d bytes", api.MaxHandoffFrame)
		}
		if err == nil {
			return bytes.TrimSuffix(line, []byte("\n")), nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

// cancelHandoff asks serve to cancel the hand-off's dispatch (Ctrl-C).
func cancelHandoff(sock, handle string) {
	sc, err := dialServe(sock)
	if err != nil {
		return
	}
	defer sc.Close()
	sc.post(strings.Replace(api.HandoffCancelPath, "{handle}", handle, 1), nil)
}

// lost is the end when serve's stream broke before its end frame. Before serve said it
// accepted the dispatch, the front says so as the whole program does; after, the whole
// program reads the dispatch's end from agora.db (it may still be running in a standby).
func lost(ctx context.Context, full, sock, id string, cause error) int {
	who := "the orchestrator (agora orch serve)"
	if filepath.Base(sock) == residentSocket {
		who = "the resident dispatcher (agora dispatch resident)"
	}
	if id == "" {
		msg := fmt.Sprintf("%s stopped before it said it accepted the dispatch (%v); see 'agora dispatch list' whether it was", who, cause)
		if ctx.Err() != nil {
			fmt.Fprintf(os.Stderr, "agora: interrupted: agora dispatch run stopped before it finished (%s); what it had written is committed, see 'agora audit log'\n", msg)
			return exitInterrupted
		}
		return renderError(exitError, msg, "", false)
	}
	fmt.Fprintf(os.Stderr, "agora: %s that ran dispatch %s stopped (%v); reading its end here\n", who, id, cause)
	execFull(full, envNoHandoff+"=1", envHandoffLost+"="+id)
	return exitError
}

// renderEnd ends as the whole program's Run ends for the error serve's runDispatch ended with
// (internal/cli: endError, renderError, renderInterrupt).
func renderEnd(ctx context.Context, e *api.HandoffEnd) int {
	if e.Exit == 0 && e.Error == "" {
		return 0
	}
	if ctx.Err() != nil {
		if e.Interrupted {
			fmt.Fprintf(os.Stderr, "agora: interrupted: %s\n", e.Error)
		} else {
			fmt.Fprintf(os.Stderr, "agora: interrupted: agora dispatch run stopped before it finished (%s); what it had written is committed, see 'agora audit log'\n", e.Error)
		}
		return exitInterrupted
	}
	if e.Interrupted {
		// An interruptedError outside a Ctrl-C of this process: an agora error.
		return renderError(exitError, e.Error, "", false)
	}
	if e.Error == "" {
		return e.Exit
	}
	return renderError(e.Exit, e.Error, e.Hint, e.Usage)
}

// renderError is internal/cli's renderError for an error of code with msg and hint.
func renderError(code int, msg, hint string, usage bool) int {
	for i, line := range strings.Split(strings.TrimSpace(msg), "\n") {
		if i == 0 {
			fmt.Fprintf(os.Stderr, "agora: error: %s\n", line)
		} else {
			fmt.Fprintf(os.Stderr, "agora:   %s\n", line)
		}
	}
	if hint != "" {
		fmt.Fprintf(os.Stderr, "agora: hint: %s\n", hint)
	}
	if usage && code == exitUsage {
		fmt.Fprintf(os.Stderr, "agora: hint: run 'agora --help' for usage\n")
	}
	return code
}
