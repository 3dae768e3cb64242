package audit_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/audittest"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/store"
)

const (
	crashChildEnv = "AGORA_AUDIT_CRASH_CHILD_DB"
	crashKeyEnv   = "AGORA_AUDIT_CRASH_CHILD_KEY"
	crashPubEnv   = "AGORA_AUDIT_CRASH_CHILD_PUB"
	crashModeEnv  = "AGORA_AUDIT_CRASH_CHILD_MODE" // "batcher": 16 writers through a Batcher
)

// crashChild appends entries in small transactions and checkpoints every few, forever.
func crashChild(path string) {
	ctx := context.Background()
	db, err := store.Open(ctx, path, audit.Migrations)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	s, err := note.NewSigner(os.Getenv(crashKeyEnv))
	if err != nil {
		os.Exit(2)
	}
	cp, err := audit.NewCheckpointer(db, audit.CheckpointerOptions{
		LogName: "agora.db", Signer: s, VerifierKey: os.Getenv(crashPubEnv), Every: 7, Interval: time.Hour,
	})
	if err != nil {
		os.Exit(2)
	}
	l := audit.New(nil)
	switch os.Getenv(crashModeEnv) {
	case "batcher":
		crashBatcherChild(ctx, db, l, cp)
	case "acked":
		rt28s3AckedChild(ctx, db, l, cp) // redteam28s3_crash_test.go
	case "rt30sparse":
		rt30SparseChild(ctx, db, l, cp) // redteam30_sparse_test.go
	case "rt37alongside":
		rt37AlongsideChild(ctx, db, l, cp) // redteam37_alongside_test.go
	}
	for i := 0; ; i++ {
		err := db.Tx(ctx, func(tx *sql.Tx) error {
			for j := range 1 + i%3 {
				if _, err := l.Append(ctx, tx, audit.Entry{Kind: "catalog.register", Subject: fmt.Sprintf("c%d.%d", i, j)}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if _, err := cp.MaybeCheckpoint(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
}

// crashBatcherChild appends from 16 writers through a Batcher and checkpoints, forever.
func crashBatcherChild(ctx context.Context, db *store.DB, l *audit.Log, cp *audit.Checkpointer) {
	b := audit.NewBatcher(db, l)
	go b.Run(ctx)
	for w := range 16 {
		go func() {
			for i := 0; ; i++ {
				if err := b.Append(ctx, audit.Entry{Kind: "mcp.tool_call", Subject: fmt.Sprintf("w%d.%d", w, i)}); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
			}
		}()
	}
	for {
		if _, err := cp.MaybeCheckpoint(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLog_SurvivesKill kills a process that is appending and checkpointing with SIGKILL, then
// checks the log it left: the stored tree matches the root recomputed from the entries, the
// latest checkpoint verifies and is a prefix, and an export of everything verifies.
func TestLog_SurvivesKill(t *testing.T) { survivesKill(t, "") }

// TestBatcher_SurvivesKill is TestLog_SurvivesKill with the entries written by 16 writers
// through a Batcher, a batch per transaction.
func TestBatcher_SurvivesKill(t *testing.T) { survivesKill(t, "batcher") }

func survivesKill(t *testing.T, mode string) {
	path := filepath.Join(t.TempDir(), "agora.db")
	skey, vkey := audittest.NewKeyText(t)
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+path, crashKeyEnv+"="+skey, crashPubEnv+"="+vkey, crashModeEnv+"="+mode)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitForEntries(t, path, int64(200*(round+1)))
		time.Sleep(time.Duration(round*7) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		checkAfterCrash(t, path, skey, vkey)
	}
}

// waitForEntries waits until the log at path holds n entries and a checkpoint.
func waitForEntries(t *testing.T, path string, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(1000)"); err == nil {
			var got, checkpoints int64
			err := db.QueryRow(`SELECT (SELECT COALESCE(MAX(seq)+1, 0) FROM audit_entries), (SELECT COUNT(*) FROM audit_checkpoints)`).Scan(&got, &checkpoints)
			db.Close()
			if err == nil && got >= n && checkpoints > 0 {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the child did not reach %d entries and a checkpoint in 30s", n)
}

func checkAfterCrash(t *testing.T, path, skey, vkey string) {
	t.Helper()
	ctx := t.Context()
	db, err := store.Open(ctx, path, audit.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	size, err := audit.TreeSize(ctx, db.SQL())
	if err != nil {
		t.Fatal(err)
	}
	var entries uint64
	if err := db.SQL().QueryRow(`SELECT COUNT(*) FROM audit_entries`).Scan(&entries); err != nil {
		t.Fatal(err)
	}
	if size != entries {
		t.Fatalf("tree has %d leaves, the log %d entries", size, entries)
	}
	if got, want := mustRoot(t, db, size), rootFromLeaves(t, db, size); string(got) != string(want) {
		t.Fatalf("stored root %x, recomputed from entries %x", got, want)
	}
	latest, err := audit.LatestCheckpoint(ctx, db.SQL())
	if err != nil || latest == nil {
		t.Fatalf("latest checkpoint: %v (%v)", latest, err)
	}
	v, _ := note.NewVerifier(vkey)
	c, err := verify.OpenCheckpoint(latest.Note, v, v.Name()+"/agora.db")
	if err != nil {
		t.Fatal(err)
	}
	if want := mustRoot(t, db, c.Size); string(want) != string(c.Hash) {
		t.Fatalf("checkpoint %d root %x, tree %x", c.Size, c.Hash, want)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := audit.NewCheckpointer(db, audit.CheckpointerOptions{LogName: "agora.db", Signer: s, VerifierKey: vkey})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Checkpoint(ctx); err != nil {
		t.Fatalf("checkpoint after the crash: %v", err)
	}
	b, err := cp.Export(ctx, audit.Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if rep := verify.Verify(b, verify.Options{Key: vkey}); !rep.OK || uint64(len(b.Entries)) != size {
		t.Fatalf("export of %d entries after the crash: failed %v", len(b.Entries), failed(rep))
	}
}
