// Package replicate ships agora's SQLite databases (agora.db, orch.db) to S3-compatible object
// storage as they change, and restores them: the state that survives a lost disk.
//
// Why not litestream: its v0.5 module requires mattn/go-sqlite3 (cgo) beside modernc, the AWS,
// Azure, GCS, NATS and SFTP SDKs, and its own S3 client, which agora's egress policy would not
// sit under. SQLite itself offers what is needed. Every lag/2 a [Replicator] looks: it takes
// the write lock for a moment, reads the frames the WAL gained since its last look (their page
// numbers are the pages that changed; look.go), opens a read snapshot of exactly that state
// and lets the lock go; it then reads those pages through the sqlite_dbpage virtual table
// from the snapshot and uploads the ones whose hash changed, through internal/s3. The snapshot
// stays open until the next look, which keeps SQLite from restarting the WAL over frames the
// replicator has not seen; the replicator restarts it itself when it has grown, in a way the
// next look can prove. Whenever the WAL's history cannot be proven (a restart it did not make,
// a WAL gone) a look reads every page instead, as every generation's first sync does. So a
// look costs what changed, not the database's size. A restore replays a generation's
// segments in order up to the last whole sync.
//
// Objects live under PREFIX/replica/DB/GENERATION/SEQ. A generation starts with each
// Replicator (a full copy), so a restarted process never depends on state it lost; each
// segment names the home (its audit key), the database and the hash of its predecessor, so a
// restore refuses another home's replica, a gap, and any truncated or altered object.
//
// replicate runs on the host side only.
package replicate

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"net/url"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/s3"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
)

// DefaultLag is the replication lag agora aims at when the config names none.
const DefaultLag = time.Second

// Options configure a [Replicator].
type Options struct {
	// Client is the bucket, under its prefix.
	Client *s3.Client
	// DB names the database in the bucket: "agora" or "orch".
	DB string
	// Path is the database file.
	Path string
	// Identity names the home: its audit key's name. A restore refuses another's.
	Identity string
	// Key authenticates the segments ([SegmentKey] of keys/secret.key). Required.
	Key []byte
	// Lag bounds how long a commit waits before it is in the bucket (default [DefaultLag]); the
	// database is looked at every Lag/2.
	Lag time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logf reports failed syncs (they are retried); nil drops them.
	Logf func(format string, args ...any)
	// Fence, when set, is asked before every segment is put: an error stops the sync (it is
	// retried, asking again) so a serve that lost its leader lease uploads nothing more
	// (store.CheckFence, internal/lease).
	Fence func() error
}

// PublishedFile is where a serve that replicates publishes where replication stands, beside
// AGORA_HOME's databases (DB-replicate.json), for `agora doctor` and the processes that wait
// for the replica (another process) to read.
const PublishedFile = "replicate.json"

// Published is one database's PublishedFile (and a row of doctor's report).
type Published struct {
	DB         string    `json:"db"`
	Generation string    `json:"generation"`
	Seq        uint64    `json:"seq"`
	Replicated time.Time `json:"replicated"`
	Error      string    `json:"error,omitempty"`
}

// Status is where replication stands.
type Status struct {
	Generation string
	Seq        uint64 // the last segment shipped
	// Replicated is the time of the last read snapshot known to be in the bucket (shipped, or
	// found unchanged): every commit before it is replicated.
	Replicated time.Time
	// Err is the last sync's error, nil once a sync succeeds again.
	Err error
}

// Lag is how far replication may be behind at now: every commit older than it is in the bucket.
func (s Status) Lag(now time.Time) time.Duration {
	if s.Replicated.IsZero() {
		return 0
	}
	return now.Sub(s.Replicated)
}

// Replicator ships one database. Start it with [Start]; Close stops it after a last sync.
type Replicator struct {
	o    Options
	db   *sql.DB // read-only: the snapshots (pins)
	wdb  *sql.DB // read-write: the write lock, checkpoints and the WAL restart (look.go)
	gen  [16]byte
	seed maphash.Seed
	// hashes is each page's hash (index pgno-1) as last shipped.
	hashes []uint64
	prev   [32]byte
	seq    uint64 // next segment's number
	synced bool

	wal walIndex // what the WAL showed (look.go)

	mu     sync.Mutex
	status Status

	cancel context.CancelFunc
	done   chan struct{}
}

// Start opens a read connection to the database and begins a new generation with a full copy
// (synchronously: Start returns an error if the bucket cannot take it), then syncs every Lag/2
// until Close.
func Start(ctx context.Context, o Options) (*Replicator, error) {
	r, err := newReplicator(o)
	if err != nil {
		return nil, err
	}
	if err := r.begin(ctx, true); err != nil {
		return nil, err
	}
	return r, nil
}

// begin names the generation, ships its first sync and, with loop, starts syncing every
// Lag/2; on an error the replicator is closed.
func (r *Replicator) begin(ctx context.Context, loop bool) error {
	if err := r.nameAfterExisting(ctx); err != nil {
		r.closeDBs()
		return err
	}
	if err := r.Sync(ctx); err != nil {
		r.closeDBs()
		return err
	}
	if loop {
		lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		r.cancel, r.done = cancel, make(chan struct{})
		go r.loop(lctx)
	}
	return nil
}

