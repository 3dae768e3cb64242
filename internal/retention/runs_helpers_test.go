package retention_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/store"
)

// runsPolicy keeps products forever and runs for 180 days.
var runsPolicy = config.RetentionPolicy{Runs: 180 * 24 * time.Hour}

// planBody is in every test run's stored plan: no retention entry may ever carry it.
const planBody = "PLAN-BODY-NEVER-IN-AUDIT"

// orchHome is the home's orch.db, with the real schema (orch.Migrations) and its audit log.
type orchHome struct {
	path string
	db   *store.DB
	log  *audit.Log
	// signer and key sign orch.db's checkpoints (one key for the home's life, as a home's).
	signer note.Signer
	key    string
}

func (h *testHome) orchDB(t testing.TB) *orchHome {
	t.Helper()
	path := filepath.Join(h.dir, "orch", "orch.db")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(context.Background(), path, orch.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &orchHome{path: path, db: db, log: audit.New(func() time.Time { return now }).SparseTree()}
}

// orun is a run as the engine leaves it in orch.db.
type orun struct {
	id, name, state string
	ended           string // "" : live
	sealed          bool
	tasks           int
}

// add writes run r (its run, plan, task, attempt and extension rows) and its submitted (and
// sealed) entries, in one transaction as the engine would.
func (o *orchHome) add(t testing.TB, r orun) {
	t.Helper()
	if r.name == "" {
		r.name = "nightly"
	}
	if r.state == "" {
		r.state = "succeeded"
	}
	sealed := ""
	if r.sealed {
		sealed = r.ended
	}
	err := o.db.Tx(context.Background(), func(tx *sql.Tx) error {
		if _, err := tx.Exec(`INSERT INTO runs(id, name, digest, state, actor, created_at, ended_at, sealed_at)
			VALUES (?, ?, 'sha256:1111111111111111111111111111111111111111111111111111111111111111', ?, 'alice', ?, ?, ?)`,
			r.id, r.name, r.state, ago(400), r.ended, sealed); err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO run_plans(run_id, plan) VALUES (?, ?)`, r.id, `{"name":"`+r.name+`","note":"`+planBody+`"}`); err != nil {
			return err
		}
		for i := range r.tasks {
			d := fmt.Sprintf("%s-d%d", r.id, i)
			if _, err := tx.Exec(`INSERT INTO tasks(run_id, idx, id, state, attempts, dispatch_id) VALUES (?, ?, ?, 'succeeded', 1, ?)`,
				r.id, i, fmt.Sprintf("t%d", i), d); err != nil {
				return err
			}
			if _, err := tx.Exec(`INSERT INTO attempts(dispatch_id, run_id, task_idx, number, state, fired_at, ended_at) VALUES (?, ?, ?, 1, 'succeeded', ?, ?)`,
				d, r.id, i, ago(400), r.ended); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(`INSERT INTO run_extensions(run_id, seq, cause, task, first, count, data) VALUES (?, 0, 'fan_out', 't0', ?, 0, '{}')`,
			r.id, r.tasks); err != nil {
			return err
		}
		es := []audit.Entry{{Actor: "alice", Kind: entry.RunSubmitted, Subject: entry.Run(r.id), Details: map[string]any{"name": r.name}}}
		if r.sealed {
			es = append(es, audit.Entry{Actor: "system", Kind: entry.RunSealed, Subject: entry.Run(r.id), Details: map[string]any{"state": r.state}})
		}
		_, err := o.log.AppendAll(context.Background(), tx, es)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rowsOf counts run id's rows in each of its tables.
func (o *orchHome) rowsOf(t testing.TB, id string) int {
	t.Helper()
	n := count(t, o.db.SQL(), `SELECT count(*) FROM runs WHERE id = ?`, id)
	for _, tbl := range []string{"tasks", "attempts", "run_plans", "run_extensions"} {
		n += count(t, o.db.SQL(), `SELECT count(*) FROM `+tbl+` WHERE run_id = ?`, id)
	}
	return n
}

// schedule adds a schedule whose last run is run.
func (o *orchHome) schedule(t testing.TB, name, run string) {
	t.Helper()
	if _, err := o.db.SQL().Exec(`INSERT INTO schedules(name, spec, zone, plan, digest, actor, created_at, last_run, next_due)
		VALUES (?, '@daily', 'UTC', '{}', 'sha256:00', 'alice', ?, ?, ?)`, name, ago(400), run, ago(-1)); err != nil {
		t.Fatal(err)
	}
}
