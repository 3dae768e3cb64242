// Package service is `agora orch serve`'s API: HTTP over a Unix socket (mode 0600, in the
// 0700 AGORA_HOME), answering the CLI and the MCP server, which never open orch.db. Every
// peer must run as the same user as serve (checked with SO_PEERCRED on each connection).
//
// It runs on the host side. It passes commands to the engine and reads its state; it decides
// nothing itself.
package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/callerctx"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/errclass"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/peercred"
)

// maxBody caps a request body: a plan of at most plan.MaxSourceSize, base64 in JSON.
const maxBody = plan.MaxSourceSize/3*4 + 1<<20

// Server answers the orchestrator API.
type Server struct {
	Engine *orch.Engine
	// PinRepo resolves a submitted repository and revision to an absolute path and a commit.
	PinRepo func(ctx context.Context, repo, rev string) (string, string, error)
	// PinWorkspace resolves a workspace (NAME or NAME@sha256:HEX) and revision ("" for its
	// default) to its pinned version (name@sha256:HEX) and a commit.
	PinWorkspace func(ctx context.Context, ref, rev string) (string, string, error)
	// ExportRun writes a checkpoint of orch.db if needed and exports the run's entries
	// (subject run/<id>) with their proofs.
	ExportRun func(ctx context.Context, runID string) (*verify.Bundle, error)
	// Trace places a submitted run in a trace, from the request's traceparent header (a
	// malformed one is ignored) or a new trace when tracing is on; nil: runs have no trace.
	Trace func(r *http.Request) orch.Trace
	Log   *slog.Logger
	// Schedules fires schedules' slots and keeps their table; nil: the service has no
	// schedules (their routes answer not found).
	Schedules *Scheduler
	// Handoff runs what `agora dispatch run` hands to serve; nil: the hand-off route answers
	// not found and the CLI supervises its dispatches itself.
	Handoff api.Handoff
	// LearnInRun returns the ids of a run's learn dispatches (dispatch.Records.LearnInRun),
	// so the run document marks a task whose dispatch was a learn one though its plan does
	// not say learn (a target in mode: learn); nil: only the plan's marks.
	LearnInRun func(ctx context.Context, runID string) (map[string]bool, error)
	// Spool is the directory a large run status is held in while it is written out (in a file
	// with no name: spool.go); "" is the temporary directory.
	Spool string
	// Parsing is told of each submitted plan (its source) while it is parsed, and calls the
	// func it returns when the parse is done (orch.Memory.Parsing: serve's memory limit
	// makes room for the parse); nil: nothing is told.
	Parsing func(src []byte) (done func())

	handoffs     handoffs
	handoffCount atomic.Int64
	prover       callerctx.Prover // hand-off proofs (handoff_caller.go)
	ownOnce      sync.Once
	own          callerctx.Security
	ownErr       error
	// stopping is Serve's context: done once serve stops (a signal), which must not end a
	// handed-off dispatch as if its CLI had cancelled it (handoff.go).
	stopping context.Context
}

// maxSocketPath is the longest path a Unix socket may be connected to by (sun_path, less its
// NUL).
const maxSocketPath = len(syscall.RawSockaddrUnix{}.Path) - 1

// CheckSocketPath says why no one could connect to a Unix socket at path, or nil.
func CheckSocketPath(path string) error {
	if len(path) > maxSocketPath {
		return fmt.Errorf("the socket path %s is %d bytes, over the %d a Unix socket's may be: use a shorter AGORA_HOME", path, len(path), maxSocketPath)
	}
	return nil
}

// Listener is a listener on the Unix socket Listen put at its path.
type Listener struct {
	net.Listener
	path string
	made os.FileInfo
}

// Own reports whether the socket at the listener's path is still the one Listen put there.
func (l *Listener) Own() bool {
	fi, err := os.Lstat(l.path)
	return err == nil && os.SameFile(fi, l.made)
}

