package audit_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/store"
)

// TestBatcher_GroupCommit writes entries from many callers at once: each returns only after
// its entry is committed, and the log they make verifies (inclusion proofs against a signed
// checkpoint), so batching entries into one transaction keeps the tree right. Once the batcher
// has stopped, an entry is refused: the call it stands for would run unaudited.
func TestBatcher_GroupCommit(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(t.Context())
	b := audit.NewBatcher(f.db, audit.New(nil))
	var runner sync.WaitGroup
	runner.Go(func() { b.Run(ctx) })
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			errs <- b.Append(t.Context(), audit.Entry{Actor: fmt.Sprintf("client-%d", i%4), Kind: "mcp.tool_call",
				Subject: "mcp/agora_dispatch_describe", Details: map[string]any{"tool": "agora_dispatch_describe", "decision": "allowed"}})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
	recs, err := audit.List(t.Context(), f.db.SQL(), audit.ListOptions{Kind: "mcp.*"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n {
		t.Fatalf("%d mcp entries, want %d", len(recs), n)
	}
	cancel()
	runner.Wait()
	if err := b.Append(t.Context(), audit.Entry{Kind: "mcp.tool_call"}); !errors.Is(err, audit.ErrBatcherStopped) {
		t.Errorf("Append after the batcher stopped: got %v, want ErrBatcherStopped", err)
	}

	verifyMCPEntries(t, f)
}

// verifyMCPEntries checkpoints f's log and verifies an exported bundle of its mcp.* entries:
// inclusion proofs against the signed checkpoint.
func verifyMCPEntries(t *testing.T, f *fixture) {
	t.Helper()
	if err := f.checkpoint(t).Err(); err != nil {
		t.Fatal(err)
	}
	bundle, err := f.cp.Export(t.Context(), audit.Selection{Kind: "mcp.*"})
	if err != nil {
		t.Fatal(err)
	}
	if rep := verifyBoth(t, bundle, verify.Options{Key: f.vkey}); !rep.OK {
		t.Fatalf("the log does not verify: %v", failed(rep))
	}
}

// TestBatcher_KeepsOrder: entries one caller appends in turn are logged in that order.
func TestBatcher_KeepsOrder(t *testing.T) {
	db, _ := openDB(t)
	ctx, cancel := context.WithCancel(t.Context())
	b := audit.NewBatcher(db, audit.New(nil))
	var runner sync.WaitGroup
	runner.Go(func() { b.Run(ctx) })
	defer runner.Wait()
	defer cancel()
	for i := range 10 {
		if err := b.Append(t.Context(), audit.Entry{Kind: "mcp.tool_call", Subject: fmt.Sprintf("s%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := audit.List(t.Context(), db.SQL(), audit.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if want := fmt.Sprintf("s%d", i); r.Subject != want || r.Seq != uint64(i) {
			t.Errorf("entry %d: seq %d subject %q, want seq %d subject %q", i, r.Seq, r.Subject, i, want)
		}
	}
}

// TestBatcher_ReadsTheTreeFreshEachBatch: the batcher's statements are prepared once, but
// each batch must still read the tree as it is now. Other writers (this process's own
// transactions, and another process through its own connection to the file) append between
// the batcher's batches; every entry gets the next sequence number and the whole log verifies.
// A tree kept or read stale across batches would reuse a sequence number (refused by the
// table) or build a tree that does not match the entries.
func TestBatcher_ReadsTheTreeFreshEachBatch(t *testing.T) {
	f := newFixture(t)
	other, err := store.Open(t.Context(), f.path, audit.Migrations) // another process's connection
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx, cancel := context.WithCancel(t.Context())
	b := audit.NewBatcher(f.db, audit.New(nil))
	var runner sync.WaitGroup
	runner.Go(func() { b.Run(ctx) })
	const rounds = 20
	for i := range rounds {
		if err := b.Append(t.Context(), audit.Entry{Kind: "mcp.tool_call", Subject: fmt.Sprintf("batcher-%d", i)}); err != nil {
			t.Fatalf("batcher append %d: %v", i, err)
		}
		db := f.db
		if i%2 == 1 {
			db = other
		}
		if err := db.Tx(t.Context(), func(tx *sql.Tx) error {
			_, err := audit.New(nil).Append(t.Context(), tx, audit.Entry{Kind: "mcp.tool_call", Subject: fmt.Sprintf("other-%d", i)})
			return err
		}); err != nil {
			t.Fatalf("other append %d: %v", i, err)
		}
	}
	cancel()
	runner.Wait()
	recs, err := audit.List(t.Context(), f.db.SQL(), audit.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2*rounds {
		t.Fatalf("%d entries, want %d", len(recs), 2*rounds)
	}
	for i, r := range recs {
		want := fmt.Sprintf("batcher-%d", i/2)
		if i%2 == 1 {
			want = fmt.Sprintf("other-%d", i/2)
		}
		if r.Seq != uint64(i) || r.Subject != want {
			t.Fatalf("entry %d: got seq %d subject %q, want seq %d subject %q", i, r.Seq, r.Subject, i, want)
		}
	}
	verifyMCPEntries(t, f)
}
