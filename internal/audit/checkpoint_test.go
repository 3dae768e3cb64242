package audit_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/audittest"
	"github.com/agora-dev/agora/internal/audit/verify"
)

func TestCheckpointer_Checkpoint(t *testing.T) {
	f := newFixture(t)
	appendN(t, f.db, 0, 13)
	res := f.checkpoint(t)
	if !res.Created || res.Checkpoint.Size != 13 {
		t.Fatalf("got created %v size %d, want a new checkpoint of 13", res.Created, res.Checkpoint.Size)
	}
	// An independent reader: x/mod's note opens it, and the root matches tlog's tree hash of
	// the entries as stored.
	v, err := note.NewVerifier(f.vkey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(res.Checkpoint.Note, note.VerifierList(v))
	if err != nil {
		t.Fatalf("x/mod/sumdb/note rejects our checkpoint: %v", err)
	}
	lines := strings.Split(n.Text, "\n")
	if want := v.Name() + "/agora.db"; lines[0] != want || lines[1] != "13" {
		t.Errorf("checkpoint body %q, want origin %q and size 13", n.Text, want)
	}
	th, err := tlog.TreeHash(13, tlogReader(t, f))
	if err != nil {
		t.Fatal(err)
	}
	if got := lines[2]; got != tlogBase64(th) {
		t.Errorf("checkpoint root %s, tlog tree hash %s", got, tlogBase64(th))
	}

	again := f.checkpoint(t)
	if again.Created || string(again.Checkpoint.Note) != string(res.Checkpoint.Note) {
		t.Errorf("a checkpoint with no new entries: got created %v, want the same checkpoint", again.Created)
	}
	appendN(t, f.db, 13, 4)
	next := f.checkpoint(t)
	if !next.Created || next.Checkpoint.Size != 17 {
		t.Errorf("got created %v size %d, want a new checkpoint of 17", next.Created, next.Checkpoint.Size)
	}
}

func TestCheckpointer_EmptyLog(t *testing.T) {
	f := newFixture(t)
	res := f.checkpoint(t)
	if res.Checkpoint.Size != 0 {
		t.Errorf("got size %d, want 0", res.Checkpoint.Size)
	}
	if _, err := f.cp.Export(t.Context(), audit.Selection{}); !errors.Is(err, audit.ErrNoEntries) {
		t.Errorf("export of an empty log: got %v, want ErrNoEntries", err)
	}
}

func TestCheckpointer_Due(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name       string
		before     int // entries before the checkpoint (-1: no checkpoint)
		after      int
		wait       time.Duration
		want       bool
		wantWrites bool
	}{
		{"empty log", -1, 0, 2 * time.Hour, false, false},
		{"few entries, no checkpoint, recent", -1, 3, time.Minute, false, false},
		{"few entries, no checkpoint, old", -1, 3, 2 * time.Hour, true, true},
		{"every reached, no checkpoint", -1, 10, 0, true, true},
		{"nothing new, interval passed", 5, 0, 2 * time.Hour, false, false},
		{"few new, recent", 5, 9, time.Minute, false, false},
		{"every reached", 5, 10, 0, true, true},
		{"few new, interval passed", 5, 1, time.Hour, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := now
			f := newFixture(t)
			cp, err := audit.NewCheckpointer(f.db, audit.CheckpointerOptions{
				LogName: "agora.db", Signer: f.signer, VerifierKey: f.vkey,
				Every: 10, Interval: time.Hour, Now: func() time.Time { return clock },
			})
			if err != nil {
				t.Fatal(err)
			}
			if tt.before >= 0 {
				appendAt(t, f, 0, tt.before, clock)
				if _, err := cp.Checkpoint(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			appendAt(t, f, max(tt.before, 0), tt.after, clock)
			clock = clock.Add(tt.wait)
			got, err := cp.Due(t.Context())
			if err != nil || got != tt.want {
				t.Fatalf("Due: got %v (%v), want %v", got, err, tt.want)
			}
			res, err := cp.MaybeCheckpoint(t.Context())
			if err != nil || (res != nil) != tt.wantWrites {
				t.Errorf("MaybeCheckpoint: got %v (%v), want a checkpoint: %v", res, err, tt.wantWrites)
			}
		})
	}
}

func appendAt(tb testing.TB, f *fixture, from, n int, at time.Time) {
	tb.Helper()
	l := audit.New(func() time.Time { return at })
	for i := from; i < from+n; i++ {
		err := f.db.Tx(context.Background(), func(tx *sql.Tx) error {
			_, err := l.Append(context.Background(), tx, audit.Entry{Kind: "catalog.register", Subject: "x"})
			return err
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
}

func TestNewCheckpointer_RefusesMismatchedKeys(t *testing.T) {
	f := newFixture(t)
	_, otherPub := audittest.NewKey(t)
	_, err := audit.NewCheckpointer(f.db, audit.CheckpointerOptions{LogName: "agora.db", Signer: f.signer, VerifierKey: otherPub})
	if err == nil || !strings.Contains(err.Error(), "is not the public key of audit.key") {
		t.Errorf("got %v, want a key mismatch error", err)
	}
}

// TestCheckpointer_RefusesCheckpointByAnotherKey: a checkpoint in the table that our key did
// not sign stops the checkpointer.
func TestCheckpointer_RefusesCheckpointByAnotherKey(t *testing.T) {
	f := newFixture(t)
	appendN(t, f.db, 0, 3)
	s, v := audittest.NewKey(t)
	other, err := audit.NewCheckpointer(f.db, audit.CheckpointerOptions{LogName: "agora.db", Signer: s, VerifierKey: v})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Checkpoint(t.Context()); err != nil {
		t.Fatal(err)
	}
	appendN(t, f.db, 3, 1)
	if _, err := f.cp.Checkpoint(t.Context()); !errors.Is(err, audit.ErrTampered) {
		t.Errorf("got %v, want ErrTampered", err)
	}
}

func TestCheckpointer_RefusesRewrittenLog(t *testing.T) {
	for _, extra := range []int{0, 2} {
		f := newFixture(t)
		appendN(t, f.db, 0, 8)
		f.checkpoint(t)
		// Rewrite history consistently (entries, nodes, tree), keeping the checkpoints.
		for _, q := range []string{`DELETE FROM audit_entries`, `DELETE FROM audit_nodes`, `DELETE FROM audit_tree`} {
			if _, err := f.db.SQL().Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		appendN(t, f.db, 100, 8+extra)
		_, err := f.cp.Checkpoint(t.Context())
		var ie *audit.InconsistencyError
		if !errors.Is(err, audit.ErrInconsistent) || !errors.As(err, &ie) || ie.Where != "database" || ie.Earlier.Size != 8 {
			t.Errorf("extra %d: got %v, want an InconsistencyError against checkpoint 8 in the database", extra, err)
		}
	}
}

func TestCheckpointer_RefusesTruncatedLog(t *testing.T) {
	f := newFixture(t)
	appendN(t, f.db, 0, 8)
	f.checkpoint(t)
	for _, q := range []string{`DELETE FROM audit_entries WHERE seq >= 5`, `DELETE FROM audit_nodes`, `DELETE FROM audit_tree`} {
		if _, err := f.db.SQL().Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.cp.Checkpoint(t.Context()); !errors.Is(err, audit.ErrInconsistent) {
		t.Errorf("got %v, want ErrInconsistent", err)
	}
}

func TestCheckpointer_Run(t *testing.T) {
	f := newFixture(t)
	cp, err := audit.NewCheckpointer(f.db, audit.CheckpointerOptions{
		LogName: "agora.db", Signer: f.signer, VerifierKey: f.vkey, Every: 3, Interval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- cp.Run(ctx, 5*time.Millisecond) }()
	appendN(t, f.db, 0, 4)
	deadline := time.Now().Add(5 * time.Second)
	for {
		latest, err := audit.LatestCheckpoint(t.Context(), f.db.SQL())
		if err != nil {
			t.Fatal(err)
		}
		if latest != nil && latest.Size >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run wrote no checkpoint within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
}

func tlogReader(tb testing.TB, f *fixture) tlog.HashReader {
	tb.Helper()
	rows, err := f.db.SQL().Query(`SELECT entry FROM audit_entries ORDER BY seq`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var stored []tlog.Hash
	r := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = stored[x]
		}
		return out, nil
	})
	for n := int64(0); rows.Next(); n++ {
		var e []byte
		if err := rows.Scan(&e); err != nil {
			tb.Fatal(err)
		}
		hs, err := tlog.StoredHashes(n, e, r)
		if err != nil {
			tb.Fatal(err)
		}
		stored = append(stored, hs...)
	}
	return r
}

func tlogBase64(h tlog.Hash) string {
	c := verify.Checkpoint{Hash: h[:]}
	return strings.Split(string(c.Marshal()), "\n")[2]
}