// RemoveSocket removes the listener's socket file if it is still the one Listen put there:
// a newer server of the path keeps its own. Closing the listener does
// not remove it.
func (l *Listener) RemoveSocket() {
	if l.Own() {
		os.Remove(l.path)
	}
}

// Listen listens on the Unix socket path with mode 0600, replacing what a stale server left
// there (the caller holds path's lock, so nobody else serves on it). The socket is bound
// under a hidden name of its own beside path, given its mode, then renamed onto path: whoever
// finds a socket at path finds one the CLI trusts (trustedSocket wants 0600) and that
// accepts. Bound at path itself, it had the umask's mode until a chmod, and a CLI that came in
// that window ran its dispatch itself and started a second resident that could only exit (a
// resident's first hand-off would miss). Not under a narrowed umask either: the
// umask is the process's, and serve starts standby supervisors and supervises dispatches
// while it listens (a standby started as serve began listening made its claim's
// tree 0600, and its first dispatch failed 'Can't chdir to /agora/workspace'). Under its
// hidden name the socket is reached by no one: orch/ is 0700, and every connection's peer
// must be this user (SO_PEERCRED, Handler). The hidden name is new for each Listen
// (.bound-NAME.RANDOM), so two Listens of one path at once (outside the lock) never bind each
// other's; what a server killed inside Listen left, the next Listen of the path removes.
func Listen(path string) (*Listener, error) {
	if err := CheckSocketPath(path); err != nil {
		return nil, err
	}
	dir, base := filepath.Split(path)
	var b [8]byte
	rand.Read(b[:])
	name := ".bound-" + base + "." + hex.EncodeToString(b[:])
	hidden := filepath.Join(dir, name)
	// Bound through the directory's descriptor: the hidden name is longer than path's, and
	// only path need fit in a socket address.
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	defer d.Close()
	removeLeftSockets(dir, ".bound-"+base+".")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: "/proc/self/fd/" + strconv.Itoa(int(d.Fd())) + "/" + name, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false)
	// What is at path once renamed must be the socket this bound: a Listen of the same path
	// by another process at the same moment (outside its lock) could have put its own there,
	// and this listener would then Own a socket no connection reaches.
	bound, err := os.Lstat(hidden)
	if err == nil {
		err = os.Chmod(hidden, 0o600)
	}
	if err == nil {
		err = os.Rename(hidden, path)
	}
	var made os.FileInfo
	if err == nil {
		made, err = os.Lstat(path)
	}
	if err == nil && !os.SameFile(bound, made) {
		err = errors.New("another server put its socket there at the same moment")
	}
	if err != nil {
		ln.Close()
		os.Remove(hidden)
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return &Listener{Listener: ln, path: path, made: made}, nil
}

// removeLeftSockets removes the sockets in dir whose names start with prefix: what servers
// killed inside Listen left (the caller holds the lock of the path they were bound for).
// Anything else there is left alone.
func removeLeftSockets(dir, prefix string) {
	ents, err := os.ReadDir(filepath.Clean(dir))
	if err != nil {
		return
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) && e.Type() == os.ModeSocket {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// Serve answers on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.stopping = ctx
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, peerKey{}, peerOf(c))
		},
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

type peerKey struct{}

// peerInfo is a connection's peer: ok when it runs as this process's user.
type peerInfo struct {
	ok  bool
	pid int32
	uid uint32
}

// peerOf reads the connection's peer credentials.
func peerOf(c net.Conn) peerInfo {
	cred, err := peercred.Of(c)
	if err != nil {
		return peerInfo{}
	}
	return peerInfo{ok: int(cred.Uid) == os.Getuid(), pid: cred.Pid, uid: cred.Uid}
}

// Handler routes the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(handoffRoute, s.handoff)
	mux.HandleFunc("POST "+api.HandoffProofPath, s.handoffProof)
	mux.HandleFunc("POST "+api.HandoffCancelPath, s.handoffCancel)
	if s.Engine != nil {
		s.engineRoutes(mux)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, _ := r.Context().Value(peerKey{}).(peerInfo); !p.ok {
			if s.Log != nil {
				s.Log.Warn("refused", "method", r.Method, "status", http.StatusForbidden, "why", "peer is not this user")
			}
			writeErr(w, http.StatusForbidden, "forbidden", "peer is not this user")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		logRefusals(s.Log, mux).ServeHTTP(w, r)
	})
}

