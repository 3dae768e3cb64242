package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"slices"
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
	queue  []*pending // guarded by mu: the batches to write, in order, each at most maxBatch entries
	queued int        // guarded by mu: entries in queue
	last   int        // guarded by mu: entries in the batch written last
	closed bool       // guarded by mu: Run has returned
	wake   chan struct{}
}

// ErrBatcherStopped refuses entries once the [Batcher] has stopped.
var ErrBatcherStopped = errors.New("audit log closed: the server is stopping")

// pending is one batch: its callers queue their entries into it and wait on done, which is
// closed once errs holds each entry's answer. One channel and one answer slice per batch, not
// a channel per entry: at 64 writers the per-entry channel and its send were most of what a
// Batcher cost over AppendAll.
type pending struct {
	entries []Entry
	// gone marks the entries whose callers gave up while the batch was still queued
	// (guarded by the Batcher's mu, read when the batch is taken): they are not written.
	gone []bool
	errs []error // written before done is closed, read only after
	done chan struct{}
}

// errGaveUp answers an entry withdrawn by its caller; nobody hears it (the caller returned
// its ctx's error), it only keeps the entry from being written.
var errGaveUp = errors.New("audit entry withdrawn: its caller gave up before it was written")

// answers is a fresh answer slice for p, its withdrawn entries already answered; mu is held
// or p is no longer queued.
func (p *pending) answers() []error {
	a := make([]error, len(p.entries))
	for i, g := range p.gone {
		if g {
			a[i] = errGaveUp
		}
	}
	return a
}

// finish answers every caller of p: errs[i] for entry i.
func (p *pending) finish(errs []error) {
	p.errs = errs
	close(p.done)
}

// maxBatch bounds one transaction.
const maxBatch = 256

// NewBatcher returns a batcher that appends to db's log with log. Nothing is written until
// [Batcher.Run] runs.
func NewBatcher(db *store.DB, log *Log) *Batcher {
	return &Batcher{db: db, log: log, wake: make(chan struct{}, 1)}
}

// Append queues e and waits until it is committed, its transaction fails or the batcher
// stops. When ctx ends first, an entry no transaction has taken yet is withdrawn (never
// written) and Append returns ctx's error; one already taken may be committing, so Append
// waits for its answer: a caller never hears "not written" of an entry that was (a call the
// MCP guard then refuses would stand in the log as allowed).
func (b *Batcher) Append(ctx context.Context, e Entry) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrBatcherStopped
	}
	var p *pending
	if n := len(b.queue); n > 0 && len(b.queue[n-1].entries) < maxBatch {
		p = b.queue[n-1]
	} else {
		// Sized like the batch before it, so a steady stream grows no slice.
		p = &pending{entries: make([]Entry, 0, min(max(b.last, 8), maxBatch)), done: make(chan struct{})}
		b.queue = append(b.queue, p)
	}
	i := len(p.entries)
	p.entries = append(p.entries, e)
	b.queued++
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	select {
	case <-p.done:
		return p.errs[i]
	case <-ctx.Done():
	}
	b.mu.Lock()
	if slices.Contains(b.queue, p) { // not taken: withdrawn
		for len(p.gone) <= i {
			p.gone = append(p.gone, false)
		}
		p.gone[i] = true
		b.mu.Unlock()
		return ctx.Err()
	}
	b.mu.Unlock()
	<-p.done
	return p.errs[i]
}

// queuedLen is the number of entries waiting to be written.
func (b *Batcher) queuedLen() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.queued
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
			for _, p := range b.queue {
				errs := make([]error, len(p.entries))
				for i := range errs {
					errs[i] = ErrBatcherStopped
				}
				p.finish(errs)
			}
			b.queue, b.queued, b.closed = nil, 0, true
			b.mu.Unlock()
			return
		case <-b.wake:
		}
		b.drain(ctx, st)
	}
}