func newReplicator(o Options) (*Replicator, error) {
	if o.Client == nil || o.Path == "" || o.Identity == "" || len(o.Key) < 16 {
		return nil, errors.New("replicate: a client, a database path, the home's identity and its segment key are required")
	}
	if err := checkDBName(o.DB); err != nil {
		return nil, err
	}
	if len(o.Identity) > maxIdentity {
		return nil, fmt.Errorf("replicate: identity of %d bytes (at most %d)", len(o.Identity), maxIdentity)
	}
	if o.Lag <= 0 {
		o.Lag = DefaultLag
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	db, err := openDB(o.Path, true)
	if err != nil {
		return nil, err
	}
	// Two: the snapshot held between looks and the next one, opened before the old is let go.
	db.SetMaxOpenConns(2)
	wdb, err := openDB(o.Path, false)
	if err != nil {
		db.Close()
		return nil, err
	}
	wdb.SetMaxOpenConns(2) // the write lock's holder and the checkpointer
	// maphash with a seed of this process: fast, and no one outside can aim a page at a
	// collision with the previous one (a missed change would be a wrong restore, caught by
	// nothing). The segments themselves are sha256-chained.
	r := &Replicator{o: o, db: db, wdb: wdb, seed: maphash.MakeSeed()}
	r.wal.init()
	r.gen = newGeneration(o.Now())
	return r, nil
}

// openDB opens the database read-only (the snapshots) or read-write (the look's write lock,
// its checkpoints and the replicator's own WAL restart; never autocheckpointing on its own,
// which would backfill and let another writer restart the WAL past a look).
func openDB(path string, readOnly bool) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	if readOnly {
		q.Set("mode", "ro")
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("mode", "rw")
		q.Add("_pragma", "wal_autocheckpoint(0)")
	}
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("replicate %s: %w", path, err)
	}
	return db, nil
}

// nameAfterExisting names this generation after every generation already in the bucket, and
// refuses to start one where the newest is another home's (owner.go).
// Generations sort by their creation time, read from the clock of whichever host began them;
// the leader before this one (another host) may have run ahead of this host's clock, and
// a generation named by this clock alone would then sort before its predecessor's, so the
// next restore would bring back the older state and drop everything this one shipped.
func (r *Replicator) nameAfterExisting(ctx context.Context) error {
	gens, err := generations(ctx, r.o.Client, r.o.DB)
	if err != nil {
		return fmt.Errorf("replicate %s: list the generations before starting one: %w", r.o.DB, err)
	}
	if len(gens) == 0 {
		return nil
	}
	newest := gens[len(gens)-1]
	owner, err := generationOwner(ctx, r.o.Client, r.o.DB, r.o.Identity, r.o.Key, newest)
	if err != nil {
		return fmt.Errorf("replicate %s: %w", r.o.DB, err)
	}
	if !owner.Own {
		return fmt.Errorf("replicate %s: the newest generation is not this home's, so no generation is started after it: %w",
			r.o.DB, ForeignError(r.o.Client, r.o.DB, r.o.Identity, owner)) // owner.go
	}
	if !newest.created.Before(time.Unix(0, int64(beUint64(r.gen[:8])))) {
		r.gen = newGeneration(newest.created.Add(time.Nanosecond))
	}
	return nil
}

// newGeneration is the creation time (so names sort by age) and 8 random bytes.
func newGeneration(now time.Time) [16]byte {
	var g [16]byte
	binary.BigEndian.PutUint64(g[:8], uint64(now.UnixNano()))
	rand.Read(g[8:])
	return g
}

func (r *Replicator) loop(ctx context.Context) {
	defer close(r.done)
	t := time.NewTicker(r.o.Lag / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.Sync(ctx); err != nil && ctx.Err() == nil && r.o.Logf != nil {
			r.o.Logf("replicate %s: %v (retrying)", r.o.DB, err)
		}
	}
}

// Close stops the loop, ships what changed since the last sync, and closes the connection.
func (r *Replicator) Close(ctx context.Context) error {
	if r.cancel != nil {
		r.cancel()
		<-r.done
	}
	err := r.Sync(ctx)
	r.closeDBs()
	return err
}

// closeDBs lets the held snapshot go and closes both pools.
func (r *Replicator) closeDBs() {
	r.wal.unpin()
	for _, c := range []*sql.Conn{r.wal.w, r.wal.c} {
		if c != nil {
			c.Close()
		}
	}
	r.db.Close()
	r.wdb.Close()
}

// Status reports where replication stands.
func (r *Replicator) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// Sync ships what changed since the last sync, if anything. It is not safe for concurrent
// use; the loop and Close call it in turn.
func (r *Replicator) Sync(ctx context.Context) error {
	err := r.sync(ctx)
	r.mu.Lock()
	r.status.Err = err
	r.mu.Unlock()
	return err
}

func (r *Replicator) markReplicated(at time.Time) {
	r.mu.Lock()
	r.status.Replicated = at
	r.mu.Unlock()
}

// objectName is replica/DB/GENERATION/SEQ, both in fixed-width hex so names sort in order.
func objectName(db string, gen [16]byte, seq uint64) string {
	return fmt.Sprintf("replica/%s/%x/%016x", db, gen, seq)
}

func checkDBName(db string) error {
	if db == "" || len(db) > maxDBName {
		return fmt.Errorf("replicate: database name %q: want 1 to %d lowercase letters", db, maxDBName)
	}
	for _, c := range db {
		if c < 'a' || c > 'z' {
			return fmt.Errorf("replicate: database name %q: want lowercase letters only", db)
		}
	}
	return nil
}
