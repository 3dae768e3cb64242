package dispatchcmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/callerctx"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch/detach"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/obs"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/service"
)

// The resident dispatcher is `agora dispatch run`'s own resident path: a home with no
// `agora orch serve` gets one when its first `agora dispatch run` starts it in the background,
// and the later ones hand their dispatches to it over AGORA_HOME/orch/resident.sock exactly
// as they would to serve (handoff.go), so a no-op pays for no Go start, no agora.db
// open and no key load, and a warm target's dispatch claims a staged slot. It is a stand-in
// for the CLI, not a service: it takes no plan, serves no listener but its socket, keeps no
// pod, runs only dispatches whose environment agrees with the one it was started in on what
// a dispatch reads (api.DispatchEnv), and leaves on its own.
const (
	residentSocket = "resident.sock"
	residentLock   = "resident.lock"
	residentLog    = "resident.log"
	// residentLogCap bounds resident.log: it is cut to nothing when a resident starts over it.
	residentLogCap = 1 << 20
	// residentLook is how often a resident looks whether it should leave.
	residentLook = time.Second
)

type dispatchResidentOptions struct {
	f    *cmdutil.Factory
	idle time.Duration // --idle; 0: agora.yaml's resident.idle
	stop bool
}

func newDispatchResidentCmd(f *cmdutil.Factory, runF func(*dispatchResidentOptions) error) *cobra.Command {
	opts := &dispatchResidentOptions{f: f}
	cmd := &cobra.Command{
		Use:   "resident",
		Short: "Keep this home's dispatcher running so 'agora dispatch run' starts at once",
		Long: `Keep a dispatcher of this home resident (agora.db open, keys loaded, warm slots staged) and
run the dispatches 'agora dispatch run' hands to it, as 'agora orch serve' would.

You rarely start it yourself: when no 'agora orch serve' of the home runs, an 'agora dispatch
run' starts one in the background (its log: AGORA_HOME/orch/resident.log), and the next ones
hand their dispatches to it over AGORA_HOME/orch/resident.sock (mode 0600, this user only).
A handed dispatch is recorded, audited, isolated and printed exactly as one the CLI runs
itself; its actor is the connecting user.

It runs a dispatch only for an 'agora dispatch run' of the same home, the same agora binary,
the same process context and the same values of what a dispatch reads from the environment
(PATH, TMPDIR, DOCKER_*, KUBERNETES_*, the proxies, SSL_CERT_*, OTEL_*, GODEBUG, LD_*, TZ,
the AWS_* bucket credentials and AGORA_*: see docs/adr/0010); a script's, a cron job's or an
editor's other variables do not matter. With a kubernetes target that has a kubeconfig, whose credential plugins may read
any variable, it takes only the environment it was started in, all of it. A CLI it declines
says why on stderr, naming the variables, and runs its dispatch itself. It never takes one
with --in-process, --actor, a relative --repo or a trace. It keeps the warm slots of
bubblewrap and docker targets, never Kubernetes pods.

It leaves by itself, after the dispatches in flight end:
  - after resident.idle in agora.yaml (default 10m) with no dispatch;
  - when agora.yaml or the agora binary changes, or its socket is removed;
  - when an 'agora orch serve' of the home starts (serve takes the hand-offs).
'resident: {idle: 0}' in agora.yaml turns it off: no 'agora dispatch run' starts one.
A home with leader: (replicas, a Kubernetes Lease) never runs one: serve is its dispatcher.

--stop asks a running resident to leave (it finishes what it runs), and waits for it.`,
		Example: `  agora dispatch resident --stop        # stop this home's resident dispatcher
  agora dispatch resident --idle 1h     # start one in the foreground that waits an hour`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.idle < 0 {
				return cmdutil.UsageErrorf(cmd, "--idle %s: want a positive duration", opts.idle)
			}
			return cmdutil.RunCmd(cmd, opts, runF, dispatchResidentRun)
		},
	}
	cmd.Flags().DurationVar(&opts.idle, "idle", 0, "leave after this long with no dispatch (default: resident.idle in agora.yaml, 10m)")
	cmd.Flags().BoolVar(&opts.stop, "stop", false, "stop this home's resident dispatcher and wait until it left")
	return cmd
}

