package audit

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/store"
)

// TestBatcher_RefusesQueuedOnStop: an entry still queued when Run stops is refused, never
// left waiting and never written.
func TestBatcher_RefusesQueuedOnStop(t *testing.T) {
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "agora.db"), Migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := NewBatcher(db, New(nil))
	done := make(chan error, 1)
	go func() { done <- b.Append(t.Context(), Entry{Kind: "mcp.tool_call"}) }()
	for queued := 0; queued == 0; {
		time.Sleep(time.Millisecond)
		b.mu.Lock()
		queued = len(b.next)
		b.mu.Unlock()
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	b.Run(ctx)
	if err := <-done; err == nil {
		t.Fatal("a queued entry succeeded although the batcher stopped before writing it")
	}
	size, err := TreeSize(t.Context(), db.SQL())
	if err != nil || size != 0 {
		t.Errorf("tree size %d (%v) after stopping, want 0", size, err)
	}
	if err := b.Append(t.Context(), Entry{Kind: "mcp.tool_call"}); !errors.Is(err, ErrBatcherStopped) {
		t.Errorf("Append after Run returned: got %v, want ErrBatcherStopped", err)
	}
}
