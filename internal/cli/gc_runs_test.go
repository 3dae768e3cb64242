package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/store"
)

// gcRunsHome is an auditHome with retention.runs 180d and an orch.db (the real schema) holding
// a sealed run that ended 200 days ago, one that ended 10 days ago, and a failed run of 200
// days ago that was never sealed.
func gcRunsHome(t *testing.T) map[string]string {
	t.Helper()
	env := auditHome(t, "retention: {runs: 180d}\n")
	path := filepath.Join(env["AGORA_HOME"], "orch", "orch.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(context.Background(), path, orch.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	at := func(days int) string {
		return time.Now().Add(-time.Duration(days) * 24 * time.Hour).UTC().Format(time.RFC3339Nano)
	}
	for _, r := range []struct {
		id, state, ended, sealed string
	}{{"r-old", "succeeded", at(200), at(200)}, {"r-young", "succeeded", at(10), at(10)}, {"r-failed", "failed", at(200), ""}} {
		if _, err := db.SQL().Exec(`INSERT INTO runs(id, name, digest, state, actor, created_at, ended_at, sealed_at)
			VALUES (?, 'nightly', 'sha256:11', ?, 'tester', ?, ?, ?)`, r.id, r.state, at(300), r.ended, r.sealed); err != nil {
			t.Fatal(err)
		}
		if _, err := db.SQL().Exec(`INSERT INTO run_plans(run_id, plan) VALUES (?, '{"version":1,"name":"nightly","tasks":[{"id":"build","subagent":"fixer"}]}')`, r.id); err != nil {
			t.Fatal(err)
		}
		if _, err := db.SQL().Exec(`INSERT INTO tasks(run_id, idx, id, state) VALUES (?, 0, 'build', 'succeeded')`, r.id); err != nil {
			t.Fatal(err)
		}
	}
	return env
}

// TestGC_Runs: `agora gc --dry-run` lists the aged-out run (text and JSON) and says why the
// old failed run stays; `agora gc` purges it; `agora orch status` of it then says it was
// purged by retention, and a run that never was is plainly not found.
func TestGC_Runs(t *testing.T) {
	env := gcRunsHome(t)
	r := runAgora(t, env, "gc", "--dry-run", "-o", "json")
	var rep struct {
		Runs     string `json:"retention_runs"`
		RunItems []struct {
			Run, Name, State string
			Tasks            int
		} `json:"runs"`
		RunsKept struct {
			Unsealed int `json:"unsealed"`
		} `json:"runs_kept"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rep) != nil || rep.Runs != "180d" || len(rep.RunItems) != 1 ||
		rep.RunItems[0].Run != "r-old" || rep.RunItems[0].Tasks != 1 || rep.RunsKept.Unsealed != 1 {
		t.Fatalf("gc --dry-run -o json: %+v (%+v)", r, rep)
	}
	r = runAgora(t, env, "gc", "--dry-run")
	if r.code != 0 || !strings.Contains(r.stdout, "RUN") || !strings.Contains(r.stdout, "r-old") || strings.Contains(r.stdout, "r-young") ||
		!strings.Contains(r.stderr, "would purge 1 orchestrator runs from orch.db (retention runs 180d)") ||
		!strings.Contains(r.stderr, "1 failed runs old enough are kept because they are not sealed") {
		t.Fatalf("gc --dry-run: %+v", r)
	}
	if r := runAgora(t, env, "orch", "status", "r-old"); r.code != 0 {
		t.Fatalf("status before the purge: %+v", r)
	}
	if r := runAgora(t, env, "gc", "--actor", "ci-bot"); r.code != 0 || !strings.Contains(r.stderr, "purged 1 orchestrator runs") {
		t.Fatalf("gc: %+v", r)
	}
	r = runAgora(t, env, "orch", "status", "r-old")
	if r.code == 0 || !strings.Contains(r.stderr, `run "r-old" not found (purged by retention at`) || !strings.Contains(r.stderr, "by ci-bot: retention.runs 180d") {
		t.Fatalf("status after the purge: %+v", r)
	}
	r = runAgora(t, env, "orch", "status", "r-never")
	if r.code == 0 || !strings.Contains(r.stderr, `run "r-never" not found`) || strings.Contains(r.stderr, "purged") {
		t.Fatalf("status of a run that never was: %+v", r)
	}
	if r := runAgora(t, env, "orch", "status", "r-young"); r.code != 0 {
		t.Fatalf("the young run: %+v", r)
	}
}
