// Package mcp is `agora mcp`: agora's run-time tools served to AI orchestrators over stdio or
// streamable HTTP (internal/mcpserver), wired to the home's catalog, dispatcher, orchestrator
// client and audit log (internal/mcphost).
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/cli/httpauth"
	"github.com/agora-dev/agora/internal/dispatch/detach"
	"github.com/agora-dev/agora/internal/mcphost"
	"github.com/agora-dev/agora/internal/mcpserver"
	"github.com/agora-dev/agora/internal/version"
)

type mcpOptions struct {
	f *cmdutil.Factory
	// ceilingLevel is --ceiling parsed; httpCfg the checked HTTP transport, nil for stdio.
	ceilingLevel mcpserver.Ceiling
	httpCfg      *mcpserver.HTTPConfig

	http       string
	ceiling    string
	allowHosts []string
	rate       float64
	burst      int
}

func NewCmd(f *cmdutil.Factory, runF func(*mcpOptions) error) *cobra.Command {
	opts := &mcpOptions{f: f}
	cmd := &cobra.Command{
		Use:   "mcp [--http HOST:PORT]",
		Short: "Serve the eleven run-time MCP tools to AI orchestrators over stdio or HTTP",
		Long: `Serve agora's MCP tools: list the catalog, dispatch subagents, describe and cancel
dispatches, and reach the orchestrator. Nothing that changes the catalog, touches secrets or
audits is among them; see docs/mcp.md.

AGORA_HOME must be an initialised home ('agora init'): this command never creates one, and its
first log line names the home it serves. Over stdio, with a home it cannot serve (missing, not
initialised, not a directory, an agora.yaml that does not load) it serves anyway and answers
every tool call with the error and its fix, so the client shows them (then exits with the
error: 2 for a missing home); with --http it does not start.

Without --http the server speaks MCP on stdin and stdout (the client starts 'agora mcp' itself);
logs go to stderr. Its ceiling is --ceiling (default orchestrate). Its name in the audit log and
on what it starts is --actor when given, else CLIENT@USER: the name the client gives when it
connects (Claude Code: claude-code) and the OS user running this server. The ceiling is what
authorises; the name is only recorded.

With --http HOST:PORT it serves streamable HTTP at /mcp, and refuses to start unless:
  - AGORA_HTTP_TOKEN (one client, named "default", ceiling --ceiling) or AGORA_HTTP_TOKENS_FILE
    (a YAML or JSON list of {name, token, ceiling}, not readable by others) gives each client a
    token of at least 32 characters;
  - HOST is 127.0.0.1, ::1 or localhost, or AGORA_HTTP_ALLOW_ANY=yes-i-understand-the-risk.
Requests need 'Authorization: Bearer TOKEN', a Host naming this server (or an --allow-host) and
no foreign Origin. With auth.oidc in agora.yaml it also accepts OAuth 2.1 bearer tokens from that
OpenID Connect provider (static tokens, if set, keep working): it serves its protected resource
metadata at /.well-known/oauth-protected-resource/mcp, so MCP clients such as Claude Code sign
in by themselves, and the rules there give each signed-in subject its ceiling.

Ceilings (a client sees and may call only what its ceiling allows):
  read         8 tools: catalog lists, dispatch describe, orchestrator status, watch, schedules
  dispatch    10 tools: read, plus agora_dispatch (run, answer) and agora_dispatch_cancel
  orchestrate 11 tools: dispatch, plus agora_orchestrator_submit (write and run plans)`,
		Example: `  claude mcp add agora --env AGORA_HOME=$HOME/.local/share/agora -- agora mcp --ceiling orchestrate
  agora mcp --ceiling read
  AGORA_HTTP_TOKEN=$(openssl rand -hex 32) agora mcp --http 127.0.0.1:8765`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			token := httpauth.TakeToken(f)
			ceiling, err := mcpserver.ParseCeiling(opts.ceiling)
			if err != nil {
				return cmdutil.UsageErrorf(cmd, "--ceiling: %v", err)
			}
			opts.ceilingLevel = ceiling
			if opts.http != "" {
				cfg, err := httpauth.Config(cmd, f, httpauth.Options{Addr: opts.http, AllowHosts: opts.allowHosts, Rate: opts.rate, Burst: opts.burst}, token, ceiling)
				if err != nil {
					return err
				}
				opts.httpCfg = &cfg
			}
			return cmdutil.RunCmd(cmd, opts, runF, mcpRun)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.http, "http", "", "serve streamable HTTP on HOST:PORT (path /mcp) instead of stdio")
	fl.StringVar(&opts.ceiling, "ceiling", "orchestrate", "what the client may do: read, dispatch or orchestrate (stdio, and AGORA_HTTP_TOKEN's client)")
	fl.StringSliceVar(&opts.allowHosts, "allow-host", nil, "another host name clients use to reach --http (checked against Host and Origin)")
	fl.Float64Var(&opts.rate, "rate", mcpserver.DefaultRate, "tool calls (stdio) or HTTP requests per second allowed per client")
	fl.IntVar(&opts.burst, "burst", mcpserver.DefaultBurst, "how far a client may run ahead of --rate")
	return cmd
}

