package dispatchcmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agora-dev/agora/internal/agenttext"
	"github.com/agora-dev/agora/internal/callerctx"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/dispatch/detach"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/peercred"
)

// envNoHandoff, set to anything, makes `agora dispatch run` supervise its dispatch itself
// even when an `agora orch serve` of its home runs (as --in-process does).
const envNoHandoff = "AGORA_NO_HANDOFF"

// envHandoffLost is set by the front (cmd/agora) when serve's stream broke after serve
// accepted the dispatch it names: this command then reads that dispatch's end
// (followLost) instead of starting one. It only reads a record of this home.
const envHandoffLost = "AGORA_HANDOFF_LOST"

// handoffDial bounds connecting to serve's socket: a live serve accepts at once.
const handoffDial = time.Second

// handoffAnswer bounds serve's answer to a hand-off, which it gives before it accepts the
// dispatch (a stat, a file digest, /proc reads).
const handoffAnswer = 5 * time.Second

// errNoHandoff means the dispatch was not handed off: the CLI supervises it itself, and
// nothing was written or recorded.
var errNoHandoff = errors.New("no hand-off")

// handoff gives the dispatch to a running `agora orch serve` of this home and writes
// what serve streams back, or returns errNoHandoff when it cannot (no serve, an older one, a
// serve of another home or binary, a socket it does not trust, a request serve declines): the
// CLI then runs today's in-process path with no visible difference. Once serve took the
// dispatch, every outcome is this command's: its output, its exit code, its Ctrl-C.
func handoff(ctx context.Context, opts *dispatchRunOptions) error {
	hr, socks, ok := handoffRequest(opts)
	if !ok {
		return errNoHandoff
	}
	caught := watchInterrupt()
	defer caught.stop()
	// serve's socket first, then the resident dispatcher's: the first that takes the
	// connection answers, and its answer is the only one asked for.
	var resp *http.Response
	var hc *http.Client
	var who string
	for _, sock := range socks {
		who = handoffTaker(sock)
		var peer *atomic.Int32
		hc, peer = handoffClient(sock)
		proved, listens, answered := handoffProve(hc, peer)
		if !listens {
			continue // nobody listens there
		}
		if !answered {
			return errNoHandoff // stopped or stuck: given up on, as for the hand-off's own answer
		}
		body, err := json.Marshal(proved(*hr))
		if err != nil {
			return errNoHandoff
		}
		// The stream outlives a Ctrl-C: the cancel goes by its own request, and the stream
		// then carries the dispatch's end, as the in-process path prints it.
		req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, "http://agora"+api.HandoffPath, bytes.NewReader(body))
		if err != nil {
			return errNoHandoff
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err = hc.Do(req)
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			continue // nobody listens there
		}
		if err != nil {
			return errNoHandoff
		}
		break
	}
	if resp == nil {
		return errNoHandoff
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// 404 (an older serve), 409 (declined), 400, 403: serve did not take it. A decline
		// says why, once, before the dispatch runs here: a script's dispatches that a
		// resident declines would otherwise pay the cold path without a word.
		if why, ok := declinedWhy(resp); ok && !caught.interrupted(ctx) {
			fmt.Fprintf(opts.f.IO.ErrOut, "agora: %s declined this dispatch (%s); it runs in this process\n", who, agenttext.EscapeLine(why))
		}
		return errNoHandoff
	}
	return followHandoff(ctx, opts, hc, who, resp.Body)
}

// interruptWatch sees a Ctrl-C (or SIGTERM) that came while a taker was asked. ctx alone
// cannot tell: the runtime may have taken the signal while signal.NotifyContext's goroutine
// has not yet cancelled ctx, and a decline line printed then would precede "interrupted".
type interruptWatch chan os.Signal

func watchInterrupt() interruptWatch {
	c := make(interruptWatch, 1)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM)
	return c
}

func (c interruptWatch) stop() { signal.Stop(c) }

// interrupted stops the watch (signal.Stop waits for a delivery under way) and reports
// whether a signal came or ctx ended. A signal came means ctx is being cancelled by
// Main's NotifyContext: it waits for that, briefly, so what follows sees ctx ended.
func (c interruptWatch) interrupted(ctx context.Context) bool {
	c.stop()
	if len(c) == 0 {
		return ctx.Err() != nil
	}
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return true
}

// handoffProve asks the taker at hc for its challenge (callerctx) and answers it: proved
// adds the answer to a request, or leaves it without one when this process could not read
// the challenge (the taker then declines, saying why) or the taker sets none (an older
// one). listens is false when nobody listens at the socket; answered is false when the
// taker did not answer within handoffAnswer (stopped, stuck).
func handoffProve(hc *http.Client, peer *atomic.Int32) (proved func(api.HandoffRequest) api.HandoffRequest, listens, answered bool) {
	as := func(r api.HandoffRequest) api.HandoffRequest { return r }
	resp, err := hc.Post("http://agora"+api.HandoffProofPath, "application/json", nil)
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return as, false, false
	}
	if err != nil {
		return as, true, false
	}
	defer resp.Body.Close()
	var ch api.HandoffChallenge
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 4<<10)).Decode(&ch) != nil {
		return as, true, true
	}
	secret, err := callerctx.Answer(peer.Load(), ch.FD)
	if err != nil {
		return as, true, true
	}
	return func(r api.HandoffRequest) api.HandoffRequest {
		r.ProofFD, r.Proof = ch.FD, secret
		return r
	}, true, true
}

