package obs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/store"
)

// DispatchRecords reads a dispatch record (dispatch.Records).
type DispatchRecords interface {
	Get(ctx context.Context, id string) (*dispatch.Record, error)
}

// AuditFeed derives the dispatch, gateway, model, tool, egress and MCP metrics from agora.db's
// audit log when scraped: each scrape reads the entries appended since the previous one (at
// most maxFeedEntries; a backlog is caught up over the next scrapes) and, for each dispatch
// that ended, its record. See the package documentation for why there and not where the
// events happen.
type AuditFeed struct {
	db      *store.DB
	records DispatchRecords
	m       *Metrics
	log     *slog.Logger

	mu   sync.Mutex
	next int64 // the first seq not yet read

	targets, subagents, models, tools, clients, routes, phases *labels
}

// maxFeedEntries bounds one scrape's read of the log.
const maxFeedEntries = 20000

// feedTimeout bounds one scrape's catch-up.
const feedTimeout = 5 * time.Second

// NewAuditFeed makes the feed and hooks it into m's scrape.
func NewAuditFeed(m *Metrics, db *store.DB, records DispatchRecords, log *slog.Logger) *AuditFeed {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &AuditFeed{db: db, records: records, m: m, log: log,
		targets: newLabels(32), subagents: newLabels(200), models: newLabels(50), tools: newLabels(100),
		clients: newLabels(50), routes: newLabels(32), phases: newLabels(32)}
	m.hooks = append(m.hooks, func() {
		ctx, cancel := context.WithTimeout(context.Background(), feedTimeout)
		defer cancel()
		if err := f.CatchUp(ctx); err != nil {
			m.feed.feedErrors.Inc()
			f.log.Warn("metrics: read agora.db's audit log", "err", err)
		}
	})
	return f
}

// feedKinds are the entry kinds whose details the feed reads; every other entry is only
// counted by kind.
func feedKind(kind string) bool {
	switch {
	case strings.HasPrefix(kind, entry.DispatchPrefix), strings.HasPrefix(kind, entry.ToolPrefix),
		kind == entry.NetConnect, kind == entry.NetRequest, strings.HasPrefix(kind, entry.MCPToolPrefix):
		return true
	}
	return false
}

// feedEntry is the part of an entry the feed reads.
type feedEntry struct {
	Actor   string         `json:"actor"`
	Kind    string         `json:"kind"`
	Subject string         `json:"subject"`
	Details map[string]any `json:"details"`
}

// CatchUp reads what was appended since the last call and counts it.
func (f *AuditFeed) CatchUp(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	rows, err := f.db.SQL().QueryContext(ctx, `SELECT seq, kind, entry FROM audit_entries WHERE seq >= ? ORDER BY seq LIMIT ?`, f.next, maxFeedEntries)
	if err != nil {
		return fmt.Errorf("read audit log: %w", err)
	}
	var ended []string
	for rows.Next() {
		var seq int64
		var kind string
		var body []byte
		if err := rows.Scan(&seq, &kind, &body); err != nil {
			rows.Close()
			return fmt.Errorf("read audit log: %w", err)
		}
		f.next = seq + 1
		f.m.appends.WithLabelValues("agora.db", f.m.kinds.Of(kind)).Inc()
		if !feedKind(kind) {
			continue
		}
		var e feedEntry
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&e); err != nil {
			continue // verify reports a damaged entry; metrics skip it
		}
		if id := f.count(&e); id != "" {
			ended = append(ended, id)
		}
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return fmt.Errorf("read audit log: %w", err)
	}
	for _, id := range ended {
		if err := f.ended(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// count counts one entry; it returns the dispatch id when the entry ends a dispatch.
func (f *AuditFeed) count(e *feedEntry) (endedID string) {
	fm := &f.m.feed
	d := e.Details
	switch e.Kind {
	case entry.DispatchAccepted:
		fm.dispatchesStarted.WithLabelValues(f.targets.Of(str(d[entry.KeyTarget]))).Inc()
	case entry.DispatchFinished, entry.DispatchFailed, entry.DispatchCancelled, entry.DispatchNeedsInput:
		state := strings.TrimPrefix(e.Kind, entry.DispatchPrefix)
		fm.dispatchesEnded.WithLabelValues(state, f.m.reasons.Of(str(d[entry.KeyReason]))).Inc()
		id, _ := entry.DispatchOf(e.Subject)
		return id
	case entry.ToolGateway:
		g := entry.ReadGatewayCall(d)
		fm.gateway.WithLabelValues(f.routes.Of(g.Route), f.m.kinds.Of(g.Decision)).Inc()
		if g.Usage {
			sub, model := f.subagents.Of(nameOf(entry.RoleOf(e.Actor))), f.models.Of(g.Model)
			fm.modelCalls.WithLabelValues(sub, model).Inc()
			fm.modelTokens.WithLabelValues(sub, model, "input").Add(g.InputTokens)
			fm.modelTokens.WithLabelValues(sub, model, "output").Add(g.OutputTokens)
			fm.modelTokens.WithLabelValues(sub, model, "cached").Add(g.CachedTokens)
			fm.modelCost.WithLabelValues(sub, model).Add(g.CostNanoUSD / 1e9)
		}
	case entry.ToolGatewayRefused:
		g := entry.ReadGatewayCall(d)
		fm.gateway.WithLabelValues(f.routes.Of(g.Route), "denied").Add(g.Count)
	case entry.ToolCall:
		fm.toolCalls.WithLabelValues(f.tools.Of(str(d[entry.KeyTool])), f.m.kinds.Of(str(d[entry.KeyDecision]))).Inc()
	case entry.NetConnect, entry.NetRequest:
		fm.egress.WithLabelValues(strings.TrimPrefix(e.Kind, entry.NetPrefix), f.m.kinds.Of(str(d[entry.KeyDecision]))).Inc()
	case entry.MCPToolCall, entry.MCPToolDenied:
		fm.mcp.WithLabelValues(f.tools.Of(str(d[entry.KeyTool])), f.clients.Of(e.Actor), f.m.kinds.Of(str(d[entry.KeyDecision]))).Inc()
	}
	return ""
}

// ended observes an ended dispatch's timings from its record.
func (f *AuditFeed) ended(ctx context.Context, id string) error {
	if f.records == nil {
		return nil
	}
	r, err := f.records.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("read dispatch %s: %w", id, err)
	}
	fm := &f.m.feed
	if r.StartedAt != nil {
		fm.startup.Observe(r.StartedAt.Sub(r.CreatedAt).Seconds())
	}
	if r.EndedAt != nil {
		fm.duration.WithLabelValues(r.State).Observe(r.EndedAt.Sub(r.CreatedAt).Seconds())
	}
	if r.Result != nil {
		for _, p := range r.Result.Phases {
			fm.phase.WithLabelValues(f.phases.Of(p.Name)).Observe(float64(p.MS) / 1000)
		}
	}
	return nil
}