func dispatchResidentRun(ctx context.Context, opts *dispatchResidentOptions) error {
	f := opts.f
	if opts.stop {
		return stopResident(ctx, f)
	}
	h, err := f.Home(ctx)
	if err != nil {
		return err
	}
	idle, err := residentIdle(opts.idle, h.Config)
	if err != nil {
		return err
	}
	dir, err := f.OrchDir()
	if err != nil {
		return err
	}
	release, holder, err := service.LockPath(filepath.Join(dir, residentLock))
	if errors.Is(err, service.ErrHeld) {
		fmt.Fprintf(f.IO.ErrOut, "agora: a resident dispatcher of this home already runs (pid %s)\n", holder)
		return nil
	}
	if err != nil {
		return err
	}
	defer release()
	log, err := obs.NewLogger(f.IO.ErrOut, obs.LogText, slog.LevelInfo)
	if err != nil {
		return err
	}
	runner, closeRunner, err := residentRunner(ctx, f, h, log)
	if err != nil {
		return err
	}
	defer closeRunner()
	sock := filepath.Join(dir, residentSocket)
	ln, err := service.Listen(sock)
	if err != nil {
		return err
	}
	r := &resident{runner: runner, idle: idle, ln: ln, serveSock: filepath.Join(dir, home.OrchSocket), last: time.Now(), log: log}
	// Its own lines at info; the server's (one per hand-off taken) only from warnings up, so
	// the log of a resident that ran a thousand dispatches is not a thousand lines.
	quiet, err := obs.NewLogger(f.IO.ErrOut, obs.LogText, slog.LevelWarn)
	if err != nil {
		return err
	}
	srv := r.server(quiet.Handler())
	sctx, stopServe := context.WithCancel(ctx)
	defer stopServe()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	log.Info("resident dispatcher serving", "socket", sock, "pid", os.Getpid(), "idle", idle.String())
	why := r.watch(ctx, served)
	// No new dispatch from here on (Prepare declines, and the CLI runs its own); those in
	// flight end first: each is a CLI's, waiting for its end.
	ln.Close()
	r.drain()
	// Only if the path is still its own: a resident that replaced this one keeps its socket.
	ln.RemoveSocket()
	log.Info("resident dispatcher left", "why", why, "refused", r.refusals.total(), "declined", r.declines.total(), "dispatches", srv.Handoffs())
	return nil
}

// residentIdle is how long a resident waits with no dispatch: --idle, else agora.yaml's; an
// error when it is off or the home has a leader.
func residentIdle(flag time.Duration, c *config.Config) (time.Duration, error) {
	idle := flag
	if idle == 0 {
		var err error
		if idle, err = c.Resident.IdleFor(); err != nil {
			return 0, err
		}
		if idle == 0 {
			return 0, errors.New("the resident dispatcher is off in agora.yaml (resident: {idle: 0}); start one for a while with --idle DURATION")
		}
	}
	if c.Leader.Set() {
		return 0, errors.New("this home has leader: in agora.yaml: its dispatcher is 'agora orch serve', which fences every commit with the Lease; a resident dispatcher would not")
	}
	return idle, nil
}

// residentRunner is serve's hand-off runner over this home's dispatcher and its local warm
// slots, held to the environment and process context the resident was started in; close
// discards the slots not claimed and waits for the dispatches' teardowns.
func residentRunner(ctx context.Context, f *cmdutil.Factory, h *home.Home, log *slog.Logger) (*handoffRunner, func(), error) {
	d, err := f.Dispatcher(ctx)
	if err != nil {
		return nil, nil, err
	}
	// The CLI behind a hand-off exits once its dispatch's end is recorded, not after the
	// stage's unmount and removal; the resident waits for those before it leaves.
	teardowns := d.BackgroundTeardowns()
	sup := detach.For(d)
	sb, err := detach.NewLocalStandbys(ctx, d, log)
	if err != nil {
		return nil, nil, err
	}
	closeRunner := teardowns
	if sb != nil {
		sup.Standbys, closeRunner = sb, func() { sb.Close(); teardowns() }
		go func() {
			if err := sb.Publish(ctx); err != nil {
				log.Warn("warm slots status", "err", err)
			}
		}()
	}
	runner, err := newHandoffRunner(f, d, sup, h)
	if err == nil {
		runner.resident = true
		if residentWholeEnv(h.Config) {
			runner.envAll = api.ResidentEnvDigest(os.Environ())
		}
		if runner.context, err = callerctx.ReadProcess(0); err != nil {
			err = fmt.Errorf("read this process's context: %w", err)
		}
	}
	if err != nil {
		closeRunner()
		return nil, nil, err
	}
	return runner, closeRunner, nil
}

// residentWholeEnv reports whether a dispatch of the home may run a program that reads any
// variable of the resident's environment: a kubernetes target's kubeconfig, whose exec
// credential plugins (aws, gcloud, kubelogin) inherit it. The resident then takes a dispatch
// only from the environment it was started in, all of it (api.HandoffRequest.EnvAll).
func residentWholeEnv(c *config.Config) bool {
	for _, t := range c.Targets {
		if t.Provider == config.ProviderKubernetes && t.Kubeconfig != "" {
			return true
		}
	}
	return false
}

// resident is the resident dispatcher's [api.Handoff]: serve's hand-off runner, counting
// what is in flight so it leaves only between dispatches.
type resident struct {
	runner    *handoffRunner
	idle      time.Duration
	ln        *service.Listener
	serveSock string
	log       *slog.Logger
	declines  declineLog // hand-offs declined, by why
	refusals  declineLog // the server's warnings (requests refused), by route and status

	// inflight and leaving pair up as a Dekker handshake: Prepare counts itself in and then
	// looks at leaving; the watcher sets leaving and then looks at inflight. One of the two
	// always sees the other, so no dispatch starts once the resident decided to go.
	inflight atomic.Int64
	leaving  atomic.Bool
	mu       sync.Mutex
	last     time.Time // the last dispatch's start or end
	drained  chan struct{}
}

