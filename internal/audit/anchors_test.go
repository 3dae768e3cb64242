package audit_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/anchor"
	"github.com/agora-dev/agora/internal/audit/audittest"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/store"
)

// anchoredSizes returns the sizes of the checkpoints recorded in an anchor file, in order.
func anchoredSizes(tb testing.TB, path string) []uint64 {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var sizes []uint64
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var rec struct{ Checkpoint []byte }
		if err := jsonUnmarshal(line, &rec); err != nil {
			tb.Fatal(err)
		}
		body := rec.Checkpoint[:bytes.Index(rec.Checkpoint, []byte("\n\n"))+1]
		c, err := verify.ParseCheckpoint(body)
		if err != nil {
			tb.Fatal(err)
		}
		sizes = append(sizes, c.Size)
	}
	return sizes
}

func TestFileAnchor_AppendsEachCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "anchor.jsonl")
	f := newFixture(t, anchor.NewFile(path, nil))
	appendN(t, f.db, 0, 3)
	res := f.checkpoint(t)
	if err := res.Err(); err != nil || len(res.Anchors) != 1 || res.Anchors[0].Evidence == nil {
		t.Fatalf("got anchors %+v (%v), want one evidence", res.Anchors, err)
	}
	if again := f.checkpoint(t); len(again.Anchors) != 0 {
		t.Errorf("re-running checkpoint anchored again: %+v", again.Anchors)
	}
	appendN(t, f.db, 3, 2)
	f.checkpoint(t)
	if got := anchoredSizes(t, path); len(got) != 2 || got[0] != 3 || got[1] != 5 {
		t.Errorf("anchor file holds checkpoints %v, want [3 5]", got)
	}
}

// TestFileAnchor_DetectsDatabaseRollback replaces agora.db with an older copy of itself: the
// anchor file is ahead of it, and stays ahead after the log grows past it again.
func TestFileAnchor_DetectsDatabaseRollback(t *testing.T) {
	dir := t.TempDir()
	anchorPath := filepath.Join(dir, "anchor.jsonl")
	f := newFixture(t, anchor.NewFile(anchorPath, nil))
	appendN(t, f.db, 0, 10)
	f.checkpoint(t)
	old := filepath.Join(dir, "old.db")
	if _, err := f.db.SQL().Exec(`VACUUM INTO ?`, old); err != nil {
		t.Fatal(err)
	}
	appendN(t, f.db, 10, 10)
	f.checkpoint(t)
	f.db.Close()
	for _, suffix := range []string{"-wal", "-shm"} {
		os.Remove(f.path + suffix)
	}
	if err := os.Rename(old, f.path); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(t.Context(), f.path, audit.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f.db = db
	f.cp = f.checkpointer(t, anchor.NewFile(anchorPath, nil))

	for _, n := range []int{1, 15} { // behind the anchor, then past it
		appendN(t, f.db, 100, n)
		res := f.checkpoint(t)
		var ie *audit.InconsistencyError
		if !res.Created || !errors.As(res.Err(), &ie) || ie.Where != "file:"+anchorPath || ie.Earlier.Size != 20 {
			t.Fatalf("after appending %d: got created %v, anchor error %v; want a stored checkpoint and an inconsistency with the file's checkpoint 20",
				n, res.Created, res.Err())
		}
	}
	if got := anchoredSizes(t, anchorPath); len(got) != 2 {
		t.Errorf("anchor file holds %v: a rolled-back log was appended to it", got)
	}
}

func TestFileAnchor_DetectsTruncation(t *testing.T) {
	tests := []struct {
		name    string
		damage  func(t *testing.T, f *fixture, anchorPath string)
		wantErr error
	}{
		{"anchor file truncated", func(t *testing.T, f *fixture, p string) {
			b, _ := os.ReadFile(p)
			if err := os.WriteFile(p, b[:bytes.IndexByte(b, '\n')+1], 0o644); err != nil {
				t.Fatal(err)
			}
		}, audit.ErrRollback},
		{"anchor file removed", func(t *testing.T, f *fixture, p string) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}, audit.ErrRollback},
		{"log truncated and its checkpoints with it", func(t *testing.T, f *fixture, p string) {
			for _, q := range []string{
				`DELETE FROM audit_entries WHERE seq >= 15`, `DELETE FROM audit_anchors WHERE size > 15`,
				`DELETE FROM audit_checkpoints WHERE size > 15`, `DELETE FROM audit_nodes`, `DELETE FROM audit_tree`,
			} {
				if _, err := f.db.SQL().Exec(q); err != nil {
					t.Fatal(err)
				}
			}
		}, audit.ErrInconsistent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			anchorPath := filepath.Join(t.TempDir(), "anchor.jsonl")
			f := newFixture(t, anchor.NewFile(anchorPath, nil))
			appendN(t, f.db, 0, 10)
			f.checkpoint(t)
			appendN(t, f.db, 10, 10)
			f.checkpoint(t)
			tt.damage(t, f, anchorPath)
			appendN(t, f.db, 50, 1)
			res := f.checkpoint(t)
			if !errors.Is(res.Err(), tt.wantErr) {
				t.Errorf("got anchor error %v, want %v", res.Err(), tt.wantErr)
			}
		})
	}
}

