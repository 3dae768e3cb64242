package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/store"
)

// gcHome is an auditHome with retention set and one dispatch that ended 100 days ago, its
// input and patch stored (and dated) then, as agora.db records them.
func gcHome(t *testing.T) (env map[string]string, patchPath string) {
	t.Helper()
	env = auditHome(t, "retention: {blobs: 90d, logs: 30d}\n")
	home := env["AGORA_HOME"]
	bs, err := blob.Open(filepath.Join(home, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	then := time.Now().Add(-100 * 24 * time.Hour)
	path := func(d string) string {
		h := strings.TrimPrefix(d, "sha256:")
		return filepath.Join(home, "blobs", "sha256", h[:2], h)
	}
	in, _ := bs.Put([]byte(`{"prompt":"old"}`))
	patch, _ := bs.Put([]byte("--- a\n+++ b\n"))
	for _, d := range []string{string(in), string(patch)} {
		os.Chtimes(path(d), then, then)
	}
	db, err := store.Open(context.Background(), filepath.Join(home, "agora.db"), agoradb.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ended := then.UTC().Format(time.RFC3339Nano)
	if _, err := db.SQL().Exec(`INSERT INTO dispatches(id, state, subagent, subagent_digest, envs, target, sandbox, network,
		input_digest, timeout_ms, actor, created_at, ended_at, result) VALUES ('d-old', 'finished', 'fixer',
		'sha256:0000000000000000000000000000000000000000000000000000000000000000', '[]', 'local', 'bwrap', 'none', ?, 1000,
		'tester', ?, ?, ?)`, string(in), ended, ended, `{"outputs":[],"patch":{"digest":"`+string(patch)+`","size":12}}`); err != nil {
		t.Fatal(err)
	}
	return env, path(string(patch))
}

// TestGC_DryRunThenPurgeThenVerify: `agora gc --dry-run` lists the aged-out products and
// changes nothing; `agora gc` purges them (the catalog's blobs stay); a bundle exported after
// verifies and names them; the same bundle with the purged list edited does not.
func TestGC_DryRunThenPurgeThenVerify(t *testing.T) {
	env, patchPath := gcHome(t)
	home := env["AGORA_HOME"]
	blobsBefore := countFiles(t, filepath.Join(home, "blobs"))
	r := runAgora(t, env, "gc", "--dry-run", "-o", "json")
	var rep struct {
		DryRun bool `json:"dry_run"`
		Items  []struct{ Dispatch, Product string }
		Result any
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &rep) != nil || !rep.DryRun || len(rep.Items) != 2 || rep.Result != nil {
		t.Fatalf("gc --dry-run -o json: %+v", r)
	}
	if n := countFiles(t, filepath.Join(home, "blobs")); n != blobsBefore {
		t.Fatalf("the dry run changed the store: %d blobs, %d before", n, blobsBefore)
	}
	if r := runAgora(t, env, "gc", "--dry-run"); r.code != 0 || !strings.Contains(r.stdout, "d-old") || !strings.Contains(r.stdout, "patch") ||
		!strings.Contains(r.stderr, "would purge 2 products") {
		t.Fatalf("gc --dry-run: %+v", r)
	}
	if r := runAgora(t, env, "gc", "--actor", "ci-bot"); r.code != 0 || !strings.Contains(r.stderr, "purged 2 products") || !strings.Contains(r.stderr, "2 blobs deleted") {
		t.Fatalf("gc: %+v", r)
	}
	if _, err := os.Stat(patchPath); !os.IsNotExist(err) {
		t.Fatalf("the patch is still stored: %v", err)
	}
	if n := countFiles(t, filepath.Join(home, "blobs")); n != blobsBefore-2 {
		t.Fatalf("%d blobs left, want %d: only the dispatch's two go (the catalog's stay)", n, blobsBefore-2)
	}
	if r := runAgora(t, env, "audit", "log", "--kind", "retention.purged"); r.code != 0 || !strings.Contains(r.stdout, "ci-bot") || !strings.Contains(r.stdout, "dispatch/d-old") {
		t.Fatalf("audit log: %+v", r)
	}
	out := filepath.Join(t.TempDir(), "bundle.json")
	if r := runAgora(t, env, "audit", "checkpoint"); r.code != 0 {
		t.Fatalf("checkpoint: %+v", r)
	}
	if r := runAgora(t, env, "audit", "export", "--out", out); r.code != 0 {
		t.Fatalf("export: %+v", r)
	}
	r = runAgora(t, env, "verify", out)
	if r.code != 0 || !strings.Contains(r.stdout, "purged") || !strings.Contains(r.stdout, "d-old patch") {
		t.Fatalf("verify after a purge: %+v", r)
	}
	// The purged list with its patch removed by hand.
	var b map[string]any
	raw, _ := os.ReadFile(out)
	json.Unmarshal(raw, &b)
	list := b["purged"].([]any)
	var kept []any
	for _, p := range list {
		if p.(map[string]any)["product"] != "patch" {
			kept = append(kept, p)
		}
	}
	b["purged"] = kept
	edited, _ := json.Marshal(b)
	os.WriteFile(out, edited, 0o600)
	if r := runAgora(t, env, "verify", out); r.code != 5 || !strings.Contains(r.stdout, "does not name it") {
		t.Fatalf("verify of an edited purged list: %+v", r)
	}
}

// TestGC_NoRetentionPurgesNothing: without retention in agora.yaml, gc says so and purges nothing.
func TestGC_NoRetentionPurgesNothing(t *testing.T) {
	env := auditHome(t, "")
	r := runAgora(t, env, "gc")
	if r.code != 0 || !strings.Contains(r.stderr, "sets no retention") || !strings.Contains(r.stderr, "purged 0 products") {
		t.Fatalf("gc: %+v", r)
	}
}

func countFiles(t *testing.T, dir string) int {
	n := 0
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n++
		}
		return nil
	})
	return n
}
