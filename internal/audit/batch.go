package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/store"
)

// Batcher appends entries to one database with group commit: entries that arrive while a
// transaction commits go into the next one together, so concurrent callers share one commit
// instead of queueing for the write lock one by one. [Batcher.Append] returns only once its
// entry is committed (or the transaction failed), so a caller that acts only after Append
// returns nil never acts unaudited.
//
// Entries are appended in the order their Append calls queued them, a batch in one transaction
// with one tree load, through statements Run prepares once on the pool; each entry is stamped as it is written, strictly
// after the entry before it in the batch. An entry that cannot be encoded is refused to its
// caller alone; if the transaction fails, every entry of the batch is refused. [Batcher.Run]
// does the writing; when its ctx ends, entries still queued are refused with
// [ErrBatcherStopped], as is every later Append.
type Batcher struct {
	db     *store.DB
	log    *Log
	mu     sync.Mutex
	next   []batchWait // guarded by mu
	closed bool        // guarded by mu: Run has returned
	wake   chan struct{}
}

// ErrBatcherStopped refuses entries once the [Batcher] has stopped.
var ErrBatcherStopped = errors.New("audit log closed: the server is stopping")

type batchWait struct {
	e    Entry
	done chan error
}

// maxBatch bounds one transaction.
const maxBatch = 256

// NewBatcher returns a batcher that appends to db's log with log. Nothing is written until
// [Batcher.Run] runs.
func NewBatcher(db *store.DB, log *Log) *Batcher {
	return &Batcher{db: db, log: log, wake: make(chan struct{}, 1)}
}

// Append queues e and waits until it is committed, its transaction fails, the batcher stops
// or ctx ends. An entry whose caller gave up on ctx may still be committed.
func (b *Batcher) Append(ctx context.Context, e Entry) error {
	w := batchWait{e: e, done: make(chan error, 1)}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrBatcherStopped
	}
	b.next = append(b.next, w)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run commits batches until ctx ends; entries still waiting then are refused.
func (b *Batcher) Run(ctx context.Context) {
	// Without the statements (the database would not prepare them), every batch prepares its
	// own, as AppendAll does: slower, never refused for it.
	st, err := prepareStatements(ctx, b.db.SQL())
	if err == nil {
		defer st.close()
	}
	for {
		select {
		case <-ctx.Done():
			b.mu.Lock()
			for _, w := range b.next {
				w.done <- ErrBatcherStopped
			}
			b.next, b.closed = nil, true
			b.mu.Unlock()
			return
		case <-b.wake:
		}
		b.drain(ctx, st)
	}
}

// drain commits what is queued, at most maxBatch entries a transaction, until nothing is.
func (b *Batcher) drain(ctx context.Context, st *statements) {
	for {
		b.gather()
		b.mu.Lock()
		batch := b.next[:min(len(b.next), maxBatch)]
		b.next = b.next[len(batch):]
		b.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		refused := make([]error, len(batch))
		err := b.db.Tx(ctx, func(tx *sql.Tx) error { return b.log.appendBatch(ctx, tx, st, batch, refused) })
		for i, w := range batch {
			if refused[i] != nil {
				w.done <- refused[i]
			} else {
				w.done <- err
			}
		}
	}
}

// gather yields while the queue grows, up to a full batch. Callers answered by the last commit
// usually queue their next entry at once but need a moment of CPU to do it; without the yield
// the next transaction takes the few that made it, the one after the rest, and commits are
// many and small (batches of 10 from 64 writers on 2 cores, measured). A yield costs well
// under a microsecond when nobody is queueing.
func (b *Batcher) gather() {
	for n := -1; ; {
		b.mu.Lock()
		queued := len(b.next)
		b.mu.Unlock()
		if queued == n || queued >= maxBatch {
			return
		}
		n = queued
		runtime.Gosched()
	}
}

// appendBatch writes a batch's entries in tx, in order, with one tree load, through st (nil:
// statements prepared in tx). Each entry is stamped as it is written, strictly after the one before it (a
// clock that has not moved is nudged on by a nanosecond), so entries of one batch keep
// distinct times in their sequence order. An entry that cannot be encoded is refused in
// refused[i] and takes no sequence number; the others are written around it. An error is the
// transaction's: nothing of the batch may commit.
func (l *Log) appendBatch(ctx context.Context, tx *sql.Tx, st *statements, batch []batchWait, refused []error) error {
	ctx = context.WithoutCancel(ctx) // as in AppendAll: the transaction still ends with ctx
	var a *appender
	var err error
	if st != nil {
		a, err = newAppenderWith(ctx, tx, st)
	} else {
		a, err = newAppender(ctx, tx)
	}
	if err != nil {
		return fmt.Errorf("append audit entries: %w", err)
	}
	defer a.close()
	var last time.Time
	for i, w := range batch {
		t := l.now().UTC()
		if !t.After(last) {
			t = last.Add(time.Nanosecond)
		}
		last = t
		at := t.Format(time.RFC3339Nano)
		body, err := encodeEntry(a.next(), at, w.e)
		if refused[i] = err; err != nil {
			continue
		}
		if err := a.write(ctx, at, w.e, body); err != nil {
			return err
		}
	}
	return a.save(ctx)
}
