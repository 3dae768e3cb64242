package orch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/compute/warm"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/dispatch/detach"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/obs"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/cron"
	"github.com/agora-dev/agora/internal/orch/dispatchexec"
	"github.com/agora-dev/agora/internal/orch/service"
	"github.com/agora-dev/agora/internal/retention/homesweep"
	"github.com/agora-dev/agora/internal/store"
	"github.com/agora-dev/agora/internal/web"
	"github.com/agora-dev/agora/internal/workspace"
)

// orchServeOptions are agora orch serve's flags.
type orchServeOptions struct {
	f *cmdutil.Factory
	// gateway, when set, serves the network gateway too, on this address.
	gateway string
	web     orchWebFlags
	// metrics is --metrics HOST:PORT, "" for none; metricsAllowRemote lets it bind off loopback.
	metrics            string
	metricsAllowRemote bool
	// metricsAllowHosts are extra names the metrics listener's Host and Origin may carry.
	metricsAllowHosts []string
	logFormat         string // --log-format: text or json
}

func newOrchServeCmd(f *cmdutil.Factory, runF func(*orchServeOptions) error) *cobra.Command {
	opts := &orchServeOptions{f: f}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the orchestrator service (the only owner of orch.db)",
		Long: `Run the orchestrator service in the foreground until SIGINT or SIGTERM.

It takes an exclusive lock (AGORA_HOME/orch/serve.lock; a second serve refuses and names
the pid that holds it), opens orch.db, resumes every run that is not sealed, and answers
on AGORA_HOME/orch/orch.sock (mode 0600).

Workers outlive serve: each attempt's dispatch has its own detached supervisor, so stopping
or crashing serve never kills work in flight. A restarted serve re-attaches to every
attempt by its dispatch id; one whose worker died meanwhile ends failed/lost and is
retried by the task's policy.

With leader: in agora.yaml it is one of several replicas: it waits as a standby until it
holds that Kubernetes Lease (restoring the home from replicate.s3 first when set), fences
every commit with it, and exits non-zero if it loses it (docs/operations.md).

With --gateway HOST:PORT it also serves the network gateway (see 'agora gateway serve'),
certified for gateway.advertise in agora.yaml.

--http HOST:PORT also serves the web run view (runs, a live DAG, tasks, dispatches, the
catalog and the audit log) with the posture of MCP HTTP: a token from AGORA_HTTP_TOKEN or
AGORA_HTTP_TOKENS_FILE (an operator's ceiling is orchestrate; others only read), loopback
unless AGORA_HTTP_ALLOW_ANY, Host and Origin checked. A browser logs in once with the token.

Every transition, retry, lock wait, re-attach and refused request is logged on stderr with
its run, task and dispatch ids: key=value text, or one JSON object per line with
--log-format json.

--metrics HOST:PORT serves Prometheus /metrics, /healthz (alive) and /readyz (databases
writable, engine running) on a listener of its own. It has NO token: anyone who can reach
it reads the metrics (names, counts and durations; never a secret), so it must be loopback
(127.0.0.1, ::1, localhost) unless --metrics-allow-remote says otherwise. It answers only
requests addressed to it: a Host naming its address (or localhost for a loopback bind, or a
--metrics-allow-host name), and no cross-site Origin, so a web page cannot read it through a
rebound DNS name.`,
		Example: `  AGORA_HTTP_TOKEN=$(openssl rand -hex 32) agora orch serve --http 127.0.0.1:8080
  agora orch serve --metrics 127.0.0.1:9090 --log-format json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.web.check(cmd, f); err != nil {
				return err
			}
			if opts.logFormat != obs.LogText && opts.logFormat != obs.LogJSON {
				return cmdutil.UsageErrorf(cmd, "--log-format %q: want %s or %s", opts.logFormat, obs.LogText, obs.LogJSON)
			}
			if opts.metrics != "" {
				if err := obs.CheckBind(opts.metrics, opts.metricsAllowRemote); err != nil {
					return cmdutil.UsageErrorf(cmd, "--metrics: %v", err)
				}
			} else if len(opts.metricsAllowHosts) > 0 {
				return cmdutil.UsageErrorf(cmd, "--metrics-allow-host needs --metrics")
			}
			return cmdutil.RunCmd(cmd, opts, runF, orchServeRun)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.gateway, "gateway", "", "also serve the network gateway on HOST:PORT (advertised as gateway.advertise)")
	fl.StringVar(&opts.metrics, "metrics", "", "serve /metrics, /healthz and /readyz on HOST:PORT (no token; loopback only unless --metrics-allow-remote)")
	fl.BoolVar(&opts.metricsAllowRemote, "metrics-allow-remote", false, "let --metrics bind an address other hosts can reach (it has no token)")
	fl.StringSliceVar(&opts.metricsAllowHosts, "metrics-allow-host", nil, "an extra host name the metrics listener's Host and Origin may carry (repeatable)")
	fl.StringVar(&opts.logFormat, "log-format", obs.LogText, "log format on stderr: text or json")
	opts.web.add(cmd)
	return cmd
}

func orchServeRun(ctx context.Context, opts *orchServeOptions) error {
	f := opts.f
	dir, err := f.OrchDir()
	if err != nil {
		return err
	}
	release, err := service.Lock(dir)
	if err != nil {
		return err
	}
	defer release()
	mem := orch.NewMemory(serveMemoryLimit())
	// With leader: in agora.yaml, a standby until it holds the Lease (serve_lease.go).
	leader, h, err := leaderHome(ctx, f, opts.logFormat)
	if err != nil {
		return err
	}
	defer leader.release(ctx, f, h)
	db, err := store.Open(ctx, filepath.Join(dir, home.OrchDB), orch.Migrations(), store.FullSync())
	if err != nil {
		return err
	}
	defer db.Close()
	d, err := sweptDispatcher(ctx, f)
	if err != nil {
		return err
	}
	ob, err := newServeObs(ctx, opts)
	if err != nil {
		return err
	}
	// agora.db and orch.db to object storage while serve runs (replicate.s3).
	rctx, stopRepl := context.WithCancel(ctx)
	repl, waitRepl, err := f.ServeReplication(rctx, h, ob.log, filepath.Join(dir, home.OrchDB))
	if err != nil {
		stopRepl()
		return err
	}
	defer waitRepl()
	defer stopRepl()
	if repl != nil {
		ob.metrics.Registry().MustRegister(repl)
	}
	orchCP, err := f.LogCheckpointer(ctx, db, home.OrchDB)
	if err != nil {
		return err
	}
	mainCP, err := f.Checkpointer(ctx)
	if err != nil {
		return err
	}
	sup, closeWarm, err := detach.ForServe(ctx, d, ob.log)
	if err != nil {
		return err
	}
	defer closeWarm()
	eng, err := openOrchEngine(ctx, f, h, db, d, sup, ob, orchCP, mem)
	if err != nil {
		return err
	}
	var warmCounts func() []warm.Counts
	if sup.Standbys != nil {
		warmCounts = sup.Standbys.Counts
	}
	ob.attach(eng, db, h.DB, d.Records, warmCounts)
	sock := filepath.Join(dir, home.OrchSocket)
	ln, err := service.Listen(sock)
	if err != nil {
		return err
	}
	defer ln.RemoveSocket() // only its own: a serve started since keeps its socket
	srv := &service.Server{Engine: eng, Spool: dir, PinRepo: dispatch.PinRevision, PinWorkspace: d.PinWorkspace, Log: ob.log,
		Trace: runTrace(ob.tracer), ExportRun: orchRunExporter(orchCP), LearnInRun: d.Records.LearnInRun, Parsing: mem.Parsing}
	// `agora dispatch run` hands its dispatch to this serve when it can (internal/cli/dispatchcmd/runner.go, through the factory).
	if srv.Handoff, err = f.Handoff(d, sup, h); err != nil {
		return err
	}
	srv.Schedules = &service.Scheduler{Server: srv, Table: cron.NewTable(db, audit.New(f.Now)), Now: f.Now, Log: ob.log}
	testOnlySchedulerHooks(f, srv.Schedules)
	var serveGateway func(context.Context) error
	if opts.gateway != "" {
		if serveGateway, err = f.NetworkGateway(ctx, opts.gateway, ""); err != nil {
			return err
		}
	}
	ui, closeWeb, err := orchWeb(ctx, &opts.web, f, h, db, eng, d, ob.log, ob.mount(),
		func(r *orch.Reader) func(context.Context, api.Run) (*verify.Report, error) {
			return runVerifier(h, orchCP, mainCP, f.Now, r)
		}, warmCounts)
	if err != nil {
		return err
	}
	defer closeWeb()
	fmt.Fprintf(f.IO.ErrOut, "agora: orchestrator serving on %s (pid %d)\n", sock, os.Getpid())
	return serveOrchParts(ctx, f, opts, &orchServeParts{leader: leader, ui: ui, gateway: serveGateway, eng: eng, sup: sup, srv: srv, ln: ln, orchCP: orchCP, mainCP: mainCP, ob: ob,
		sweep: func(ctx context.Context) { homesweep.Background(ctx, h, f.Now, ob.log) }, adopt: d.AdoptOrphans})
}

// orchServeParts are what orchServeRun opened, each run as one goroutine of serve's group.
type orchServeParts struct {
	ui             *web.Server
	gateway        func(context.Context) error
	eng            *orch.Engine
	sup            *detach.Supervisors
	srv            *service.Server
	ln             net.Listener
	orchCP, mainCP *audit.Checkpointer
	ob             *serveObs
	sweep          func(context.Context)              // retention, nil in tests that build parts
	adopt          func(context.Context) (int, error) // dispatch.Dispatcher.AdoptOrphans; nil in tests that build parts
	leader         *serveLeader                       // nil without leader: in agora.yaml
}

// serveOrchParts runs p until ctx ends or one part fails; a stop by a signal is a clean stop.
func serveOrchParts(ctx context.Context, f *cmdutil.Factory, opts *orchServeOptions, p *orchServeParts) error {
	ui, serveGateway, eng, sup, srv, ln, orchCP, mainCP, ob := p.ui, p.gateway, p.eng, p.sup, p.srv, p.ln, p.orchCP, p.mainCP, p.ob
	g, gctx := errgroup.WithContext(ctx)
	if ui != nil {
		g.Go(func() error { return ui.Serve(gctx) })
	}
	if serveGateway != nil {
		g.Go(func() error { return serveGateway(gctx) })
	}
	g.Go(func() error { return eng.Run(gctx) })
	if p.adopt != nil {
		g.Go(func() error { adoptLoop(gctx, p.adopt, ob.log); return nil })
	}
	g.Go(func() error {
		if err := sup.Standbys.Publish(gctx); err != nil {
			ob.log.Warn("warm slots status", "err", err) // doctor then says no serve holds them
		}
		return nil
	})
	g.Go(func() error { return srv.Serve(gctx, ln) })
	g.Go(func() error { return srv.Schedules.Run(gctx) })
	g.Go(func() error { return orchCP.Run(gctx, 5*time.Second) })
	g.Go(func() error { return mainCP.Run(gctx, 5*time.Second) })
	g.Go(func() error { return ob.serveMetrics(gctx, opts.metrics, opts.metricsAllowHosts) })
	if p.sweep != nil {
		g.Go(func() error { p.sweep(gctx); return nil })
	}
	if p.leader != nil {
		// A lost Lease stops serve with an error: it never keeps serving (the fence already
		// refuses its commits by then).
		g.Go(func() error {
			select {
			case <-p.leader.lost():
				return p.leader.errLost()
			case <-gctx.Done():
				return nil
			}
		})
	}
	err := g.Wait()
	if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
		// Stopped by a signal: a clean stop, whatever the goroutines said while winding down.
		fmt.Fprintln(f.IO.ErrOut, "agora: orchestrator stopped; running workers continue and are re-attached by the next serve")
		return nil
	}
	return p.leader.stopped(err)
}

// serveMemoryLimit is how serve sets its soft memory limit (orch.Memory): debug.SetMemoryLimit,
// or nil when GOMEMLIMIT chose the limit.
func serveMemoryLimit() func(int64) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	return func(n int64) { debug.SetMemoryLimit(n) }
}

// adoptLoop adopts, every [detach.ReapEvery] while serve runs, the dispatches whose
// supervisor died while their worker runs on (a Kubernetes Job): within seconds, whether or
// not a run or a client follows them. It ends nothing (dispatch.Dispatcher.AdoptOrphans).
func adoptLoop(ctx context.Context, adopt func(context.Context) (int, error), log *slog.Logger) {
	t := time.NewTicker(detach.ReapEvery)
	defer t.Stop()
	for {
		if _, err := adopt(ctx); err != nil && ctx.Err() == nil {
			log.Warn("adopt", "err", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// openOrchEngine opens the orchestrator's engine over db: plans are checked against the
// catalog and agora.yaml, tasks run through d, and a sealed run is checkpointed at once.
func openOrchEngine(ctx context.Context, f *cmdutil.Factory, h *home.Home, db *store.DB, d *dispatch.Dispatcher, sup *detach.Supervisors, ob *serveObs, orchCP *audit.Checkpointer, mem *orch.Memory) (*orch.Engine, error) {
	reader := view.New(h.DB, h.Blobs)
	return orch.Open(ctx, db, audit.New(f.Now), &dispatchexec.Executor{D: d, Supervisors: sup, Log: ob.log, Trace: ob.spans.Traceparent, Replicated: f.AgoraReplicated(h)}, orch.Options{
		Now:      f.Now,
		Refs:     catalogRefs{r: reader, targets: h.Config.Target, queues: h.Config.CheckQueue},
		Queues:   h.Config.QueueConcurrency(),
		Observer: ob.observer,
		Held:     mem.Held,
		AfterCommit: func(ctx context.Context, sealed []string) {
			// A sealed run gets a checkpoint at once, so its bundle can be exported and
			// anchored without waiting for the next interval.
			if _, err := orchCP.Checkpoint(ctx); err != nil {
				ob.log.Warn("checkpoint orch.db after sealing", "runs", sealed, "err", err)
			}
		},
	})
}

// catalogRefs checks a plan's references against the catalog and agora.yaml's targets and
// queues.
type catalogRefs struct {
	r       *view.Catalog
	targets func(string) (config.Target, error)
	queues  func(string) error
}

func (c catalogRefs) Queue(_ context.Context, name string) error { return c.queues(name) }

func (c catalogRefs) Subagent(ctx context.Context, ref string) error {
	_, err := c.r.Resolve(ctx, catalog.KindSubagent, ref)
	return err
}

// PinSubagent names the version ref names now: a run's bare subagent names are pinned to
// it at submit (plan.SubagentPinner).
func (c catalogRefs) PinSubagent(ctx context.Context, ref string) (string, error) {
	v, err := c.r.Resolve(ctx, catalog.KindSubagent, ref)
	if err != nil {
		return "", err
	}
	return v.Ref(), nil
}

// Reviewer resolves subagent ref and refuses it as a reviewer on target where it could give
// no final answer its worker vouches for (dispatchexec.ReviewerRefusal). An unknown target is
// the target check's to report.
func (c catalogRefs) Reviewer(ctx context.Context, ref, target string) error {
	v, err := c.r.Resolve(ctx, catalog.KindSubagent, ref)
	if err != nil {
		return err
	}
	b, err := c.r.Content(v)
	if err != nil {
		return err
	}
	doc, err := catalog.ParseSubagentDoc(b)
	if err != nil {
		return fmt.Errorf("subagent %q: %w", ref, err)
	}
	t, err := c.targets(target)
	if err != nil {
		return nil
	}
	return dispatchexec.ReviewerRefusal(ref, doc.Runtime, target, t)
}

func (c catalogRefs) Env(ctx context.Context, ref string) error {
	_, err := c.r.Resolve(ctx, catalog.KindEnv, ref)
	return err
}

// Current refuses a pinned version that is not its name's current one (plan.CurrentChecker).
func (c catalogRefs) Current(ctx context.Context, kind catalog.Kind, ref string) error {
	_, err := c.r.ResolveCurrent(ctx, kind, ref)
	return err
}

func (c catalogRefs) Target(_ context.Context, name string) error {
	_, err := c.targets(name)
	return err
}

// Workspace checks that the workspace exists and allows revision, resolving it to a commit of
// its repository (git runs); the error names the workspace and its patterns, never the path.
func (c catalogRefs) Workspace(ctx context.Context, ref, revision string) error {
	ws, err := workspace.Lookup(ctx, c.r, ref)
	if err != nil {
		return err
	}
	_, err = workspace.Resolve(ctx, ws, revision)
	return err
}

// sweptDispatcher is serve's dispatcher (the supervisor host: it adopts, see
// dispatch.Adoption), after it removed the Jobs and containers of
// dispatches that ended while no serve ran. A cluster that cannot be reached now is said, not
// fatal: local targets still work, and the next start sweeps again.
func sweptDispatcher(ctx context.Context, f *cmdutil.Factory) (*dispatch.Dispatcher, error) {
	d, err := f.Dispatcher(ctx)
	if err != nil {
		return nil, err
	}
	// serve is the supervisor host: a dispatch whose supervisor died while its worker runs
	// on (a Kubernetes Job: serve's pod was killed or upgraded) is adopted, never run twice.
	d.Adopt = &dispatch.Adoption{Role: "serve"}
	if n, err := d.SweepRemote(ctx); err != nil {
		fmt.Fprintf(f.IO.ErrOut, "agora: warning: %v\n", err)
	} else if n > 0 {
		fmt.Fprintf(f.IO.ErrOut, "agora: removed what %d ended dispatches left in their clusters\n", n)
	}
	return d, nil
}
