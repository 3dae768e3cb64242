package dispatch

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/modelgw"
	"github.com/agora-dev/agora/internal/runtime/runtimes"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// Gateway request budget: generous for one agent (each tool call is a model request plus an
// audit report), still a bound on a runaway loop.
const (
	gatewayRequestsPerSecond = 50
	gatewayRequestBurst      = 100
)

// The gateway's audit budget grows with the dispatch's timeout: the gateway's defaults for
// each gatewayBudgetPeriod, pro rata, so a long dispatch is not starved and a short one
// cannot write a long one's worth; never less than the floor, which a short dispatch's
// honest work does not reach.
const (
	gatewayBudgetPeriod     = 30 * time.Minute
	gatewayBudgetMinEntries = 512
	gatewayBudgetMinBytes   = 512 << 10
)

// gatewayAuditBudget is the audit budget of a dispatch with the given timeout.
func gatewayAuditBudget(timeout time.Duration) (entries int, bytes int64) {
	if timeout <= 0 {
		timeout = gatewayBudgetPeriod
	}
	scale := func(v int64) int64 { return int64(float64(v) * (float64(timeout) / float64(gatewayBudgetPeriod))) }
	return int(max(scale(modelgw.DefaultMaxAuditEntries), gatewayBudgetMinEntries)),
		max(scale(modelgw.DefaultMaxAuditBytes), gatewayBudgetMinBytes)
}

// modelRoute is how the runtime called name reaches its model through the gateway (which
// API it speaks, which env bundle keys name its endpoint and its key), and whether it
// reaches one.
func modelRoute(name string) (runtimes.Route, bool) {
	rt, _ := runtimes.Lookup(name)
	return rt.Model, rt.Model.API != ""
}

// modelEndpoint is what the gateway of one dispatch needs from its env bundles.
type modelEndpoint struct {
	api     runtimes.Route
	baseURL string
	key     []byte // nil: no key (a local server that needs none)
	model   string // the subagent's model: every model request must name it; its price counts each call
}

// takeModelEndpoint removes the endpoint and key entries of the runtime's API from p's
// environment and secrets, so they never reach the sandbox, and returns them: the host's
// gateway uses them instead. Either may be a plain value or a secret. It returns nil for a
// runtime that reaches no model.
func (d *Dispatcher) takeModelEndpoint(ctx context.Context, p *pinned) (*modelEndpoint, error) {
	api, ok := modelRoute(p.doc.Runtime)
	if !ok {
		return nil, nil
	}
	take := func(key string) ([]byte, error) {
		if v, ok := p.env[key]; ok {
			delete(p.env, key)
			return []byte(v), nil
		}
		ref, ok := p.secretRefs[key]
		if !ok {
			return nil, nil
		}
		delete(p.secretRefs, key)
		v, err := d.Unseal(ctx, ref)
		if err != nil {
			return nil, fmt.Errorf("unseal secret %s: %w", key, err)
		}
		return v, nil
	}
	e := &modelEndpoint{api: api, baseURL: api.DefaultBaseURL, model: p.doc.Model}
	base, err := take(api.BaseURLKey)
	if err != nil {
		return nil, err
	}
	if len(base) > 0 {
		e.baseURL = string(base)
	}
	if e.key, err = take(api.KeyKey); err != nil {
		return nil, err
	}
	return e, nil
}

// runningGateway is one dispatch's socket directory and the host servers listening in it:
// the model gateway (model runtimes) and the egress proxy (network: proxy).
type runningGateway struct {
	gw    *modelgw.Gateway
	proxy *runningProxy
	// dir is bound into the sandbox; link, when set, is the stage's gateway entry pointing
	// at dir (the stage path was too long for a Unix socket).
	dir, link string
}

// openGatewayDir makes the dispatch's socket directory, fresh and 0700: the stage's gateway/
// when a socket path there fits, else a short temporary directory that the stage's gateway
// entry links to (the worker of a `sandbox: none` target finds it through the link).
func openGatewayDir(st *stage) (*runningGateway, error) {
	rg := &runningGateway{dir: filepath.Join(st.dir, wire.GatewayDir)}
	os.RemoveAll(rg.dir) // nothing of an earlier attempt is reused
	// The gateway binds its socket in a temporary directory beside the path, then renames it.
	if len(filepath.Join(rg.dir, ".gateway-0123456789", "s")) > maxSocketPath {
		tmp, err := os.MkdirTemp("", gatewayFallbackPrefix)
		if err != nil {
			return nil, fmt.Errorf("start gateway: %w", err)
		}
		if err := os.Symlink(tmp, rg.dir); err != nil {
			os.RemoveAll(tmp)
			return nil, fmt.Errorf("start gateway: %w", err)
		}
		rg.dir, rg.link = tmp, rg.dir
	} else if err := os.Mkdir(rg.dir, 0o700); err != nil {
		return nil, fmt.Errorf("start gateway: %w", err)
	}
	return rg, nil
}

