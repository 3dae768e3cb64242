package audit

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/store"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden-log.json from the code under test")

// goldenLog is what a fixed sequence of entries left in the database: each entry's bytes and
// leaf hash, the tree's root, and a digest of every stored interior node. Entries are hashed
// and checkpoints sign their root, so these bytes must never change.
type goldenLog struct {
	Entries []goldenEntry `json:"entries"`
	Size    uint64        `json:"size"`
	Root    string        `json:"root"`
	Nodes   string        `json:"nodes"` // sha256 over (id, hash) of audit_nodes in id order
}

type goldenEntry struct {
	Entry string `json:"entry"`
	Leaf  string `json:"leaf"`
}

// steppingClock returns a fixed start plus step more at every call.
func steppingClock(start time.Time, step time.Duration) func() time.Time {
	var mu sync.Mutex
	n := 0
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		n++
		return start.Add(time.Duration(n-1) * step)
	}
}

func goldenEntries(from, n int) []Entry {
	out := make([]Entry, n)
	for i := range out {
		k := from + i
		switch k % 4 {
		case 0:
			out[i] = Entry{Actor: "alice", Kind: "catalog.register", Subject: fmt.Sprintf("capability/c%d", k),
				Details: map[string]any{"digest": fmt.Sprintf("sha256:%064d", k), "n": k, "ok": k%3 == 0}}
		case 1:
			out[i] = Entry{Actor: "client-ü \"q\"", Kind: "mcp.tool_call", Subject: "mcp/agora_dispatch_describe"}
		case 2:
			out[i] = Entry{Actor: "dispatch/d1 role@sha256:ab", Kind: "net.connect", Subject: "dispatch/d1",
				Details: map[string]any{"host": "example.com:443", "nested": map[string]any{"z": []any{"a", int64(-2), nil}, "a": "\u2028<>&"}}}
		default:
			out[i] = Entry{Kind: "orch.task", Subject: fmt.Sprintf("run/r%d", k), Details: map[string]any{}}
		}
	}
	return out
}

// writeGoldenLog appends a fixed sequence through every writer: Log.Append, Log.AppendAll, a
// Batcher batch of six entries queued before it runs, and three one-entry batches.
func writeGoldenLog(t *testing.T, db *store.DB) {
	ctx := t.Context()
	l := New(steppingClock(time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC), time.Millisecond+7*time.Nanosecond))
	if err := db.Tx(ctx, func(tx *sql.Tx) error {
		for _, e := range goldenEntries(0, 3) {
			if _, err := l.Append(ctx, tx, e); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Tx(ctx, func(tx *sql.Tx) error {
		_, err := l.AppendAll(ctx, tx, goldenEntries(3, 4))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	b := NewBatcher(db, l)
	errs := queueInOrder(t, b, goldenEntries(7, 6))
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { b.Run(runCtx) })
	for _, c := range errs {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range goldenEntries(13, 3) {
		if err := b.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	wg.Wait()
}

func readGoldenLog(t *testing.T, db *store.DB) goldenLog {
	ctx := t.Context()
	var g goldenLog
	rows, err := db.SQL().QueryContext(ctx, `SELECT entry, leaf_hash FROM audit_entries ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var entry, leaf []byte
		if err := rows.Scan(&entry, &leaf); err != nil {
			t.Fatal(err)
		}
		g.Entries = append(g.Entries, goldenEntry{Entry: string(entry), Leaf: hex.EncodeToString(leaf)})
	}
	rows.Close()
	size, err := TreeSize(ctx, db.SQL())
	if err != nil {
		t.Fatal(err)
	}
	root, err := RootAt(ctx, db.SQL(), size)
	if err != nil {
		t.Fatal(err)
	}
	g.Size, g.Root = size, hex.EncodeToString(root)
	h := sha256.New()
	rows, err = db.SQL().QueryContext(ctx, `SELECT id, hash FROM audit_nodes ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var hash []byte
		if err := rows.Scan(&id, &hash); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%d %x\n", id, hash)
	}
	g.Nodes = hex.EncodeToString(h.Sum(nil))
	return g
}

// TestGoldenLog: the same entries, appended through every writer, produce the same bytes,
// leaf hashes, root and stored nodes as testdata/golden-log.json, which was written by the
// code before the Batcher appended a batch with one tree load. Logs written before a
// change must verify after it byte for byte.
func TestGoldenLog(t *testing.T) {
	db, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "agora.db"), Migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	writeGoldenLog(t, db)
	got := readGoldenLog(t, db)
	path := filepath.Join("testdata", "golden-log.json")
	if *updateGolden {
		out, _ := json.MarshalIndent(got, "", "  ")
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want goldenLog
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if len(got.Entries) != len(want.Entries) {
		t.Fatalf("%d entries, golden has %d", len(got.Entries), len(want.Entries))
	}
	for i := range want.Entries {
		if got.Entries[i] != want.Entries[i] {
			t.Errorf("entry %d:\n got %s %s\nwant %s %s", i, got.Entries[i].Leaf, got.Entries[i].Entry, want.Entries[i].Leaf, want.Entries[i].Entry)
		}
	}
	if got.Size != want.Size || got.Root != want.Root || got.Nodes != want.Nodes {
		t.Errorf("tree: size %d root %s nodes %s, golden size %d root %s nodes %s", got.Size, got.Root, got.Nodes, want.Size, want.Root, want.Nodes)
	}
}
