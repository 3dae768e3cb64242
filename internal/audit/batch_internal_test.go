package audit

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit/verify"
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
		queued = b.queuedLen()
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

// queueInOrder queues entries on b in their order, each waiting for the one before it to be
// queued, so that a Run started afterwards takes them as one batch. Each entry's result
// arrives on its channel.
func queueInOrder(t *testing.T, b *Batcher, entries []Entry) []chan error {
	t.Helper()
	out := make([]chan error, len(entries))
	for i, e := range entries {
		out[i] = make(chan error, 1)
		go func() { out[i] <- b.Append(t.Context(), e) }()
		for queued := 0; queued != i+1; {
			time.Sleep(100 * time.Microsecond)
			queued = b.queuedLen()
		}
	}
	return out
}

// runBatch queues entries as one batch, runs b until every caller has its answer, stops it
// and returns the answers.
func runBatch(t *testing.T, b *Batcher, entries []Entry) []error {
	t.Helper()
	chans := queueInOrder(t, b, entries)
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() { b.Run(ctx); close(stopped) }()
	errs := make([]error, len(chans))
	for i, c := range chans {
		errs[i] = <-c
	}
	cancel()
	<-stopped
	return errs
}

// TestBatcher_DistinctOrderedTimes: entries of one batch get strictly increasing times in
// their sequence order, even when the clock does not move between them (a coarse clock, or a
// fast batch): readers order and select entries by time.
func TestBatcher_DistinctOrderedTimes(t *testing.T) {
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "agora.db"), Migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	frozen := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	b := NewBatcher(db, New(func() time.Time { return frozen }))
	entries := make([]Entry, 20)
	for i := range entries {
		entries[i] = Entry{Kind: "mcp.tool_call", Subject: fmt.Sprintf("s%d", i)}
	}
	for i, err := range runBatch(t, b, entries) {
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
	}
	recs, err := List(t.Context(), db.SQL(), ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(entries) {
		t.Fatalf("%d entries, want %d", len(recs), len(entries))
	}
	for i := 1; i < len(recs); i++ {
		if !recs[i].Time.After(recs[i-1].Time) {
			t.Errorf("entry %d at %s, not after entry %d at %s", i, recs[i].Time.Format(time.RFC3339Nano), i-1, recs[i-1].Time.Format(time.RFC3339Nano))
		}
	}
	if d := recs[len(recs)-1].Time.Sub(frozen); d < 0 || d > time.Microsecond {
		t.Errorf("the last entry is %s from the clock, want within a microsecond after it", d)
	}
}

// TestBatcher_RefusesOnlyTheBadEntry: an entry that cannot be encoded is refused to its own
// caller and never written; the entries batched with it are still committed and reported
// written, without a gap in the sequence, and the stored tree is the tree of what was written.
func TestBatcher_RefusesOnlyTheBadEntry(t *testing.T) {
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "agora.db"), Migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := NewBatcher(db, New(nil))
	errs := runBatch(t, b, []Entry{
		{Kind: "mcp.tool_call", Subject: "good-0"},
		{Kind: "mcp.tool_call", Subject: "bad", Details: map[string]any{"ratio": 1.5}}, // no canonical form
		{Kind: "mcp.tool_call", Subject: "good-1"},
	})
	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("good entries refused beside a bad one: %v, %v", errs[0], errs[2])
	}
	if errs[1] == nil {
		t.Fatal("an entry that cannot be encoded was reported written")
	}
	recs, err := List(t.Context(), db.SQL(), ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Subject != "good-0" || recs[0].Seq != 0 || recs[1].Subject != "good-1" || recs[1].Seq != 1 {
		t.Fatalf("log holds %+v, want good-0 at 0 and good-1 at 1", recs)
	}
	size, err := TreeSize(t.Context(), db.SQL())
	if err != nil || size != 2 {
		t.Fatalf("tree size %d (%v), want 2", size, err)
	}
	stored, err := RootAt(t.Context(), db.SQL(), size)
	if err != nil {
		t.Fatal(err)
	}
	r := rangeFactory.NewEmptyRange(0)
	rows, err := db.SQL().Query(`SELECT entry FROM audit_entries ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			t.Fatal(err)
		}
		if err := r.Append(verify.LeafHash(body), nil); err != nil {
			t.Fatal(err)
		}
	}
	if want := rootOf(r); string(stored) != string(want) {
		t.Fatalf("stored root %x, recomputed from the entries %x", stored, want)
	}
}

// TestBatcher_TransactionTakesWhatQueuesWhileItWrites: entries queued while a transaction is
// writing go into that transaction, not the next one: the callers its commit answers are not
// kept for another. Seen through the times: one transaction stamps its entries strictly in
// order even when the clock stands still, and a later transaction would start again at the
// clock's time, beside the entry before it.
func TestBatcher_TransactionTakesWhatQueuesWhileItWrites(t *testing.T) {
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "agora.db"), Migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const later = 5
	frozen := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	results := make(chan error, later)
	var b *Batcher
	var once sync.Once
	clock := func() time.Time {
		once.Do(func() { // the first entry is being written: queue more meanwhile
			for i := range later {
				go func() {
					results <- b.Append(t.Context(), Entry{Kind: "mcp.tool_call", Subject: fmt.Sprintf("later-%d", i)})
				}()
			}
			for b.queuedLen() < later {
				time.Sleep(100 * time.Microsecond)
			}
		})
		return frozen
	}
	b = NewBatcher(db, New(clock))
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() { b.Run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	if err := b.Append(t.Context(), Entry{Kind: "mcp.tool_call", Subject: "first"}); err != nil {
		t.Fatal(err)
	}
	for range later {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	recs, err := List(t.Context(), db.SQL(), ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != later+1 || recs[0].Subject != "first" {
		t.Fatalf("log holds %d entries (first %q), want %d starting with first", len(recs), recs[0].Subject, later+1)
	}
	for i := 1; i < len(recs); i++ {
		if !recs[i].Time.After(recs[i-1].Time) {
			t.Errorf("entry %d (%s) at %s, not after entry %d at %s: written by a later transaction", i, recs[i].Subject,
				recs[i].Time.Format(time.RFC3339Nano), i-1, recs[i-1].Time.Format(time.RFC3339Nano))
		}
	}
}