// engineRoutes are the orchestrator's own routes: a server with no engine (the resident
// dispatcher, `agora dispatch resident`) answers only hand-offs, and not found to the rest.
func (s *Server) engineRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		st, err := s.Engine.Stats(r.Context())
		if err != nil {
			writeEngineErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, api.Health{PID: os.Getpid(), OpenRuns: st.Runs, LiveAttempts: st.LiveAttempts,
			LocksHeld: st.LocksHeld, LockWaiters: st.LockWaiters, SlotWaiters: st.SlotWaiters, Backoffs: st.Backoffs})
	})
	mux.HandleFunc("GET /v1/queues", s.queues)
	s.scheduleRoutes(mux)
	mux.HandleFunc("POST /v1/runs", s.submit)
	mux.HandleFunc("GET /v1/runs", s.runs)
	mux.HandleFunc("GET /v1/runs/{ref}", s.status)
	mux.HandleFunc("GET /v1/runs/{ref}/watch", s.watch)
	mux.HandleFunc("GET /v1/runs/{ref}/audit", s.audit)
	mux.HandleFunc("POST /v1/runs/{ref}/{action}", s.action)
}

func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	var req api.SubmitRequest
	if !decode(w, r, &req) {
		return
	}
	p, co, err := s.prepare(r.Context(), req)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	if err := learnRefusal(req.Actor, p); err != nil {
		writeErr(w, http.StatusForbidden, "forbidden", err.Error())
		return
	}
	if s.Trace != nil {
		co.Trace = s.Trace(r)
	}
	sub, err := s.Engine.SubmitRun(r.Context(), p, co, req.Actor)
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	// The answer leaves the tasks out: a new run's is read without them (its tasks are all
	// pending or just fired, and reading them costs the run's size). A run returned again
	// may have a task waiting for an answer, which its status names (Next): its tasks are
	// read, none kept.
	var run api.Run
	if sub.Created {
		run, err = s.Engine.Summary(r.Context(), sub.RunID)
	} else {
		run, err = s.Engine.StatusEach(r.Context(), sub.RunID, nil)
	}
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	run.Tasks = nil
	writeJSON(w, http.StatusOK, api.SubmitResponse{Run: run, Created: sub.Created, Why: sub.Why, Message: api.SubmitMessage(run, sub.Created, sub.Why)})
}

// parse validates a submitted plan, with Parsing told of it meanwhile.
func (s *Server) parse(ctx context.Context, req api.SubmitRequest, refs plan.Refs) (*plan.Plan, error) {
	if s.Parsing != nil {
		defer s.Parsing(req.Source)()
	}
	return plan.Validate(ctx, req.File, req.Source, refs)
}

// prepare validates a submitted plan and pins what its run works on. Structure and catalog
// are checked together (the plan's workspace and revision among them): a refused plan gets
// every problem in one answer.
func (s *Server) prepare(ctx context.Context, req api.SubmitRequest) (*plan.Plan, orch.Checkout, error) {
	refs := &submitRefs{s: s, req: &req}
	var checked plan.Refs
	if refs.Refs = s.Engine.Refs(); refs.Refs != nil {
		checked = refs
	}
	p, err := s.parse(ctx, req, checked)
	if err != nil {
		return nil, orch.Checkout{}, err
	}
	co, err := s.checkout(ctx, p, req, refs.pinned)
	if err != nil {
		return nil, orch.Checkout{}, err
	}
	if _, ok := refs.Refs.(plan.SubagentPinner); ok {
		// The versions the plan was checked with (refs pins each bare name once): a
		// subagent registered meanwhile is neither checked nor run by this run.
		if co.Subagents, err = pinSubagents(ctx, refs, p); err != nil {
			return nil, orch.Checkout{}, err
		}
	}
	co.NewRun = req.NewRun
	return p, co, nil
}

