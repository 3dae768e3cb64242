package audit_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/store"
)

// TestBatcher_Fenced: the batcher's group commit passes the process's leader fence
// (store.SetFence): with it refusing, every caller gets the fence's error and the log does
// not grow; a checkpoint (also a commit) is refused too.
func TestBatcher_Fenced(t *testing.T) {
	f := newFixture(t)
	appendN(t, f.db, 0, 3)
	fenced := errors.New("lease agora/leader: leadership ended; refusing to commit")
	defer store.SetFence(func() error { return fenced })()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	b := audit.NewBatcher(f.db, audit.New(nil))
	var runner sync.WaitGroup
	runner.Go(func() { b.Run(ctx) })
	defer runner.Wait()
	defer cancel()
	err := b.Append(t.Context(), audit.Entry{Actor: "a", Kind: "mcp.tool_call", Subject: "mcp/x"})
	if !errors.Is(err, fenced) {
		t.Fatalf("a fenced append: %v, want the fence's error", err)
	}
	if n, err := audit.TreeSize(t.Context(), f.db.SQL()); err != nil || n != 3 {
		t.Fatalf("log size %d (%v) after a fenced append, want 3", n, err)
	}
	cp := f.checkpointer(t)
	if _, err := cp.Checkpoint(t.Context()); !errors.Is(err, fenced) {
		t.Errorf("a fenced checkpoint: %v", err)
	}
}
