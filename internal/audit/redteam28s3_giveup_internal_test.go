package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/store"
)

// TestRedTeam28S3_BatcherCallerThatGivesUpHearsTheTruth: a caller of Batcher.Append whose
// ctx ends while its entry waits must hear the truth about it. The MCP guard runs a tool
// only when its "allowed" entry is written and refuses the call otherwise, so an entry
// reported not written that is then committed records a refused call as allowed (the
// audit's rule: never). Another connection holds agora.db's write lock, so the batcher's
// transaction waits: entry A is already taken by that transaction, entry B still queued
// behind it. Both callers give up. Once the lock is released, each entry is in the log
// exactly when its Append returned nil.
func TestRedTeam28S3_BatcherCallerThatGivesUpHearsTheTruth(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agora.db")
	db, err := store.Open(t.Context(), path, Migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lock, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	conn, err := lock.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	b := NewBatcher(db, New(nil))
	runCtx, stop := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { b.Run(runCtx); close(stopped) }()
	defer func() { stop(); <-stopped }()

	appendGivingUp := func(subject string) (context.CancelFunc, chan error) {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- b.Append(ctx, Entry{Kind: "mcp.tool.call", Subject: subject}) }()
		return cancel, done
	}
	cancelA, doneA := appendGivingUp("A")
	for b.queuedLen() != 0 { // A taken by the transaction that waits for the lock
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	cancelB, doneB := appendGivingUp("B")
	for b.queuedLen() != 1 {
		time.Sleep(time.Millisecond)
	}
	cancelA()
	cancelB()
	var errB error
	select {
	case errB = <-doneB:
	case <-time.After(5 * time.Second):
		t.Fatal("B, queued and not yet taken, did not return when its caller gave up")
	}
	if _, err := conn.ExecContext(context.Background(), "COMMIT"); err != nil {
		t.Fatal(err)
	}
	var errA error
	select {
	case errA = <-doneA:
	case <-time.After(60 * time.Second):
		t.Fatal("A did not return within 60 s of the lock's release")
	}
	// Whatever the batcher still writes is written by now: one more entry, waited for.
	if err := b.Append(t.Context(), Entry{Kind: "mcp.tool.call", Subject: "after"}); err != nil {
		t.Fatal(err)
	}
	recs, err := List(t.Context(), db.SQL(), ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]bool{}
	for _, r := range recs {
		in[r.Subject] = true
	}
	for _, c := range []struct {
		name string
		err  error
	}{{"A", errA}, {"B", errB}} {
		if written := in[c.name]; written != (c.err == nil) {
			t.Errorf("entry %s: Append returned %v, and the entry is written: %v", c.name, c.err, written)
		}
	}
	if !errors.Is(errB, context.Canceled) {
		t.Errorf("B returned %v after its caller gave up before a transaction took it, want context.Canceled (withdrawn)", errB)
	}
}

// TestRedTeam28S3_BatcherGiveUpsUnderLoad attacks the withdrawal itself: 16 writers whose
// callers give up after 0 to 3 ms, while another connection takes and releases the write
// lock every few milliseconds (so batches wait queued, are taken, and wait in BEGIN). Every
// entry is in the log exactly when its Append returned nil, the sequence has no gap, and
// the stored tree is the tree of what was written.
func TestRedTeam28S3_BatcherGiveUpsUnderLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agora.db")
	db, err := store.Open(t.Context(), path, Migrations)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lock, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	b := NewBatcher(db, New(nil))
	runCtx, stop := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { b.Run(runCtx); close(stopped) }()
	end := time.Now().Add(time.Second)
	lockDone := make(chan struct{})
	go func() {
		defer close(lockDone)
		conn, err := lock.Conn(context.Background())
		if err != nil {
			return
		}
		defer conn.Close()
		for time.Now().Before(end) {
			if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err == nil {
				time.Sleep(3 * time.Millisecond)
				conn.ExecContext(context.Background(), "COMMIT")
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var mu sync.Mutex
	answered := map[string]error{}
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := 0; time.Now().Before(end); i++ {
				subject := fmt.Sprintf("w%d.%d", w, i)
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration((w+i)%4)*time.Millisecond)
				err := b.Append(ctx, Entry{Kind: "mcp.tool.call", Subject: subject})
				cancel()
				mu.Lock()
				answered[subject] = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	<-lockDone
	if err := b.Append(t.Context(), Entry{Kind: "mcp.tool.call", Subject: "after"}); err != nil {
		t.Fatal(err)
	}
	stop()
	<-stopped
	recs, err := List(t.Context(), db.SQL(), ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]bool{}
	for i, r := range recs {
		if r.Seq != uint64(i) {
			t.Fatalf("entry %d has seq %d", i, r.Seq)
		}
		in[r.Subject] = true
	}
	gaveUp, wrong := 0, 0
	for s, err := range answered {
		if err != nil {
			gaveUp++
		}
		if in[s] != (err == nil) {
			wrong++
			if wrong <= 5 {
				t.Errorf("%s: Append returned %v, written %v", s, err, in[s])
			}
		}
	}
	t.Logf("%d appends, %d gave up, %d written", len(answered), gaveUp, len(recs)-1)
	if gaveUp == 0 || gaveUp == len(answered) {
		t.Errorf("%d of %d callers gave up: the attack did not mix both", gaveUp, len(answered))
	}
	size, err := TreeSize(t.Context(), db.SQL())
	if err != nil || size != uint64(len(recs)) {
		t.Fatalf("tree size %d (%v), log %d entries", size, err, len(recs))
	}
}
