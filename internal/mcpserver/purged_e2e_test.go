package mcpserver_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/store"
)

// TestPurgedRun_SaysSoOverCLIAndMCP: with serve running, `agora gc`
// purges a sealed run that ended 200 days ago; then `agora orch status` (answered by serve's
// engine) and the MCP status tool both say it was purged by retention, by whom and why, in
// the one not-found wording (the CLI exits 6).
func TestPurgedRun_SaysSoOverCLIAndMCP(t *testing.T) {
	home := newHome(t)
	cs := stdioSession(t, home)
	serveOrch(t, home)
	db, err := store.Open(context.Background(), filepath.Join(home, "orch", "orch.db"), orch.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	ended := time.Now().Add(-200 * 24 * time.Hour).UTC().Format(time.RFC3339Nano)
	if _, err := db.SQL().Exec(`INSERT INTO runs(id, name, digest, state, actor, created_at, ended_at, sealed_at)
		VALUES ('r-old', 'nightly', 'sha256:11', 'succeeded', 'tester', ?, ?, ?)`, ended, ended, ended); err != nil {
		t.Fatal(err)
	}
	db.Close()
	yaml := filepath.Join(home, "agora.yaml")
	cfg, err := os.ReadFile(yaml)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if err := os.WriteFile(yaml, append(cfg, []byte("\nretention: {runs: 180d}\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	agora(t, home, []string{"USER=ops"}, "gc")

	cliMsg, code := cliError(t, home, "orch", "status", "r-old")
	res := call(t, cs, "agora_orchestrator_status", map[string]any{"run_id": "r-old"})
	if !strings.HasPrefix(cliMsg, `run "r-old" not found (purged by retention at `) || !strings.Contains(cliMsg, "retention.runs 180d: ended") ||
		code != 6 || !res.IsError || text(res) != cliMsg {
		t.Fatalf("CLI %q (exit %d), MCP %q (error %v): want both to say the run was purged by retention", cliMsg, code, text(res), res.IsError)
	}
}