// declinedWhy reads a taker's refusal: its reason when it is a decline (api.HandoffDeclined).
func declinedWhy(resp *http.Response) (string, bool) {
	if resp.StatusCode != http.StatusConflict {
		return "", false
	}
	var e api.Error
	if json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e) != nil || e.Code != api.HandoffDeclined {
		return "", false
	}
	return e.Error, true
}

// handoffTaker names, for the user, what listens on sock: serve or the resident dispatcher.
func handoffTaker(sock string) string {
	if filepath.Base(sock) == residentSocket {
		return "the resident dispatcher (agora dispatch resident)"
	}
	return "the orchestrator (agora orch serve)"
}

// handoffRequest builds the request and lists the sockets to try it on (serve's, then the
// resident dispatcher's; those this user does not own are left out), or says the dispatch
// stays in this process.
func handoffRequest(opts *dispatchRunOptions) (*api.HandoffRequest, []string, bool) {
	f := opts.f
	if !handsOff(opts) || f.Getenv(envNoHandoff) != "" {
		return nil, nil, false
	}
	dir, err := absHome(f)
	if err != nil {
		return nil, nil, false
	}
	var socks []string
	for _, name := range []string{home.OrchSocket, residentSocket} {
		if sock := filepath.Join(dir, home.OrchDir, name); trustedSocket(filepath.Join(dir, home.OrchDir), sock) {
			socks = append(socks, sock)
		}
	}
	if len(socks) == 0 {
		return nil, nil, false
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, false
	}
	r := opts.req
	hr := api.HandoffRequest{
		Home: dir, Exe: exe, Env: api.EnvDigest(os.Environ()), EnvAll: api.ResidentEnvDigest(os.Environ()),
		EnvSums:  api.EnvSums(os.Environ()),
		Subagent: r.Subagent, Envs: r.Envs, Target: r.Target, Input: r.Input, Repo: r.Repo, Workspace: r.Workspace,
		Revision: r.Revision, TimeoutNS: int64(r.Timeout), Callback: r.CallbackURL, Budget: r.Budget, Verify: r.Verify,
		Learn: r.Learn, Detach: opts.detach, Progress: opts.progress || f.IO.ErrTTY,
		// A second before this CLI gives up: a serve that answers later never starts it.
		StartBy: time.Now().Add(handoffAnswer - time.Second).UnixNano(),
	}
	if opts.output == cmdutil.FormatJSON {
		hr.Output = cmdutil.FormatJSON
	}
	if r.Grants != nil {
		if hr.Grants, err = json.Marshal(r.Grants); err != nil {
			return nil, nil, false
		}
	}
	return &hr, socks, true
}

// handsOff reports whether this dispatch may be run by another process of the home (serve,
// the resident dispatcher) at all. --actor is recorded as given, and a trace joined, only by
// this process: they stay here. So does a relative --repo: serve resolves paths from its own
// directory.
func handsOff(opts *dispatchRunOptions) bool {
	f := opts.f
	return !opts.inProcess && !opts.notUTF8 && f.ActorFlag == "" && f.Getenv("TRACEPARENT") == "" &&
		(opts.req.Repo == "" || filepath.IsAbs(opts.req.Repo))
}

// absHome is AGORA_HOME made absolute.
func absHome(f *cmdutil.Factory) (string, error) {
	dir, err := f.HomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Abs(dir)
}

// trustedSocket reports whether sock (in dir) is serve's: the directory and the socket are
// this user's own, not symlinks, and no one else may use them. Anything else is not serve's
// to trust with a dispatch; the CLI runs it itself.
func trustedSocket(dir, sock string) bool {
	return ownPrivate(dir, os.ModeDir) && ownPrivate(sock, os.ModeSocket)
}

// ownPrivate reports whether path is of type typ (not a symlink), this user's, and closed to
// everyone else.
func ownPrivate(path string, typ os.FileMode) bool {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().Type() != typ || fi.Mode().Perm()&0o077 != 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == uint32(os.Getuid())
}

// handoffClient talks to serve's socket, and only to a listener of this user (its peer
// credentials, read at connect); peer is the listener's pid as this process sees it, from
// the last connection.
func handoffClient(sock string) (*http.Client, *atomic.Int32) {
	peer := new(atomic.Int32)
	return &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		// serve answers before it accepts anything; one that does not answer (stopped, stuck)
		// is given up on and the CLI runs the dispatch itself.
		ResponseHeaderTimeout: handoffAnswer,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			d := net.Dialer{Timeout: handoffDial}
			c, err := d.DialContext(ctx, "unix", sock)
			if err != nil {
				return nil, err
			}
			cred, err := peercred.Of(c)
			if err != nil || int(cred.Uid) != os.Getuid() {
				c.Close()
				return nil, errors.New("serve's socket is held by another user")
			}
			peer.Store(cred.Pid)
			return c, nil
		},
	}}, peer
}

