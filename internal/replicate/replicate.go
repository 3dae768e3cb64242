// Package replicate ships agora's SQLite databases (agora.db, orch.db) to S3-compatible object
// storage as they change, and restores them: the state that survives a lost disk (#31).
//
// Why not litestream: its v0.5 module requires mattn/go-sqlite3 (cgo) beside modernc, the AWS,
// Azure, GCS, NATS and SFTP SDKs, and its own S3 client, which agora's egress policy would not
// sit under. SQLite itself offers what is needed: every lag/2 a [Replicator] opens a read
// snapshot, and if the database changed (PRAGMA data_version) reads its pages through the
// sqlite_dbpage virtual table, which sees the committed state of that snapshot, WAL included,
// and uploads the pages whose hash changed since the last sync, through internal/s3. A
// restore replays a generation's segments in order up to the last whole sync. Nothing changes
// how the databases are written: no checkpoint is held back and no write waits on the bucket.
//
// Objects live under PREFIX/replica/DB/GENERATION/SEQ. A generation starts with each
// Replicator (a full copy), so a restarted process never depends on state it lost; each
// segment names the home (its audit key), the database and the hash of its predecessor, so a
// restore refuses another home's replica, a gap, and any truncated or altered object.
//
// replicate runs on the host side only.
package replicate

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
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
	o      Options
	db     *sql.DB
	gen    [16]byte
	seed   maphash.Seed
	hashes []uint64 // per page (index pgno-1), as last shipped
	prev   [32]byte
	seq    uint64 // next segment's number
	dv     int64  // data_version at the last shipped snapshot
	synced bool

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
	if err := r.nameAfterExisting(ctx); err != nil {
		r.db.Close()
		return nil, err
	}
	if err := r.Sync(ctx); err != nil {
		r.db.Close()
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel, r.done = cancel, make(chan struct{})
	go r.loop(lctx)
	return r, nil
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
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "query_only(1)")
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: o.Path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("replicate %s: %w", o.Path, err)
	}
	// One connection: data_version is per connection, and it must be the one that reads.
	db.SetMaxOpenConns(1)
	// maphash with a seed of this process: fast, and no one outside can aim a page at a
	// collision with the previous one (a missed change would be a wrong restore, caught by
	// nothing). The segments themselves are sha256-chained.
	r := &Replicator{o: o, db: db, seed: maphash.MakeSeed()}
	r.gen = newGeneration(o.Now())
	return r, nil
}

// nameAfterExisting names this generation after every generation already in the bucket.
// Generations sort by their creation time, read from the clock of whichever host began them;
// the leader before this one (another host, #31) may have run ahead of this host's clock, and
// a generation named by this clock alone would then sort before its predecessor's, so the
// next restore would bring back the older state and drop everything this one shipped
// (red team 34).
func (r *Replicator) nameAfterExisting(ctx context.Context) error {
	gens, err := generations(ctx, r.o.Client, r.o.DB)
	if err != nil {
		return fmt.Errorf("replicate %s: list the generations before starting one: %w", r.o.DB, err)
	}
	if n := len(gens); n > 0 && !gens[n-1].created.Before(time.Unix(0, int64(beUint64(r.gen[:8])))) {
		r.gen = newGeneration(gens[n-1].created.Add(time.Nanosecond))
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
	r.db.Close()
	return err
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

func (r *Replicator) sync(ctx context.Context) error {
	conn, err := r.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("replicate %s: %w", r.o.Path, err)
	}
	defer conn.Close()
	// The snapshot starts at the transaction's first read and holds for all of them.
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		return fmt.Errorf("replicate %s: begin: %w", r.o.Path, err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
	at := r.o.Now()
	var dv, pageSize, pageCount int64
	if err := conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&dv); err != nil {
		return fmt.Errorf("replicate %s: %w", r.o.Path, err)
	}
	if r.synced && dv == r.dv {
		r.markReplicated(at)
		return nil
	}
	if err := conn.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
		return fmt.Errorf("replicate %s: %w", r.o.Path, err)
	}
	if err := conn.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pageCount); err != nil {
		return fmt.Errorf("replicate %s: %w", r.o.Path, err)
	}
	rows, err := conn.QueryContext(ctx, "SELECT pgno, data FROM sqlite_dbpage('main') ORDER BY pgno")
	if err != nil {
		return fmt.Errorf("replicate %s: read pages: %w", r.o.Path, err)
	}
	defer rows.Close()
	hashes := make([]uint64, pageCount)
	base := segment{Identity: r.o.Identity, DB: r.o.DB, Generation: r.gen, Time: at.UnixNano(),
		PageSize: uint32(pageSize), PageCount: uint32(pageCount)}
	var batch []page
	var segs []segment
	for rows.Next() {
		var no int64
		var data sql.RawBytes // the driver's buffer: copied only when the page changed
		if err := rows.Scan(&no, &data); err != nil {
			return fmt.Errorf("replicate %s: read pages: %w", r.o.Path, err)
		}
		if no < 1 || no > pageCount || int64(len(data)) != pageSize {
			return fmt.Errorf("replicate %s: page %d of %d bytes in a database of %d pages of %d", r.o.Path, no, len(data), pageCount, pageSize)
		}
		h := maphash.Bytes(r.seed, data)
		hashes[no-1] = h
		if int(no-1) < len(r.hashes) && r.hashes[no-1] == h {
			continue
		}
		batch = append(batch, page{No: uint32(no), Data: bytes.Clone(data)})
		if len(batch) == maxPagesPerSegment {
			s := base
			s.Pages, batch = batch, nil
			segs = append(segs, s)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("replicate %s: read pages: %w", r.o.Path, err)
	}
	s := base
	s.Pages = batch
	segs = append(segs, s)
	segs[len(segs)-1].Commit = true
	seq, prev := r.seq, r.prev
	for i := range segs {
		segs[i].Seq, segs[i].Prev = seq, prev
		b := segs[i].encode(r.o.Key)
		if r.o.Fence != nil {
			if err := r.o.Fence(); err != nil {
				return fmt.Errorf("replicate %s: %w", r.o.DB, err)
			}
		}
		if _, err := r.o.Client.Put(ctx, objectName(r.o.DB, r.gen, seq), b, false, nil); err != nil {
			return fmt.Errorf("replicate %s: %w", r.o.DB, err)
		}
		prev = sha256.Sum256(b)
		seq++
	}
	r.seq, r.prev, r.hashes, r.dv, r.synced = seq, prev, hashes, dv, true
	r.mu.Lock()
	r.status.Generation = hex.EncodeToString(r.gen[:])
	r.status.Seq = seq - 1
	r.mu.Unlock()
	r.markReplicated(at)
	return nil
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
