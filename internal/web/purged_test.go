package web

import (
	"context"
	"database/sql"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
)

// TestServer_PurgedRunSaysSo: a run retention purged from orch.db (its retention.run_purged
// entry in orch.db's log) answers 404 saying it was purged by retention, when and why, on
// its page and its API; a run that never was is a bare "not found".
func TestServer_PurgedRunSaysSo(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	err := e.orch.db.Tx(ctx, func(tx *sql.Tx) error {
		_, err := audit.New(nil).AppendAll(ctx, tx, []audit.Entry{{Actor: "system", Kind: entry.RetentionRunPurged, Subject: entry.Run("gone"),
			Details: map[string]any{"role": "retention-sweep", "why": "retention.runs 180d: ended 2026-01-01T00:00:00Z"}}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want, not string }{
		{"/runs/gone", `run "gone" not found (purged by retention at`, ""},
		{"/api/runs/gone", "retention.runs 180d: ended 2026-01-01", ""},
		{"/runs/never", "not found", "purged"},
	} {
		req, _ := http.NewRequest("GET", e.base+tc.path, nil)
		req.Header.Set("Authorization", "Bearer "+readToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), tc.want) || tc.not != "" && strings.Contains(string(b), tc.not) {
			t.Errorf("GET %s: %d %q", tc.path, resp.StatusCode, b)
		}
	}
}