// followHandoff writes serve's frames to this command's streams until the end frame, and
// turns a Ctrl-C into a cancel of the dispatch in serve.
func followHandoff(ctx context.Context, opts *dispatchRunOptions, hc *http.Client, who string, body io.Reader) error {
	f := opts.f
	handles := make(chan string, 1)
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
			cancelHandoff(hc, handle)
		case <-done:
		}
	}()
	br := bufio.NewReaderSize(body, 64<<10)
	id := ""
	for {
		line, err := readFrameLine(br)
		if err != nil {
			return handoffLost(ctx, opts, who, id, err)
		}
		fr, err := api.DecodeHandoffFrame(line)
		if err != nil {
			return handoffLost(ctx, opts, who, id, err)
		}
		switch {
		case fr.Handle != "":
			handles <- fr.Handle
		case fr.ID != "":
			id = fr.ID
		case fr.Out != "":
			io.WriteString(f.IO.Out, fr.Out)
		case fr.Err != "":
			io.WriteString(f.IO.ErrOut, fr.Err)
		case fr.End != nil:
			return endError(fr.End)
		}
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
func cancelHandoff(hc *http.Client, handle string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	path := strings.Replace(api.HandoffCancelPath, "{handle}", handle, 1)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://agora"+path, nil)
	if err != nil {
		return
	}
	if resp, err := hc.Do(req); err == nil {
		resp.Body.Close()
	}
}

// endError is the error the command ends with, as serve's runDispatch ended: the same message,
// hint and exit code renderError and renderInterrupt give the in-process path's.
func endError(e *api.HandoffEnd) error {
	switch {
	case e.Exit == cmdutil.ExitOK && e.Error == "":
		return nil
	case e.Interrupted:
		return &cmdutil.InterruptedError{What: e.Error}
	case e.Error == "":
		return &cmdutil.ExitCodeError{Code: e.Exit}
	}
	var err error = &remoteError{msg: e.Error, hint: e.Hint}
	if e.Usage {
		err = &cmdutil.UsageError{Err: err}
	}
	return &cmdutil.ExitCodeError{Code: e.Exit, Err: err}
}

// remoteError is an error serve's runDispatch ended with: its message and hint.
type remoteError struct{ msg, hint string }

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Hint() string  { return e.hint }

// handoffLost is the end when serve's stream broke before its end: serve stopped (or was
// killed) while it ran the dispatch. The worker stopped with it (bubblewrap dies with its
// parent); the dispatch is reaped as any other whose supervisor died, and this command ends
// as the in-process path would for it.
func handoffLost(ctx context.Context, opts *dispatchRunOptions, who, id string, cause error) error {
	if id == "" {
		return fmt.Errorf("%s stopped before it said it accepted the dispatch (%v); see 'agora dispatch list' whether it was", who, cause)
	}
	fmt.Fprintf(opts.f.IO.ErrOut, "agora: %s that ran dispatch %s stopped (%v); reading its end here\n", who, id, cause)
	return followLost(ctx, opts, id)
}

// followLost reads the end of dispatch id, whose hand-off's stream broke after serve
// accepted it: here, or in the whole program the front (cmd/agora) execs for it with
// AGORA_HANDOFF_LOST=id, once it said so.
func followLost(ctx context.Context, opts *dispatchRunOptions, id string) error {
	f := opts.f
	d, err := f.Dispatcher(ctx)
	if err != nil {
		return err
	}
	var rec *dispatch.Record
	// A killed serve is gone once its parent reaps it: give the reaper a moment to see it.
	for i := 0; i < 40; i++ {
		if _, err := d.Reap(ctx); err != nil {
			return err
		}
		if rec, err = d.Records.Get(ctx, id); err != nil {
			return err
		}
		if lifecycle.DispatchEnded(rec.State) || (opts.detach && rec.State != lifecycle.DispatchAccepted) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if opts.detach && !lifecycle.DispatchEnded(rec.State) {
		return fmt.Errorf("dispatch %s is %s and its orchestrator stopped; see 'agora dispatch describe %s'", id, rec.State, id)
	}
	if !lifecycle.DispatchEnded(rec.State) {
		// Its supervisor outlived serve (a warm slot's standby, as a plan's dispatches do):
		// follow it here to its end.
		if rec, err = detach.For(d).Watch(ctx, rec); err != nil {
			if ctx.Err() != nil {
				return cmdutil.Interrupted("dispatch %s keeps going in its detached supervisor; see 'agora dispatch describe %s', stop it with 'agora dispatch cancel %s'", id, id, id)
			}
			return err
		}
	}
	printEvent(f, rec.State, rec)
	afterSupervisor(ctx, d, rec)
	deliverCallbacks(ctx, f, rec)
	return finishDispatchOutput(f, rec, opts.output)
}