// pinSubagents pins each subagent name p writes without a version to the version refs
// names for it (a submission's: the version the plan was checked with): the run dispatches
// those versions, and they are part of its identity, so the same
// plan submitted after a subagent changed is a new run. nil when refs cannot pin (no
// catalog) or p names no bare subagent.
func pinSubagents(ctx context.Context, refs plan.Refs, p *plan.Plan) (map[string]string, error) {
	pinner, ok := refs.(plan.SubagentPinner)
	if !ok {
		return nil, nil
	}
	var pins map[string]string
	for _, ref := range p.SubagentRefs() {
		v, err := pinner.PinSubagent(ctx, ref)
		if err != nil {
			return nil, err
		}
		if pins == nil {
			pins = map[string]string{}
		}
		pins[ref] = v
	}
	return pins, nil
}

// submitRefs are the catalog lookups a submission is validated with. The plan's own
// workspace is pinned here, with the other references, when the submitter names neither a
// workspace nor a repository (a submitter's choice is checked against the plan's by
// checkout); the commit pinned is kept, so checkout does not resolve it again.
type submitRefs struct {
	plan.Refs
	s      *Server
	req    *api.SubmitRequest
	pinned *orch.Checkout
	// subagents pins each bare subagent name the first time the plan's check looks it up:
	// every later check of that name, and the run's pins, are of that version.
	subagents map[string]string
}

// pin is the version subagent ref names for this submission: ref itself when it names one
// (or the catalog cannot pin), else the version its bare name had when first looked up.
func (c *submitRefs) pin(ctx context.Context, ref string) (string, error) {
	pinner, ok := c.Refs.(plan.SubagentPinner)
	if !ok || ref == "" || strings.Contains(ref, "@") {
		return ref, nil
	}
	if v, ok := c.subagents[ref]; ok {
		return v, nil
	}
	v, err := pinner.PinSubagent(ctx, ref)
	if err != nil {
		return "", err
	}
	if c.subagents == nil {
		c.subagents = map[string]string{}
	}
	c.subagents[ref] = v
	return v, nil
}

// current refuses a version the plan pins (ref as written, NAME@sha256:HEX) that is not its
// name's current one, when the catalog can tell ([plan.CurrentChecker]): a plan starts new
// work, so it names the catalog as people registered it now.
func (c *submitRefs) current(ctx context.Context, kind catalog.Kind, ref string) error {
	cc, ok := c.Refs.(plan.CurrentChecker)
	if !ok || !strings.Contains(ref, "@") {
		return nil
	}
	return cc.Current(ctx, kind, ref)
}

func (c *submitRefs) Subagent(ctx context.Context, ref string) error {
	if err := c.current(ctx, catalog.KindSubagent, ref); err != nil {
		return err
	}
	v, err := c.pin(ctx, ref)
	if err != nil {
		return err
	}
	return asWritten(c.Refs.Subagent(ctx, v), ref, v)
}

func (c *submitRefs) Reviewer(ctx context.Context, ref, target string) error {
	if err := c.current(ctx, catalog.KindSubagent, ref); err != nil {
		return err
	}
	v, err := c.pin(ctx, ref)
	if err != nil {
		return err
	}
	return asWritten(c.Refs.Reviewer(ctx, v, target), ref, v)
}

// asWritten is a check's refusal of pinned version v naming the subagent as the plan wrote
// it (ref), as the check of ref itself would.
func asWritten(err error, ref, v string) error {
	if err == nil || ref == v {
		return err
	}
	return &writtenError{msg: strings.ReplaceAll(err.Error(), strconv.Quote(v), strconv.Quote(ref)), err: err}
}

type writtenError struct {
	msg string
	err error
}

func (e *writtenError) Error() string { return e.msg }
func (e *writtenError) Unwrap() error { return e.err }