func TestRFC3161Anchor_Checkpoint(t *testing.T) {
	tsa := audittest.NewTSA(t)
	a, err := anchor.NewRFC3161(tsa.URL, tsa.CAPEM, audittest.LoopbackPolicy)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, a)
	appendN(t, f.db, 0, 4)
	res := f.checkpoint(t)
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	ev := res.Anchors[0].Evidence
	at, err := verify.CheckTimestamp(ev.Token, res.Checkpoint.Note, tsa.Pool)
	if err != nil || !at.Equal(ev.At) {
		t.Errorf("token: time %v (%v), want the evidence's %v", at, err, ev.At)
	}
	if tsa.Requests.Load() != 1 {
		t.Errorf("TSA answered %d requests, want 1", tsa.Requests.Load())
	}
}

func TestRFC3161Anchor_Refusals(t *testing.T) {
	tests := []struct {
		name   string
		policy egress.Policy
		setup  func(*audittest.TSA)
		want   string
	}{
		{"loopback without an egress allowance", egress.Policy{}, nil, "egress denied"},
		{"wrong nonce", audittest.LoopbackPolicy, func(t *audittest.TSA) { t.WrongNonce.Store(true) }, "nonce does not match"},
		{"HTTP error", audittest.LoopbackPolicy, func(t *audittest.TSA) { t.Status.Store(503) }, "HTTP 503"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tsa := audittest.NewTSA(t)
			if tt.setup != nil {
				tt.setup(tsa)
			}
			a, err := anchor.NewRFC3161(tsa.URL, tsa.CAPEM, tt.policy)
			if err != nil {
				t.Fatal(err)
			}
			f := newFixture(t, a)
			appendN(t, f.db, 0, 1)
			res := f.checkpoint(t)
			if !res.Created || res.Err() == nil || !strings.Contains(res.Err().Error(), tt.want) {
				t.Errorf("got created %v, anchor error %v; want the checkpoint stored and an error containing %q", res.Created, res.Err(), tt.want)
			}
		})
	}
}

func TestRFC3161Anchor_UntrustedTSA(t *testing.T) {
	tsa, other := audittest.NewTSA(t), audittest.NewTSA(t)
	a, err := anchor.NewRFC3161(tsa.URL, other.CAPEM, audittest.LoopbackPolicy)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, a)
	appendN(t, f.db, 0, 1)
	if err := f.checkpoint(t).Err(); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
		t.Errorf("got %v, want the TSA chain refused", err)
	}
}

func TestCommandAnchor_Checkpoint(t *testing.T) {
	dir := t.TempDir()
	got := filepath.Join(dir, "received")
	ok, err := anchor.NewCommand([]string{"/bin/sh", "-c", `cat > "$0"; echo version-42`, got}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, ok)
	appendN(t, f.db, 0, 2)
	res := f.checkpoint(t)
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(got); !bytes.Equal(b, res.Checkpoint.Note) {
		t.Errorf("command received %q, want the signed checkpoint", b)
	}
	if r := string(res.Anchors[0].Evidence.Receipt); r != "version-42" {
		t.Errorf("receipt %q, want version-42", r)
	}
}

func TestCommandAnchor_FailureKeepsCheckpoint(t *testing.T) {
	bad, err := anchor.NewCommand([]string{"/bin/sh", "-c", "cat >/dev/null; echo bucket is locked >&2; exit 3"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, bad)
	appendN(t, f.db, 0, 2)
	res := f.checkpoint(t)
	if !res.Created || res.Err() == nil || !strings.Contains(res.Err().Error(), "exit status 3: bucket is locked") {
		t.Fatalf("got created %v, error %v; want the checkpoint kept and the failure reported", res.Created, res.Err())
	}
	var msg string
	if err := f.db.SQL().QueryRow(`SELECT error FROM audit_anchors WHERE size = 2`).Scan(&msg); err != nil || !strings.Contains(msg, "bucket is locked") {
		t.Errorf("recorded error %q (%v), want the failure recorded", msg, err)
	}
	// The next run retries the anchor that has not accepted the latest checkpoint.
	if again := f.checkpoint(t); len(again.Anchors) != 1 {
		t.Errorf("got %d anchor attempts on retry, want 1", len(again.Anchors))
	}
	if _, err := f.cp.Export(context.Background(), audit.Selection{}); err != nil {
		t.Fatal(err)
	}
}
