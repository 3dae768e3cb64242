package orch

import (
	"context"
	"github.com/agora-dev/agora/internal/compute/warm"
	"log/slog"
	"net/http"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/obs"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/store"
	"github.com/agora-dev/agora/internal/tracing"
)

// serveObs is serve's observability: the engine's observer, and the handlers the metrics
// listener (and the web listener, behind its token) serve.
type serveObs struct {
	log      *slog.Logger
	metrics  *obs.Metrics
	observer *obs.EngineObserver
	health   *obs.Health
	// tracer and spans export the runs' and tasks' spans; spans is nil with tracing off.
	tracer *tracing.Tracer
	spans  *obs.EngineSpans
	// Metrics, Healthz and Readyz are /metrics, /healthz and /readyz; set by attach.
	Metrics, Healthz, Readyz http.Handler
}

// newServeObs makes serve's logger, registry and engine observer, before the engine opens.
func newServeObs(ctx context.Context, opts *orchServeOptions) (*serveObs, error) {
	logger, err := obs.NewLogger(opts.f.IO.ErrOut, opts.logFormat, slog.LevelInfo)
	if err != nil {
		return nil, err
	}
	tracer, err := opts.f.Tracer(ctx)
	if err != nil {
		return nil, err
	}
	m := obs.NewMetrics()
	o := &serveObs{log: logger, metrics: m, observer: &obs.EngineObserver{Metrics: m, Log: logger}, tracer: tracer, spans: obs.NewEngineSpans(tracer)}
	if o.spans != nil {
		// Only when on: a nil *EngineSpans in the interface would still be a call per batch.
		o.observer.Spans = o.spans
	}
	return o, nil
}

// attach registers the collectors that read the engine and the databases when scraped.
// warmCounts, when not nil, are the warm slots serve holds.
func (o *serveObs) attach(eng *orch.Engine, orchDB, mainDB *store.DB, records *dispatch.Records, warmCounts func() []warm.Counts) {
	obs.NewAuditFeed(o.metrics, mainDB, records, o.log)
	dbs := []obs.NamedDB{{Name: "orch.db", DB: orchDB}, {Name: "agora.db", DB: mainDB}}
	// Fixed collectors with names of their own: registering them cannot fail.
	o.metrics.Registry().MustRegister(obs.EngineGauges{Engine: eng}, obs.CheckpointAge{DBs: dbs})
	if warmCounts != nil {
		o.metrics.Registry().MustRegister(obs.WarmSlots{Counts: warmCounts})
	}
	o.health = &obs.Health{Engine: eng, DBs: dbs, Log: o.log}
	o.Metrics, o.Healthz, o.Readyz = o.metrics.Handler(), obs.Healthz(), o.health.Readyz()
}

// mount is what the web listener serves behind its token and login.
func (o *serveObs) mount() map[string]http.Handler {
	return map[string]http.Handler{"GET /metrics": o.Metrics, "GET /healthz": o.Healthz, "GET /readyz": o.Readyz}
}

// serveMetrics serves /metrics, /healthz and /readyz on addr until ctx ends; addr "" serves
// nothing. The listener has no token: it is loopback unless --metrics-allow-remote, and
// answers only requests whose Host and Origin name it (or one of allowHosts).
func (o *serveObs) serveMetrics(ctx context.Context, addr string, allowHosts []string) error {
	if addr == "" {
		return nil
	}
	return obs.ServeListener(ctx, obs.ListenerConfig{Addr: addr, AllowHosts: allowHosts, Handlers: o.mount(), Log: o.log})
}