// mcpRun wires the server from the factory: the catalog reader, a dispatcher port that hands
// every dispatch to a detached supervisor, the orchestrator service's client (submit, status
// and watch only), and the audit log.
func mcpRun(ctx context.Context, opts *mcpOptions) error {
	f := opts.f
	logger := slog.New(slog.NewJSONHandler(f.IO.ErrOut, nil))
	// A client starts this command with the environment it was configured with: a missing or
	// mistyped AGORA_HOME must be an error naming the path, never a new empty home.
	h, err := f.Home(ctx)
	if err != nil {
		if opts.httpCfg == nil {
			return mcpRefuseStdio(ctx, opts, logger, err)
		}
		return err
	}
	// The operator reading the client's server log sees which home (catalog, keys, audit log)
	// this server acts on.
	logger.Info("mcp server home", "home", h.Dir)
	// agora.db to object storage and retention's sweep while the server runs, unless the
	// leading orch serve does (leader: in agora.yaml). They stop last, once the audit
	// entries of this server are committed.
	stopDuties, err := f.HomeDuties(ctx, h, logger)
	if err != nil {
		return err
	}
	defer stopDuties()
	d, err := f.Dispatcher(ctx)
	if err != nil {
		return err
	}
	if os.Getenv("GOGC") == "" {
		// The SDK's JSON decoding allocates large buffers per request while the server's live
		// heap stays small; collecting less often trades a few MB for a third of the CPU.
		debug.SetGCPercent(400)
	}
	orchClient, err := f.OrchClient(ctx)
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(ctx)
	auditor := audit.NewBatcher(h.DB, audit.New(f.Now).SparseTree())
	var wg sync.WaitGroup
	wg.Go(func() { auditor.Run(ctx) })
	defer wg.Wait()
	defer stop()
	sup, closeWarm, err := detach.ForServe(ctx, d, logger)
	if err != nil {
		return err
	}
	defer closeWarm()
	wg.Go(func() {
		if err := sup.Standbys.Publish(ctx); err != nil {
			logger.Warn("warm slots status", "err", err)
		}
	})
	srv, err := mcpserver.New(mcpserver.Config{
		Catalog:      d.Catalog,
		Dispatcher:   mcphost.NewDispatcher(d, sup),
		Orchestrator: mcphost.NewOrchestrator(orchClient),
		Audit:        mcphost.Audit(auditor),
		Logger:       logger,
		Version:      version.Short(),
	})
	if err != nil {
		return err
	}
	if opts.httpCfg != nil {
		return srv.ListenHTTP(ctx, *opts.httpCfg)
	}
	// The client is recorded as --actor when given, else as the name it gives in initialize
	// with the OS user who started this server: CLIENT@USER (e.g. claude-code@alice).
	stdio := mcpserver.StdioConfig{
		Principal: mcpserver.Principal{Client: f.ActorFlag, Ceiling: opts.ceilingLevel},
		Limits:    mcpserver.Limits{Rate: opts.rate, Burst: opts.burst},
	}
	if f.ActorFlag == "" {
		stdio.Owner = f.Actor()
	}
	err = srv.ServeStdio(ctx, f.IO.In, f.IO.Out, stdio)
	if ctx.Err() != nil {
		return nil // interrupted: a normal way to stop
	}
	return err
}

// mcpRefuseStdio serves a stdio client whose AGORA_HOME cannot be served (missing, not
// initialised, not a directory, or its agora.yaml does not load): a client shows a server that
// exits at once only as "Connection closed", so the server starts anyway and answers every
// tool call with the error and its fix, and then exits with the error (a missing home is usage:
// exit 2). Over HTTP an operator starts the server and reads its refusal; it does not start.
func mcpRefuseStdio(ctx context.Context, opts *mcpOptions, logger *slog.Logger, cause error) error {
	f := opts.f
	msg := cause.Error()
	var h interface{ Hint() string }
	if errors.As(cause, &h) && h.Hint() != "" {
		msg += "; " + h.Hint()
	} else if dir, err := f.HomeDir(); err == nil {
		if !strings.Contains(msg, dir) {
			msg = "AGORA_HOME " + dir + " cannot be served: " + msg
		}
		msg += fmt.Sprintf("; fix it and restart this server ('AGORA_HOME=%s agora subagent list' shows the same error on the host)", dir)
	}
	logger.Error("mcp server cannot serve its home: every tool call is refused", "err", msg)
	err := mcpserver.ServeRefusalStdio(ctx, f.IO.In, f.IO.Out, opts.ceilingLevel, msg, version.Short())
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("%w (serving the refusal: %v)", cause, err)
	}
	return cause
}
