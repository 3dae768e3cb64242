package orch

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/catalog/view"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/cli/httpauth"
	"github.com/agora-dev/agora/internal/compute/warm"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/mcpserver"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/store"
	"github.com/agora-dev/agora/internal/web"
)

// orchWebFlags are serve's flags for the web run view.
type orchWebFlags struct {
	http       string
	allowHosts []string
	// clients and allowAny are read from the environment when the flags are checked, so a
	// missing token refuses before anything opens.
	clients  []mcpserver.Client
	allowAny bool
	// oidc is the identity provider's sign-in of auth.oidc.web, nil without one.
	oidc *web.OIDC
}

func (o *orchWebFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.http, "http", "", "serve the web run view on HOST:PORT (token from AGORA_HTTP_TOKEN or AGORA_HTTP_TOKENS_FILE; loopback unless AGORA_HTTP_ALLOW_ANY)")
	cmd.Flags().StringSliceVar(&o.allowHosts, "allow-host", nil, "an extra host name the web view's Host and Origin may carry (repeatable)")
}

// check loads the web view's clients the way MCP HTTP does (the same variables and rules) and
// refuses, before serve opens anything, a missing or weak token or an exposed bind.
func (o *orchWebFlags) check(cmd *cobra.Command, f *cmdutil.Factory) error {
	// Read once, whatever the flags: no process serve starts (a dispatch's detached supervisor
	// inherits serve's environment) carries the operator's token, as with agora mcp; serve
	// without --http never uses it.
	token := httpauth.TakeToken(f)
	secret := takeOIDCSecret(f)
	if o.http == "" {
		if len(o.allowHosts) > 0 {
			return cmdutil.UsageErrorf(cmd, "--allow-host needs --http")
		}
		return nil
	}
	cfg, err := httpauth.Config(cmd, f, httpauth.Options{Addr: o.http, AllowHosts: o.allowHosts}, token, mcpserver.CeilingRead)
	if err != nil {
		return err
	}
	o.clients, o.allowAny = cfg.Clients, cfg.AllowAny
	if token != "" {
		// AGORA_HTTP_TOKEN's one client is its operator: whoever holds the only token runs serve.
		o.clients[0].Ceiling = mcpserver.CeilingOrchestrate
	}
	if o.oidc, err = webOIDC(f, secret); err != nil {
		return err
	}
	return web.Check(o.config(nil))
}

func (o *orchWebFlags) config(log *slog.Logger) web.Config {
	return web.Config{Addr: o.http, Clients: o.clients, AllowAny: o.allowAny, AllowHosts: o.allowHosts, Log: log, OIDC: o.oidc}
}

// webReadConns is how many connections each of the web view's read-only pools holds: its
// reads are gated to one at a time (web/gate.go), and an event stream may read beside them.
const webReadConns = 2

// orchWeb builds the web run view over the engine and agora.db, or nil without --http. It
// reads both databases through read-only connections of its own, never the pools the engine
// and the dispatcher write through, so no page waits for, or holds, a connection they need;
// closeFn closes them.
func orchWeb(ctx context.Context, o *orchWebFlags, f *cmdutil.Factory, h *home.Home, orchDB *store.DB, eng *orch.Engine, d *dispatch.Dispatcher, log *slog.Logger,
	mount map[string]http.Handler, verifierFor func(*orch.Reader) func(context.Context, api.Run) (*verify.Report, error), warmCounts func() []warm.Counts) (ui *web.Server, closeFn func(), err error) {
	if o.http == "" {
		return nil, func() {}, nil
	}
	orchRO, err := store.OpenReadOnly(ctx, orchDB.Path())
	if err != nil {
		return nil, nil, err
	}
	mainRO, err := store.OpenReadOnly(ctx, h.DB.Path())
	if err != nil {
		orchRO.Close()
		return nil, nil, err
	}
	closeFn = func() { orchRO.Close(); mainRO.Close() }
	for _, db := range []*store.DB{orchRO, mainRO} {
		db.SQL().SetMaxOpenConns(webReadConns)
	}
	reader := view.New(mainRO, h.Blobs)
	cfg := o.config(log)
	cfg.Now = f.Now
	cfg.Mount = mount
	cfg.HostPaths = []string{h.Dir}
	cfg.Listening = func(a net.Addr) { fmt.Fprintf(f.IO.ErrOut, "agora: web run view on http://%s\n", a) }
	runs := orch.NewReader(orchRO.SQL())
	ui, err = web.New(cfg, web.Sources{
		Orch:       eng,
		Runs:       runs,
		Dispatches: webRecords{Records: dispatch.NewRecords(mainRO, audit.New(f.Now), f.Now), decide: d.Records},
		Blob:       h.Blobs.Get,
		Live:       d.Live,
		Catalog: func(ctx context.Context, k catalog.Kind) ([]catalog.Version, error) {
			return reader.List(ctx, k)
		},
		MainLog:        mainRO.SQL(),
		OrchLog:        orchRO.SQL(),
		VerifyRun:      verifierFor(runs),
		CancelDispatch: d.CancelBy,
		Queues:         eng.Queues,
		Warm:           warmCounts,
	})
	if err != nil {
		closeFn()
		return nil, nil, err
	}
	return ui, closeFn, nil
}

// webRecords are the dispatch records as the web view reads them (through its read-only
// connection), with decisions on held calls written through the dispatcher's own records.
type webRecords struct {
	*dispatch.Records
	decide *dispatch.Records
}

func (r webRecords) DecideApproval(ctx context.Context, id, call string, approve bool, reason, actor, argsDigest string) (*dispatch.Approval, error) {
	return r.decide.DecideApproval(ctx, id, call, approve, reason, actor, argsDigest)
}
