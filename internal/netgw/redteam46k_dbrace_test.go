package netgw_test

// Attack (c) on the kept uploads, at the database: the keep's insert racing the dispatch's end in
// agora.db's real schema (internal/agoradb: dispatch's triggers delete the session row, whose
// own triggers delete the kept row), outside the gateway's locks.

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/agoradb"
	"github.com/agora-dev/agora/internal/blob"
	"github.com/agora-dev/agora/internal/netgw"
	"github.com/agora-dev/agora/internal/store"
)

func rt46kDispatch(t *testing.T, db *store.DB, id string) {
	t.Helper()
	_, err := db.SQL().Exec(`INSERT INTO dispatches(id, state, subagent, subagent_digest, envs, target, sandbox, network,
		input_digest, timeout_ms, actor, created_at)
		VALUES (?, 'started', 'fixer', 'sha256:0000000000000000000000000000000000000000000000000000000000000000', '[]', 'k8s', 'pod', 'none',
		'sha256:0000000000000000000000000000000000000000000000000000000000000000', 1000, 'alice', '2026-11-27T00:00:00Z')`, id)
	if err != nil {
		t.Fatal(err)
	}
}

func rt46kSum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// TestRedTeam46K_DispatchEndRacesTheKeepInAgoraDB — the keep's insert (KeepUpload, which checks
// the session row in the same statement) races, without any gateway lock, each way a session
// ends in agora.db: the dispatch's end (state), its deletion (retention), the session's
// replacement by another token. Whatever order SQLite serialises them in, no kept row may
// outlive the session it was kept for; and after the end, no keep or session is accepted.
func TestRedTeam46K_DispatchEndRacesTheKeepInAgoraDB(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "agora.db"), agoradb.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bucket, err := blob.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	up := &netgw.DBUploads{DB: db, Blobs: bucket}
	sessions := &netgw.DBSessions{DB: db}
	sum1, sum2 := strings.Repeat("1", 64), strings.Repeat("2", 64)
	ends := map[string]func(id string) error{
		"ended": func(id string) error {
			return db.Tx(ctx, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `UPDATE dispatches SET state = 'failed' WHERE id = ?`, id)
				return err
			})
		},
		"deleted": func(id string) error {
			return db.Tx(ctx, func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `DELETE FROM dispatches WHERE id = ?`, id)
				return err
			})
		},
		"replaced": func(id string) error { return sessions.PutSession(ctx, id, sum2, []byte(`{}`)) },
	}
	// In order first (the triggers chain through the session row), then racing.
	for how, end := range ends {
		id := "01RT46KORDER" + strings.ToUpper(how)
		rt46kDispatch(t, db, id)
		if err := sessions.PutSession(ctx, id, sum1, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		body := []byte("kept before " + how)
		if err := up.KeepUpload(ctx, id, sum1, "out", rt46kSum(body), body); err != nil {
			t.Fatalf("%s: keep: %v", how, err)
		}
		if err := end(id); err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		if _, _, err := up.KeptUpload(ctx, id, "out"); !errors.Is(err, netgw.ErrNoUpload) {
			t.Errorf("%s after the keep: the kept upload %v, want none", how, err)
		}
		if err := up.KeepUpload(ctx, id, sum1, "out", rt46kSum(body), body); !errors.Is(err, netgw.ErrNoSession) {
			t.Errorf("%s: a keep under the old token after it: %v, want ErrNoSession", how, err)
		}
		if how != "replaced" {
			if err := sessions.PutSession(ctx, id, sum1, []byte(`{}`)); err == nil {
				t.Errorf("%s: the session stored again for a dispatch that is not live", how)
			}
		}
	}
	for i := range 90 {
		how := []string{"ended", "deleted", "replaced"}[i%3]
		id := fmt.Sprintf("01RT46KRACE%03d", i)
		rt46kDispatch(t, db, id)
		if err := sessions.PutSession(ctx, id, sum1, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		body := []byte("raced " + id)
		start := make(chan struct{})
		var wg sync.WaitGroup
		var kerr, eerr error
		wg.Go(func() { <-start; kerr = up.KeepUpload(ctx, id, sum1, "out", rt46kSum(body), body) })
		wg.Go(func() { <-start; eerr = ends[how](id) })
		close(start)
		wg.Wait()
		if eerr != nil {
			t.Fatalf("%s %s: %v", how, id, eerr)
		}
		if kerr != nil && !errors.Is(kerr, netgw.ErrNoSession) {
			t.Fatalf("%s %s: keep: %v", how, id, kerr)
		}
		if _, _, err := up.KeptUpload(ctx, id, "out"); !errors.Is(err, netgw.ErrNoUpload) {
			t.Errorf("%s %s (keep %v): a kept row outlived its session: %v", how, id, kerr, err)
		}
	}
	var n int
	if err := db.SQL().QueryRow(`SELECT count(*) FROM gateway_uploads u WHERE NOT EXISTS
		(SELECT 1 FROM gateway_sessions s WHERE s.dispatch_id = u.dispatch_id AND s.token_sha256 = ?)`, sum1).Scan(&n); err != nil || n != 0 {
		t.Errorf("kept rows without the session they were kept for: %d (%v)", n, err)
	}
}
