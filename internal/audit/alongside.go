package audit

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/audit/verify"
)

// minAlongside is the smallest batch [Log.AppendAllAlongside] encodes on a second goroutine:
// below it the goroutine's start and hand-over cost more than the encoding it moves.
const minAlongside = 16

// AppendAllAlongside is [Log.AppendAllWith] for a writer whose transaction also has rows of
// its own to write: it reads the tree (which fixes the entries' sequence numbers and time),
// then encodes and hashes the entries on a second goroutine while rows runs on the caller's,
// then inserts them, each chunk of entryChunk as soon as it is encoded (the later chunks are
// encoded while the first are inserted). The entries, their bytes and their order are exactly
// AppendAllWith's; only the CPU work that needs no database (canonical JSON, SHA-256) runs
// beside the caller's statements instead of before its inserts. rows runs inside tx and must
// not append to the log; its error is returned (after the encoding goroutine has finished)
// and no entry is inserted. An entry that cannot be encoded fails the append after the
// chunks before it were inserted: like any error of an append, the transaction must then
// roll back. Entries' Details must not change until it returns.
func (l *Log) AppendAllAlongside(ctx context.Context, tx *sql.Tx, st *Statements, entries []Entry, rows func() error) (int64, error) {
	ctx = context.WithoutCancel(ctx)
	if len(entries) < minAlongside {
		if err := rows(); err != nil {
			return 0, err
		}
		return l.appendAll(ctx, tx, st.st, entries)
	}
	a, err := newAppenderWith(ctx, tx, st.st)
	if err != nil {
		return 0, fmt.Errorf("append audit entries: %w", err)
	}
	a.sparse = l.sparse
	a.withChunks(ctx, st.st)
	defer a.close()
	first := a.next()
	at := l.now().UTC().Format(time.RFC3339Nano)
	enc := encodeAlongside(first, at, entries)
	// However the append ends, the encoder is done with entries before it returns, and its
	// buffers go back to the pool.
	defer enc.release()
	if err := rows(); err != nil {
		return 0, err
	}
	if err := a.writeLeaves(ctx, at, entries, enc.bodies, enc.leaves, enc.wait); err != nil {
		return 0, err
	}
	if err := a.save(ctx); err != nil {
		return 0, err
	}
	return first, nil
}

// encoder encodes and hashes a batch's entries on its own goroutine, publishing its progress
// a chunk at a time: the inserts of the first chunks run while the later ones are encoded,
// instead of the caller waiting for the whole batch (half the time of a 200-entry batch's
// encoding, which outlasts the caller's rows).
type encoder struct {
	bodies, leaves [][]byte
	bufs           *encodeBufs
	done           chan int // the count of entries encoded so far, after every chunk; closed at the end
	err            error    // why the encoding stopped, set before done is closed
	ready          int      // the caller's: entries it knows are encoded
}

// encodeBufs is what an encoder writes into: the batch's bodies one after another in body,
// and the lists of bodies and leaf hashes. They are pooled: a writer appending batch after
// batch then encodes into the same memory instead of a buffer per entry. The bodies are done
// with once the append returns (the inserts copy them); the leaf hashes stay the tree's.
type encodeBufs struct {
	body           []byte
	bodies, leaves [][]byte
}

var encodeBufPool = sync.Pool{New: func() any { return new(encodeBufs) }}

// maxPooledBody is the largest body buffer put back in the pool: a rare huge batch's
// buffer is left to the collector rather than kept.
const maxPooledBody = 4 << 20

// encodeAlongside starts encoding entries as seq first on, stamped at.
func encodeAlongside(first int64, at string, entries []Entry) *encoder {
	bufs := encodeBufPool.Get().(*encodeBufs)
	bufs.bodies = slices.Grow(bufs.bodies[:0], len(entries))[:len(entries)]
	bufs.leaves = slices.Grow(bufs.leaves[:0], len(entries))[:len(entries)]
	enc := &encoder{bodies: bufs.bodies, leaves: bufs.leaves, bufs: bufs, done: make(chan int, len(entries)/entryChunk+1)}
	go func() {
		defer close(enc.done)
		buf := bufs.body[:0]
		defer func() { bufs.body = buf }()
		for i, e := range entries {
			start := len(buf)
			var err error
			if buf, err = appendEntry(buf, first+int64(i), at, e); err != nil {
				enc.err = err
				return
			}
			// Capped at its end: nothing appended later writes into an entry's body, and a
			// buffer that grows leaves the bodies before it where they are.
			body := buf[start:len(buf):len(buf)]
			enc.bodies[i], enc.leaves[i] = body, verify.LeafHash(body)
			if n := i + 1; n%entryChunk == 0 || n == len(entries) {
				enc.done <- n
			}
		}
	}()
	return enc
}

// wait returns once entries [0, n) are encoded, or the encoding's error.
func (enc *encoder) wait(n int) error {
	for enc.ready < n {
		v, ok := <-enc.done
		if !ok {
			if enc.err != nil {
				return enc.err
			}
			return fmt.Errorf("append audit entries: encoded %d of %d", enc.ready, n)
		}
		enc.ready = v
	}
	return nil
}

// release waits for the encoder's goroutine to end and puts its buffers back in the pool;
// the bodies must not be used after it.
func (enc *encoder) release() {
	for range enc.done {
	}
	b := enc.bufs
	clear(b.bodies)
	clear(b.leaves)
	b.bodies, b.leaves = b.bodies[:0], b.leaves[:0]
	if cap(b.body) <= maxPooledBody {
		encodeBufPool.Put(b)
	}
	enc.bufs, enc.bodies, enc.leaves = nil, nil, nil
}