// drain commits what is queued until nothing is. A transaction starts with the oldest batch
// and, while it is open, takes the batches queued meanwhile too (until it holds maxBatch
// entries), so the writer is not idle while callers answered by the last commit queue again,
// and those callers wait for one commit, not for the next transaction's start.
func (b *Batcher) drain(ctx context.Context, st *statements) {
	for {
		b.gather()
		var taken []*pending
		var answers [][]error
		written := 0
		// batch(i) is the transaction's i-th batch, taken from the queue when it is asked for
		// the first time: store.DB.Tx runs its function again on a busy database, and then the
		// batches taken so far are written again, in the same order.
		batch := func(i int) ([]Entry, []error) {
			if i < len(taken) {
				copy(answers[i], taken[i].answers())
				return taken[i].entries, answers[i]
			}
			if written >= maxBatch {
				return nil, nil
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			if len(b.queue) == 0 {
				return nil, nil
			}
			p := b.queue[0]
			b.queue[0] = nil
			b.queue = b.queue[1:]
			b.queued -= len(p.entries)
			written += len(p.entries)
			b.last = written
			taken = append(taken, p)
			answers = append(answers, p.answers())
			return p.entries, answers[len(answers)-1]
		}
		if entries, _ := batch(0); entries == nil {
			return
		}
		err := b.db.Tx(ctx, func(tx *sql.Tx) error { return b.log.appendBatch(ctx, tx, st, batch) })
		for i, p := range taken {
			if err != nil {
				for j := range answers[i] {
					if answers[i][j] == nil {
						answers[i][j] = err
					}
				}
			}
			p.finish(answers[i])
		}
	}
}

// gather yields while the queue grows, up to a full batch. Callers answered by the last commit
// usually queue their next entry at once but need a moment of CPU to do it; without the yield
// the next transaction takes the few that made it, the one after the rest, and commits are
// many and small (batches of 10 from 64 writers on 2 cores, measured). It waits for as many
// entries as the last batch had (those callers are the ones likely to come back), or until
// the queue has stopped growing for a few yields: one caller alone is not kept waiting, and
// a yield costs well under a microsecond when nobody is queueing.
func (b *Batcher) gather() {
	const still = 3 // yields without growth that end the wait
	b.mu.Lock()
	want := min(max(b.last, 1), maxBatch)
	b.mu.Unlock()
	for n, idle := -1, 0; idle < still; {
		queued := b.queuedLen()
		if queued >= want {
			return
		}
		if queued == n {
			idle++
		} else {
			n, idle = queued, 0
		}
		runtime.Gosched()
	}
}

// appendBatch writes the entries of batch(0), batch(1), ... in tx, in order, until batch
// returns none, with one tree load, through st (nil: statements prepared in tx). Each entry is stamped as it is written, strictly after the one before it (a
// clock that has not moved is nudged on by a nanosecond), so entries of one batch keep
// distinct times in their sequence order. An entry that cannot be encoded is refused in
// the refused slice batch returned with it, at its index, and takes no sequence number; the others are written around it.
// An entry already refused there (withdrawn by its caller) is not written. An error is the
// transaction's: nothing of the batch may commit.
func (l *Log) appendBatch(ctx context.Context, tx *sql.Tx, st *statements, batch func(int) ([]Entry, []error)) error {
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
	a.sparse = l.sparse
	defer a.close()
	var last time.Time
	for n := 0; ; n++ {
		entries, refused := batch(n)
		if entries == nil {
			break
		}
		for i, e := range entries {
			if refused[i] != nil {
				continue // withdrawn by its caller before its batch was taken
			}
			t := l.now().UTC()
			if !t.After(last) {
				t = last.Add(time.Nanosecond)
			}
			last = t
			at := t.Format(time.RFC3339Nano)
			body, err := encodeEntry(a.next(), at, e)
			if refused[i] = err; err != nil {
				continue
			}
			if err := a.write(ctx, at, e, body); err != nil {
				return err
			}
		}
	}
	return a.save(ctx)
}
