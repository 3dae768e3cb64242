package obs

import (
	"context"
	"database/sql"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/store"
)

// BenchmarkScrape is one GET /metrics of serve's registry (the engine's metrics, the gauges,
// checkpoint age and the audit feed over a real agora.db holding 10,000 gateway, tool,
// egress and MCP entries, already caught up), plus 50 new entries per scrape for the feed.
func BenchmarkScrape(b *testing.B) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(b.TempDir(), "agora.db"), agoradb.Migrations())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	log := audit.New(nil)
	entries := func(n int) []audit.Entry {
		var es []audit.Entry
		for i := range n {
			switch i % 4 {
			case 0:
				es = append(es, audit.Entry{Actor: "dispatch/D w@sha256:00", Kind: "tool.gateway", Subject: "dispatch/D",
					Details: map[string]any{"route": "model.chat", "decision": "allowed", "input_tokens": int64(100), "output_tokens": int64(20), "cached_tokens": int64(0), "model": "gpt-x", "cost_nano_usd": int64(1000)}})
			case 1:
				es = append(es, audit.Entry{Actor: "dispatch/D w@sha256:00", Kind: "tool.call", Subject: "dispatch/D", Details: map[string]any{"tool": "read_file", "decision": "allowed"}})
			case 2:
				es = append(es, audit.Entry{Actor: "dispatch/D w@sha256:00", Kind: "net.connect", Subject: "dispatch/D", Details: map[string]any{"decision": "deny"}})
			default:
				es = append(es, audit.Entry{Actor: "claude", Kind: "mcp.tool.call", Subject: "mcp/agora_dispatch", Details: map[string]any{"tool": "agora_dispatch", "decision": "allowed"}})
			}
		}
		return es
	}
	appendAll := func(es []audit.Entry) {
		if err := db.Tx(ctx, func(tx *sql.Tx) error { _, err := log.AppendAll(ctx, tx, es); return err }); err != nil {
			b.Fatal(err)
		}
	}
	appendAll(entries(10000))
	m := NewMetrics()
	NewAuditFeed(m, db, nil, nil)
	m.Registry().MustRegister(EngineGauges{Engine: idleEngine{}}, CheckpointAge{DBs: []NamedDB{{Name: "agora.db", DB: db}}})
	h := m.Handler()
	scrape := func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if rec.Code != 200 {
			b.Fatalf("status %d", rec.Code)
		}
	}
	scrape() // the first scrape reads the whole log
	more := entries(50)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		appendAll(more)
		b.StartTimer()
		scrape()
	}
}