func (c *submitRefs) Env(ctx context.Context, ref string) error {
	if err := c.current(ctx, catalog.KindEnv, ref); err != nil {
		return err
	}
	return c.Refs.Env(ctx, ref)
}

// PinSubagent implements [plan.SubagentPinner] with the versions the check pinned.
func (c *submitRefs) PinSubagent(ctx context.Context, ref string) (string, error) {
	return c.pin(ctx, ref)
}

func (c *submitRefs) Workspace(ctx context.Context, ref, revision string) error {
	if c.req.Workspace != "" || c.req.Repo != "" {
		return nil
	}
	if c.s.PinWorkspace == nil {
		return errors.New("this orchestrator takes no workspaces")
	}
	ws, commit, err := c.s.PinWorkspace(ctx, ref, revision)
	if err != nil {
		return err
	}
	c.pinned = &orch.Checkout{Workspace: ws, Revision: commit}
	return nil
}

// checkout pins what a submitted run works on: the plan's workspace or the submitter's
// (which must agree), or the submitter's repository; never both a workspace and a repository.
// pinned, when not nil, is the plan's workspace pinned while the plan was validated.
func (s *Server) checkout(ctx context.Context, p *plan.Plan, req api.SubmitRequest, pinned *orch.Checkout) (orch.Checkout, error) {
	if pinned != nil && req.Workspace == "" && req.Repo == "" {
		return *pinned, nil
	}
	ws, rev := p.Workspace, p.Revision
	switch {
	case req.Workspace != "" && req.Repo != "":
		return orch.Checkout{}, errors.New("a run works on a workspace or a repository, not both")
	case req.Workspace != "":
		if ws != "" && ws != req.Workspace {
			return orch.Checkout{}, fmt.Errorf("the plan names workspace %q and the submission %q: they must agree", ws, req.Workspace)
		}
		if rev != "" && req.Revision != "" && rev != req.Revision {
			return orch.Checkout{}, fmt.Errorf("the plan names revision %q and the submission %q: they must agree", rev, req.Revision)
		}
		ws = req.Workspace
		if req.Revision != "" {
			rev = req.Revision
		}
	case ws != "" && req.Repo != "":
		return orch.Checkout{}, fmt.Errorf("the plan works on workspace %q; a repository cannot replace it", ws)
	}
	if ws != "" {
		if s.PinWorkspace == nil {
			return orch.Checkout{}, errors.New("this orchestrator takes no workspaces")
		}
		ref, commit, err := s.PinWorkspace(ctx, ws, rev)
		if err != nil {
			return orch.Checkout{}, err
		}
		return orch.Checkout{Workspace: ref, Revision: commit}, nil
	}
	if req.Repo == "" {
		return orch.Checkout{}, nil
	}
	if s.PinRepo == nil {
		return orch.Checkout{}, errors.New("this orchestrator takes no repositories")
	}
	repo, commit, err := s.PinRepo(ctx, req.Repo, req.Revision)
	if err != nil {
		return orch.Checkout{}, err
	}
	return orch.Checkout{Repo: repo, Revision: commit}, nil
}

func (s *Server) runs(w http.ResponseWriter, r *http.Request) {
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	runs, err := s.Engine.Runs(r.Context(), limit)
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	if runs == nil {
		runs = []api.Run{}
	}
	writeJSON(w, http.StatusOK, runs)
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	s.writeStatus(w, r, r.PathValue("ref"))
}

