package audit_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/audit"
)

// The Batcher prepares its statements once on the pool and binds them
// to each batch's transaction. A batch that fails halfway (an entry insert or the tree's save
// refused by the database) must leave nothing of itself committed: every caller of that batch
// hears the error, none of its entries is in the log, the tree is as before, and the batches
// after it (on the same prepared statements) write a log that verifies. Two batchers share
// one pool meanwhile.
func TestRedTeam28_BatcherFailedBatchCommitsNothing(t *testing.T) {
	f := newFixture(t)
	for _, q := range []string{
		`CREATE TABLE rt_arm (x INTEGER)`,
		`CREATE TRIGGER rt_poison BEFORE INSERT ON audit_entries WHEN NEW.subject = 'mcp/poison'
			BEGIN SELECT RAISE(ABORT, 'poisoned entry'); END`,
		`CREATE TRIGGER rt_tree_upd BEFORE UPDATE ON audit_tree WHEN EXISTS (SELECT 1 FROM rt_arm)
			BEGIN SELECT RAISE(ABORT, 'poisoned tree'); END`,
		`CREATE TRIGGER rt_tree_ins BEFORE INSERT ON audit_tree WHEN EXISTS (SELECT 1 FROM rt_arm)
			BEGIN SELECT RAISE(ABORT, 'poisoned tree'); END`,
	} {
		if _, err := f.db.SQL().ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	b1, b2 := audit.NewBatcher(f.db, audit.New(nil)), audit.NewBatcher(f.db, audit.New(nil))
	var runners sync.WaitGroup
	runners.Go(func() { b1.Run(ctx) })
	runners.Go(func() { b2.Run(ctx) })
	defer func() { cancel(); runners.Wait() }()

	var mu sync.Mutex
	ok := map[string]bool{} // subject -> Append returned nil
	appendAll := func(round string, n int, poisonAt int) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				subject := fmt.Sprintf("mcp/%s-%d", round, i)
				if i == poisonAt {
					subject = "mcp/poison"
				}
				b := b1
				if i%2 == 1 {
					b = b2
				}
				err := b.Append(t.Context(), audit.Entry{Actor: "rt", Kind: "mcp.tool_call", Subject: subject,
					Details: map[string]any{"tool": "agora_dispatch_describe", "decision": "allowed"}})
				if subject == "mcp/poison" {
					if err == nil {
						t.Errorf("the poisoned entry was committed")
					}
					return
				}
				mu.Lock()
				ok[subject] = err == nil
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	appendAll("a", 40, 17)
	// The tree's save refused: every entry of those batches fails.
	if _, err := f.db.SQL().ExecContext(t.Context(), `INSERT INTO rt_arm VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	appendAll("b", 20, -1)
	if _, err := f.db.SQL().ExecContext(t.Context(), `DELETE FROM rt_arm`); err != nil {
		t.Fatal(err)
	}
	appendAll("c", 40, 5)

	recs, err := audit.List(t.Context(), f.db.SQL(), audit.ListOptions{Kind: "mcp.*"})
	if err != nil {
		t.Fatal(err)
	}
	logged := map[string]bool{}
	for i, r := range recs {
		if r.Seq != uint64(i) {
			t.Fatalf("entry %d has seq %d: a gap or a reuse", i, r.Seq)
		}
		logged[r.Subject] = true
	}
	var refused int
	for subject, nilErr := range ok {
		if nilErr != logged[subject] {
			t.Errorf("%s: Append returned nil = %v, in the log = %v", subject, nilErr, logged[subject])
		}
		if !nilErr {
			refused++
		}
		if strings.HasPrefix(subject, "mcp/b-") && logged[subject] {
			t.Errorf("%s committed although its batch's tree save was refused", subject)
		}
	}
	if logged["mcp/poison"] {
		t.Error("the poisoned entry is in the log")
	}
	t.Logf("%d entries logged, %d refused with their batch", len(recs), refused)
	if refused < 20 {
		t.Errorf("only %d entries refused; the 20 of the refused tree saves alone should be", refused)
	}
	verifyMCPEntries(t, f)
}