// server is the resident's server: hand-offs only, its warnings (a refused request) into
// log at most once a minute for each route and status.
func (r *resident) server(log slog.Handler) *service.Server {
	return &service.Server{Handoff: r, Log: slog.New(limited{log, []string{"route", "status"}, &r.refusals})}
}

// Prepare implements api.Handoff.
func (r *resident) Prepare(ctx context.Context, req *api.HandoffRequest, peer api.Peer) (func(context.Context, func(api.HandoffFrame) error), error) {
	r.inflight.Add(1)
	if r.leaving.Load() {
		r.out()
		return nil, r.declined(peer, &api.Declined{Why: "the resident dispatcher is leaving"})
	}
	run, err := r.runner.Prepare(ctx, req, peer)
	if err != nil {
		// Not a dispatch of its: a stream of declined hand-offs (a shell of another
		// environment, a process of this user) does not keep it past resident.idle.
		r.out()
		return nil, r.declined(peer, err)
	}
	r.touch()
	return func(ctx context.Context, send func(api.HandoffFrame) error) {
		defer r.done()
		run(ctx, send)
	}, nil
}

// declined says in resident.log why the resident did not take peer's dispatch (the CLI ran
// it itself, with no word to its user), at most once a minute for each reason, and returns
// err. The server's own line of it is below the log's level, with the line of every
// hand-off taken. Any other error is a malformed request, not a decline: the server's
// refusal line says it, never its text, which may quote what the peer sent.
func (r *resident) declined(peer api.Peer, err error) error {
	var d *api.Declined
	if !errors.As(err, &d) {
		return err
	}
	// Counted by its kind where it has one: an environment's reason names the peer's
	// variables, which the peer chooses, and a new name each request would say each one.
	kind := d.Why
	if d.Kind != "" {
		kind = d.Kind
	}
	if say, more := r.declines.add(kind, time.Now()); say {
		r.log.Info("hand-off declined", "pid", peer.PID, "why", d.Why, "unsaid_before", more)
	}
	return err
}

// Declined is told of the hand-offs the server declined before Prepare (a CLI whose security
// context is not the resident's): logged as Prepare's own declines are.
func (r *resident) Declined(peer api.Peer, d *api.Declined) { r.declined(peer, d) }

func (r *resident) touch() {
	r.mu.Lock()
	r.last = time.Now()
	r.mu.Unlock()
}

// done counts a dispatch out.
func (r *resident) done() {
	r.touch()
	r.out()
}

// out counts a hand-off out, taken or not.
func (r *resident) out() {
	if r.inflight.Add(-1) == 0 && r.leaving.Load() {
		r.mu.Lock()
		if r.drained != nil {
			select {
			case <-r.drained:
			default:
				close(r.drained)
			}
		}
		r.mu.Unlock()
	}
}

// watch returns why the resident should leave: ctx ended (a signal), the server failed, or
// leave's answer, looked at every residentLook.
func (r *resident) watch(ctx context.Context, served <-chan error) string {
	t := time.NewTicker(residentLook)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return "stopped by a signal"
		case err := <-served:
			if err != nil {
				r.log.Warn("resident socket", "err", err)
			}
			return "its socket stopped serving"
		case <-t.C:
		}
		if why := r.leave(); why != "" {
			return why
		}
	}
}

// leave says why the resident should go now, or "".
func (r *resident) leave() string {
	r.mu.Lock()
	quiet := time.Since(r.last)
	r.mu.Unlock()
	switch {
	case r.inflight.Load() == 0 && quiet >= r.idle:
		return fmt.Sprintf("no dispatch for %s", r.idle)
	case !r.ln.Own():
		return "its socket was removed or replaced"
	case fileSum(r.runner.cfgFile) != r.runner.cfgSum:
		return "agora.yaml changed"
	case !isRunning(r.runner.exe, r.runner.running):
		return "the agora binary was replaced"
	case serveListens(r.serveSock):
		return "an 'agora orch serve' of this home started"
	}
	return ""
}

// drain marks the resident leaving and waits until no dispatch is in flight.
func (r *resident) drain() {
	r.mu.Lock()
	r.drained = make(chan struct{})
	r.mu.Unlock()
	r.leaving.Store(true)
	if r.inflight.Load() == 0 {
		return
	}
	<-r.drained
}

// serveListens reports whether an `agora orch serve` answers on sock (this user's).
func serveListens(sock string) bool {
	if !trustedSocket(filepath.Dir(sock), sock) {
		return false
	}
	c, err := net.DialTimeout("unix", sock, handoffDial)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
