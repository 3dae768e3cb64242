package retention_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/retention"
	"github.com/agora-dev/agora/internal/store"
)

// now is the tests' fixed clock: a dispatch "ended 100 days ago" ended 100 days before it.
var now = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

type testHome struct {
	dir   string
	db    *store.DB
	blobs *blob.Store
	log   *audit.Log
}

func newHome(t testing.TB) *testHome {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(context.Background(), filepath.Join(dir, "agora.db"), agoradb.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	bs, err := blob.Open(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	return &testHome{dir: dir, db: db, blobs: bs, log: audit.New(func() time.Time { return now })}
}

func (h *testHome) sweeper(p config.RetentionPolicy) *retention.Sweeper {
	path := filepath.Join(h.dir, "orch", "orch.db")
	return &retention.Sweeper{DB: h.db, OrchDB: path, Blobs: h.blobs, Policy: p,
		Log: h.log, Now: func() time.Time { return now },
		OpenOrch: func(ctx context.Context) (*store.DB, error) { return store.Open(ctx, path, orch.Migrations()) }}
}

// put stores b and backdates the blob file to when, as a blob stored then would be.
func (h *testHome) put(t testing.TB, b []byte, when time.Time) digest.Digest {
	t.Helper()
	d, err := h.blobs.Put(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(h.blobPath(d), when, when); err != nil {
		t.Fatal(err)
	}
	return d
}

func (h *testHome) blobPath(d digest.Digest) string {
	return filepath.Join(h.dir, "blobs", "sha256", d.Hex()[:2], d.Hex())
}

func (h *testHome) has(d digest.Digest) bool {
	_, err := os.Lstat(h.blobPath(d))
	return err == nil
}

// disp is a dispatch row as internal/dispatch writes it, with the products that matter here.
type disp struct {
	id, state      string
	created, ended string // "" : not set
	parent         string
	input          digest.Digest
	patch, stdout  digest.Digest
	outputs        map[string]digest.Digest
	transcript     digest.Digest
	inputFiles     map[string]digest.Digest // input:KEY/PATH
}

const ts = "2006-01-02T15:04:05.000000000Z07:00"

func ago(days int) string { return now.Add(-time.Duration(days) * 24 * time.Hour).Format(ts) }

func (h *testHome) insert(t testing.TB, d disp) {
	t.Helper()
	art := func(dg digest.Digest) any {
		if dg == "" {
			return nil
		}
		return map[string]any{"digest": dg, "size": 3}
	}
	res := map[string]any{"outputs": []any{}}
	if d.patch != "" {
		res["patch"] = art(d.patch)
	}
	if d.stdout != "" {
		res["stdout"] = art(d.stdout)
	}
	if d.transcript != "" {
		res["transcript"] = art(d.transcript)
	}
	var outs []any
	for p, dg := range d.outputs {
		outs = append(outs, map[string]any{"path": p, "digest": dg, "size": 3})
	}
	if outs != nil {
		res["outputs"] = outs
	}
	result, _ := json.Marshal(res)
	if d.state == "accepted" || d.state == "started" {
		result = nil
	}
	inputs := []any{}
	for k, dg := range d.inputFiles {
		inputs = append(inputs, map[string]any{"key": k, "select": "patch", "from_dispatch": "up", "files": []any{map[string]any{"path": "patch.diff", "digest": dg, "size": 3}}})
	}
	in, _ := json.Marshal(inputs)
	if d.created == "" {
		d.created = d.ended
	}
	if d.input == "" {
		d.input = h.put(t, []byte("input of "+d.id), now.Add(-400*24*time.Hour))
	}
	_, err := h.db.SQL().Exec(`INSERT INTO dispatches(id, state, subagent, subagent_digest, envs, target, sandbox, network,
		input_digest, timeout_ms, actor, created_at, ended_at, parent_id, result, inputs)
		VALUES (?, ?, 'fixer', 'sha256:0000000000000000000000000000000000000000000000000000000000000000', '[]', 'local', 'bwrap', 'none',
		?, 1000, 'alice', ?, ?, ?, ?, ?)`, d.id, d.state, string(d.input), d.created, d.ended, d.parent, string(result), string(in))
	if err != nil {
		t.Fatal(err)
	}
}

func count(t testing.TB, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

var policy = config.RetentionPolicy{Blobs: 90 * 24 * time.Hour, Logs: 30 * 24 * time.Hour}
