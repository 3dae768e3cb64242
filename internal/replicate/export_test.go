package replicate

import (
	"context"
	"time"
)

// IndexStats is how a replicator's looks went: from frames, full reads, full reads because
// the WAL's history was unproven, its own WAL restarts, pages the rolling check found the
// frames had missed, pages it re-read.
type IndexStats = indexStats

// Stats reads r's look counters.
func Stats(r *Replicator) IndexStats { return r.wal.stats }

// StartManual is Start without the background loop (the test calls Sync), with every look
// from frames checked against a full read (verify), the WAL restarted past restartFrames and
// the rolling check re-reading every page once per checkEvery of looks (0: no check; a period
// shorter than a look: every page at every look).
func StartManual(ctx context.Context, o Options, verify bool, restartFrames uint32, checkEvery time.Duration) (*Replicator, error) {
	r, err := newReplicator(o)
	if err != nil {
		return nil, err
	}
	r.wal.verify, r.wal.restartFrames, r.wal.checkEvery = verify, restartFrames, checkEvery
	if err := r.begin(ctx, false); err != nil {
		return nil, err
	}
	return r, nil
}

// StartEveryPage is Start with every look reading every page, as the replicator did before it
// read the WAL's frames: the benchmarks' baseline.
func StartEveryPage(ctx context.Context, o Options) (*Replicator, error) {
	r, err := newReplicator(o)
	if err != nil {
		return nil, err
	}
	r.wal.everyPage = true
	if err := r.begin(ctx, true); err != nil {
		return nil, err
	}
	return r, nil
}

// Unpin lets r's held snapshot go, as if it had never held one: SQLite may then restart the
// WAL behind r's back.
func Unpin(r *Replicator) { r.wal.unpin() }

// ForgetPage makes r remember page no as shipped with other content than it has: what a page
// the WAL frames failed to name looks like to the rolling check.
func ForgetPage(r *Replicator, no int) { r.hashes[no-1] ^= 1 }