// startGateway starts the model gateway of dispatch r in rg's directory. A gateway whose
// audit budget is spent pulls trip: the sandbox is stopped and the dispatch fails
// limit-exceeded.
func (d *Dispatcher) startGateway(ctx context.Context, r *Record, rg *runningGateway, ep *modelEndpoint, secrets [][]byte, trip *limitTrip, tracer modelgw.Tracer) error {
	role := r.Subagent + "@" + string(r.SubagentDigest)
	var egressGrant []grant.EgressRule
	if r.Grants != nil {
		egressGrant = r.Grants.Egress
	}
	maxEntries, maxBytes := gatewayAuditBudget(time.Duration(r.Timeout))
	var approver modelgw.Approver
	var approvalTimeout time.Duration
	var approve []grant.ApproveRule
	if r.Grants != nil && len(r.Grants.Approve) > 0 {
		approve = r.Grants.Approve
		target, err := d.Config.Target(r.Target)
		if err != nil {
			return err
		}
		approvalTimeout = target.ApprovalTimeout
		approver = &approvalWaiter{records: d.Records, id: r.ID, role: role, timeout: approvalTimeout}
	}
	gw, err := modelgw.Listen(ctx, filepath.Join(rg.dir, wire.GatewaySocket), modelgw.Config{
		DispatchID:        r.ID,
		Role:              role,
		ModelBaseURL:      ep.baseURL,
		ModelAPI:          ep.api.API,
		Model:             ep.model,
		APIKey:            ep.key,
		Secrets:           secrets,
		Egress:            egressGrant,
		Dialer:            egress.NewDialer(d.Egress, d.Resolver),
		Audit:             &gatewayAuditor{records: d.Records, id: r.ID, role: role},
		RequestsPerSecond: gatewayRequestsPerSecond,
		RequestBurst:      gatewayRequestBurst,
		MaxAuditEntries:   maxEntries,
		MaxAuditBytes:     maxBytes,
		OnLimit:           trip.Trip,
		Meter:             d.meterFor(r, ep.model),
		OnBudget:          func(detail string) { trip.TripBudget(detail, budgetGrace) },
		Approver:          approver,
		Approve:           approve,
		ApprovalTimeout:   approvalTimeout,
		Tracer:            tracer,
		Learn:             r.Learn,
		LearnHosts:        d.learnHosts(r),
	})
	clear(ep.key)
	if err != nil {
		return err
	}
	rg.gw = gw
	return nil
}

// maxSocketPath is the longest Unix socket path Linux accepts.
const maxSocketPath = 107

// gatewayFallbackPrefix starts the name of the temporary directory a gateway's socket lives
// in when the stage path is too long for one.
const gatewayFallbackPrefix = "agora-gw-"

// removeGatewayEntry removes the stage's gateway entry at link and, when it is a symlink to
// a gateway's temporary directory, that directory: the gateway gave it to the sandbox uid,
// and a supervisor killed with -9 never removed it. Nothing else is followed: the link's
// target must be, verbatim, a directory directly in os.TempDir() named agora-gw-*, not
// itself a link (os.RemoveAll then follows no link below it).
func removeGatewayEntry(link string) {
	if fi, err := os.Lstat(link); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if target, err := os.Readlink(link); err == nil && isGatewayFallback(target) {
			if ti, err := os.Lstat(target); err == nil && ti.IsDir() {
				os.RemoveAll(target)
			}
		}
	}
	os.RemoveAll(link)
}

// isGatewayFallback reports whether p names a directory startGateway could have made with
// os.MkdirTemp("", gatewayFallbackPrefix).
func isGatewayFallback(p string) bool {
	name, ok := strings.CutPrefix(filepath.Base(p), gatewayFallbackPrefix)
	return ok && name != "" && filepath.IsAbs(p) && filepath.Clean(p) == p &&
		filepath.Dir(p) == filepath.Clean(os.TempDir())
}

// close stops the gateway (in-flight requests get a short grace) and removes its directory.
// It is safe to call more than once.
func (rg *runningGateway) close() error {
	if rg == nil {
		return nil
	}
	var err error
	if rg.gw != nil {
		err = rg.gw.Close()
	}
	rg.proxy.close()
	rg.remove()
	return err
}

// usage is what the model gateway counted, or nil without one.
func (rg *runningGateway) usage() *budget.Usage {
	if rg == nil || rg.gw == nil {
		return nil
	}
	u := rg.gw.Usage()
	return &u
}

func (rg *runningGateway) remove() {
	os.RemoveAll(rg.dir)
	if rg.link != "" {
		os.Remove(rg.link)
	}
}

// gatewayAuditor appends a gateway's records to agora.db's audit log, each in its own
// transaction, attributed to the dispatch and its role.
type gatewayAuditor struct {
	records  *Records
	id, role string
}

func (a *gatewayAuditor) Record(ctx context.Context, kind string, details map[string]any) error {
	return a.records.AppendAudit(ctx, audit.Entry{
		Actor:   entry.GatewayActor(a.id, a.role),
		Kind:    kind,
		Subject: entry.Dispatch(a.id),
		Details: details,
	})
}