// watch streams newline-delimited JSON: {"run": ...} first, then {"event": ...} per change,
// and a fresh {"run": ...} after each run-level change, until the run ends (succeeded,
// failed or cancelled).
func (s *Server) watch(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("ref")
	first, err := s.Engine.Summary(r.Context(), ref) // its id and NameRuns are what is kept
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	events, stop := s.Engine.Subscribe(first.ID)
	defer stop()
	// Read again after subscribing, so no change between the two is missed.
	answered := false
	run, err := s.sendStatus(r.Context(), w, first.ID, false, first.NameRuns, func() {
		answered = true
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusOK)
	})
	if err != nil {
		if !answered {
			writeEngineErr(w, err)
		}
		return
	}
	if lifecycle.RunEnded(run.State) {
		return
	}
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	send := func(v any) bool {
		if enc.Encode(v) != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-keepalive.C:
			if !send(map[string]any{"keepalive": true}) {
				return
			}
		case ev, ok := <-events:
			if !ok {
				// Fell behind: send the current state and stop; the client re-watches.
				s.sendStatus(r.Context(), w, first.ID, true, first.NameRuns, nil)
				return
			}
			if !send(map[string]any{"event": ev}) {
				return
			}
			if ev.Task == "" {
				run, err := s.sendStatus(r.Context(), w, first.ID, false, first.NameRuns, nil)
				if err != nil || lifecycle.RunEnded(run.State) {
					return
				}
			}
		}
	}
}

// audit exports a sealed run's part of orch.db: a run that could still change has no bundle.
func (s *Server) audit(w http.ResponseWriter, r *http.Request) {
	run, err := s.Engine.Summary(r.Context(), r.PathValue("ref"))
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	if !run.Sealed {
		writeErr(w, http.StatusConflict, "conflict", fmt.Sprintf("run %s is %s and not sealed; a run is exported once it is sealed ('agora orch seal %s' after it ends)", run.ID, run.State, run.ID))
		return
	}
	if s.ExportRun == nil {
		writeErr(w, http.StatusNotFound, "not_found", "this orchestrator does not export audit bundles")
		return
	}
	b, err := s.ExportRun(r.Context(), run.ID)
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, b)
}

func (s *Server) action(w http.ResponseWriter, r *http.Request) {
	var req api.ActionRequest
	if !decode(w, r, &req) {
		return
	}
	req.Run = r.PathValue("ref")
	var err error
	switch r.PathValue("action") {
	case "cancel":
		err = s.Engine.Cancel(r.Context(), req)
	case "answer":
		err = s.Engine.Answer(r.Context(), req)
	case "retry":
		err = s.Engine.Retry(r.Context(), req)
	case "seal":
		err = s.Engine.Seal(r.Context(), req)
	default:
		writeErr(w, http.StatusNotFound, "not_found", "no such action; want cancel, answer, retry or seal")
		return
	}
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	// The action is done: its answer is the run's status, and a status that cannot be spooled
	// (the spool's directory gone, its disk full) is built in memory instead, never answered
	// as an error the caller would take for the action's.
	_, sp, err := s.spoolStatus(r.Context(), req.Run, "", "\n", nil)
	if err == nil {
		defer sp.Close()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		sp.WriteTo(w)
		return
	}
	if s.Log != nil {
		s.Log.Warn("an action's answer read without the spool", "run", req.Run, "action", r.PathValue("action"), "err", err)
	}
	run, err := s.Engine.Status(r.Context(), req.Run)
	if err != nil {
		writeEngineErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, run)
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeErr(w, http.StatusRequestEntityTooLarge, "invalid", fmt.Sprintf("request body over %d bytes", tooBig.Limit))
			return false
		}
		writeErr(w, http.StatusBadRequest, "invalid", "bad request body: "+err.Error())
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		writeErr(w, http.StatusBadRequest, "invalid", "bad request body: more than one JSON value")
		return false
	}
	return true
}

func writeEngineErr(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, orch.ErrNotFound):
		e := api.Error{Error: err.Error(), Code: "not_found"}
		var nf *errclass.NotFoundError
		if errors.As(err, &nf) {
			e.Note = nf.Note
		}
		writeJSON(w, http.StatusNotFound, e)
	case errors.Is(err, orch.ErrConflict):
		writeErr(w, http.StatusConflict, "conflict", err.Error())
	case errors.Is(err, orch.ErrStopped), errors.Is(err, context.Canceled):
		writeErr(w, http.StatusServiceUnavailable, "unavailable", err.Error())
	default:
		writeErr(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, api.Error{Error: msg, Code: code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
