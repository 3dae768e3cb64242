package audit

import (
	"context"
	"database/sql"
	"errors"
	"sync"

	"github.com/agora-dev/agora/internal/store"
)

// Batcher appends entries to one database with group commit: entries that arrive while a
// transaction commits go into the next one together, so concurrent callers share one commit
// instead of queueing for the write lock one by one. [Batcher.Append] returns only once its
// entry is committed (or the transaction failed), so a caller that acts only after Append
// returns nil never acts unaudited.
//
// Entries are appended in the order their Append calls queued them, each stamped by [Log.Append]
// as it is written. [Batcher.Run] does the writing; when its ctx ends, entries still queued
// are refused with [ErrBatcherStopped], as is every later Append.
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
		b.drain(ctx)
	}
}

// drain commits what is queued, at most maxBatch entries a transaction, until nothing is.
func (b *Batcher) drain(ctx context.Context) {
	for {
		b.mu.Lock()
		batch := b.next[:min(len(b.next), maxBatch)]
		b.next = b.next[len(batch):]
		b.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		err := b.db.Tx(ctx, func(tx *sql.Tx) error {
			for _, w := range batch {
				if _, err := b.log.Append(ctx, tx, w.e); err != nil {
					return err
				}
			}
			return nil
		})
		for _, w := range batch {
			w.done <- err
		}
	}
}
