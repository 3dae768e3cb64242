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
	"io/fs"
	"os"
	"slices"
	"sync"
	"time"
)

// How a look finds what changed. In WAL mode every commit appends frames to the WAL, each
// naming the page it holds, so the pages that changed between two snapshots are the pages of
// the frames between them, as long as the WAL was not restarted (rewritten from its start)
// in between. A look therefore:
//
//  1. takes the write lock (BEGIN IMMEDIATE on its own connection), so no frame is being
//     written;
//  2. reads the frames after the last one it witnessed, following SQLite's checksum chain to
//     the last commit frame: their page numbers join the pages to ship;
//  3. opens a read snapshot on another connection, which is then exactly that state, and
//     lets the lock go (writers wait for steps 2-3 only: frame headers and checksums, no
//     bucket);
//  4. lets the previous snapshot go, and reads and hashes the pages to ship from the new one.
//
// The snapshot stays open until the next look: SQLite never restarts a WAL while a reader
// uses a part of it, so between two looks the WAL can only grow. When it has grown past
// restartFrames the replicator restarts it itself (restartWAL): under the write lock it
// checkpoints everything, lets its snapshot go, and commits one page, page 1 with a fresh
// application_id, which is then the new WAL's first frame. The next look recognises that
// frame and reads the new WAL from its start. Anything else that changed the WAL's salts (a
// restart the replicator did not make; the file gone) is a history that cannot be proven,
// and that look reads every page. Besides, every look that ships re-reads a slice of the
// database's other pages and compares them with what was shipped, so that every page is
// checked once in about checkEvery of changes: a page the frames did not name (there should be
// none) is counted, logged and shipped. Spread over the looks, the check never costs one look
// the whole database (a full read of 1 GiB is about a second).
//
// The host owns the WAL (AGORA_HOME, never sandbox-writable), so it is read directly.

// restartFrames is the WAL length (frames, ~16 MiB of 4 KiB pages) past which the replicator
// restarts it; SQLite's own default checkpoint point is 1,000.
const restartFrames = 4096

// defaultCheckEvery is how long the rolling check takes to re-read every page.
const defaultCheckEvery = 10 * time.Minute

// walIndex is what a Replicator knows of the WAL between looks.
type walIndex struct {
	w, c *sql.Conn // read-write: the write lock's holder; the checkpointer
	pin  *sql.Conn // holds the read snapshot at pos between looks; nil: none

	mode    string // the database's journal mode, read at the first look
	dv      int64  // data_version on w at the last look (-1: unknown)
	pos     walPos // frames witnessed up to here
	pending map[uint32]struct{}
	full    bool // the next look reads every page: the WAL's history is not proven

	marker     []byte // page 1 as restartWAL committed it; nil: no restart pending
	markerSalt uint32 // the restarted WAL's first salt (the old one plus one)

	restartFrames uint32
	checkEvery    time.Duration // the rolling check's period (0: no check)
	checkNext     int64         // the page the rolling check reads next
	verify        bool          // tests: check every look from frames against a full read
	everyPage     bool          // benchmarks: every look reads every page (the design before frames)
	stats         indexStats
}

// indexStats counts how looks went (tests and the log read them).
type indexStats struct {
	Indexed, Full, Unproven, Restarts, Missed int
	Checked                                   int // pages the rolling check re-read
}

func (x *walIndex) init() {
	x.dv = -1
	x.pending = map[uint32]struct{}{}
	x.full = true // a generation starts with every page
	x.restartFrames = restartFrames
	x.checkEvery = defaultCheckEvery
}

// txControl runs BEGIN, BEGIN IMMEDIATE or COMMIT on c so that it is never reported failed
// when it succeeded. The driver answers a context canceled during a statement with the
// context's error even when the statement went on and succeeded, and SQLite's interrupt does
// not stop a wait for a lock: a look canceled while it waited for the write lock took it, was
// told it had not, skipped its ROLLBACK and kept every writer out. ctx is
// therefore only checked before the statement, which runs without its cancellation (a wait
// is bounded by the busy timeout).
func txControl(ctx context.Context, c *sql.Conn, stmt string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := c.ExecContext(context.WithoutCancel(ctx), stmt)
	return err
}

// unpin lets the held snapshot go.
func (x *walIndex) unpin() {
	if x.pin != nil {
		x.pin.ExecContext(context.Background(), "ROLLBACK")
		x.pin.Close()
		x.pin = nil
	}
}

func (r *Replicator) sync(ctx context.Context) error {
	at := r.o.Now()
	if r.wal.w == nil {
		var err error
		if r.wal.w, err = r.wdb.Conn(ctx); err != nil {
			return fmt.Errorf("replicate %s: %w", r.o.Path, err)
		}
		if r.wal.c, err = r.wdb.Conn(ctx); err != nil {
			return fmt.Errorf("replicate %s: %w", r.o.Path, err)
		}
		if err := r.wal.w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&r.wal.mode); err != nil {
			return fmt.Errorf("replicate %s: journal mode: %w", r.o.Path, err)
		}
	}
	changed, err := r.look(ctx)
	if err != nil {
		return err
	}
	// What a look found, and what an earlier sync witnessed but failed to ship. Under verify
	// (tests) a look that found commits but no frame is checked too: frames it failed to read
	// are exactly what verify is for.
	if r.synced && !r.wal.full && len(r.wal.pending) == 0 && !(r.wal.verify && changed) {
		r.markReplicated(at)
		return nil
	}
	if err := r.shipChanged(ctx, at, r.wal.everyPage); err != nil {
		return err
	}
	r.markReplicated(at)
	if r.wal.pos.Valid && r.wal.pos.Frame >= r.wal.restartFrames {
		if err := r.restartWAL(ctx); err != nil && r.o.Logf != nil {
			r.o.Logf("replicate %s: restart the WAL: %v (the next look tries again)", r.o.DB, err)
		}
	}
	return nil
}

// look brings the held snapshot up to the database's current state and says whether anything
// changed since the last look; what changed is in r.wal.pending (or r.wal.full).
func (r *Replicator) look(ctx context.Context) (bool, error) {
	if r.wal.mode != "wal" {
		// No WAL to read (agora always uses one; a database copied in another mode): a
		// snapshot per look, every page read when data_version moved.
		return r.lookWithoutWAL(ctx)
	}
	w := r.wal.w
	if err := txControl(ctx, w, "BEGIN IMMEDIATE"); err != nil {
		return false, fmt.Errorf("replicate %s: take the write lock: %w", r.o.Path, err)
	}
	changed, err := r.witness(ctx)
	if _, rerr := w.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil && err == nil {
		err = fmt.Errorf("replicate %s: let the write lock go: %w", r.o.Path, rerr)
	}
	return changed, err
}

// witness runs with the write lock held: it reads what the WAL gained, records it, and moves
// the pin to the current state.
func (r *Replicator) witness(ctx context.Context) (bool, error) {
	var dv int64
	if err := r.wal.w.QueryRowContext(ctx, "PRAGMA data_version").Scan(&dv); err != nil {
		return false, fmt.Errorf("replicate %s: %w", r.o.Path, err)
	}
	if dv == r.wal.dv && r.wal.pin != nil {
		return false, nil // nothing committed since the last look
	}
	pos, pages, unproven, err := r.readWAL()
	if err != nil {
		return false, err
	}
	if unproven != "" {
		r.wal.full = true
		if r.synced { // a generation's first look reads every page anyway
			r.wal.stats.Unproven++
			if r.o.Logf != nil {
				r.o.Logf("replicate %s: %s; this look reads every page", r.o.DB, unproven)
			}
		}
	}
	for _, p := range pages {
		r.wal.pending[p] = struct{}{}
	}
	r.wal.marker = nil
	// The new snapshot is taken while no one can commit: it is exactly pos.
	pin, err := r.db.Conn(ctx)
	if err != nil {
		return false, fmt.Errorf("replicate %s: %w", r.o.Path, err)
	}
	var n int64
	if err := txControl(ctx, pin, "BEGIN"); err != nil {
		pin.Close()
		return false, fmt.Errorf("replicate %s: begin: %w", r.o.Path, err)
	}
	if err := pin.QueryRowContext(ctx, "PRAGMA page_count").Scan(&n); err != nil {
		pin.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		pin.Close()
		return false, fmt.Errorf("replicate %s: %w", r.o.Path, err)
	}
	r.wal.unpin() // only now: the old snapshot kept the WAL from restarting until the new one holds
	r.wal.pin, r.wal.pos, r.wal.dv = pin, pos, dv
	return true, nil
}

// readWAL reads the WAL's frames after r.wal.pos: the new position and the pages of the
// frames up to it, and, when they are not proven to be every page changed since r.wal.pos,
// why not (the WAL restarted by someone else, or gone).
func (r *Replicator) readWAL() (walPos, []uint32, string, error) {
	f, err := os.Open(r.o.Path + "-wal")
	if errors.Is(err, fs.ErrNotExist) {
		return walPos{}, nil, "no WAL file", nil
	}
	if err != nil {
		return walPos{}, nil, "", fmt.Errorf("replicate %s: %w", r.o.Path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return walPos{}, nil, "", fmt.Errorf("replicate %s: %w", r.o.Path, err)
	}
	var hb [walHeaderSize]byte
	if _, err := f.ReadAt(hb[:], 0); err != nil {
		return walPos{}, nil, "the WAL holds no header", nil
	}
	h, err := parseWALHeader(hb[:])
	if err != nil {
		return walPos{}, nil, "the WAL's " + err.Error(), nil
	}
	// SQLite's own end of the WAL: frames are read up to it and no further, and
	// the chain must arrive exactly at it, or the position is not on SQLite's history.
	idx, err := readWALIndex(r.o.Path + "-shm")
	if err != nil {
		return walPos{}, nil, "the " + err.Error(), nil
	}
	if idx.Salt != h.Salt {
		return walPos{}, nil, "the wal-index and the WAL's header name different WALs", nil
	}
	atEnd := func(pos walPos) bool { return pos.Frame == idx.MaxFrame && pos.Sum == idx.Sum }
	var pages []uint32
	add := func(fr walFrame) error { pages = append(pages, fr.Page); return nil }
	// fromStart is the position to continue from after a look that cannot prove its history:
	// the whole WAL read again up to SQLite's end (none when the file's chain does not reach it).
	fromStart := func(why string) (walPos, []uint32, string, error) {
		pages = pages[:0]
		pos, err := readFramesTo(f, fi.Size(), h.start(), idx.MaxFrame, add)
		if err != nil {
			return walPos{}, nil, "", err
		}
		if !atEnd(pos) {
			pos = walPos{}
		}
		return pos, pages, why, nil
	}
	old := r.wal.pos
	if old.Valid && old.Salt == h.Salt && old.PageSize == h.PageSize && old.BE == h.BE {
		pos, err := readFramesTo(f, fi.Size(), old, idx.MaxFrame, add)
		if err != nil {
			return pos, pages, "", err
		}
		if !atEnd(pos) {
			return fromStart("the WAL's frames since the last look do not end where SQLite's wal-index does")
		}
		return pos, pages, "", nil
	}
	// Another WAL. It continues the history only when it is the replicator's own restart:
	// the salt one past the old, and page 1 as restartWAL committed it as its first frame.
	proven := false
	if m := r.wal.marker; m != nil && h.Salt[0] == r.wal.markerSalt {
		first := true
		pos, err := readFramesTo(f, fi.Size(), h.start(), idx.MaxFrame, func(fr walFrame) error {
			if first {
				first = false
				proven = fr.No == 1 && fr.Page == 1 && fr.Commit != 0 && samePage1(fr.Data, m)
			}
			return add(fr)
		})
		if err != nil {
			return pos, pages, "", err
		}
		if !proven || !atEnd(pos) {
			return fromStart("the WAL was restarted, but not by the replicator's marker")
		}
		return pos, pages, "", nil
	}
	return fromStart("the WAL was restarted behind the replicator's snapshot")
}

// readWALIndex reads the wal-index header from the -shm file at path. The caller holds the
// write lock, so no writer is changing it (its BEGIN IMMEDIATE recovered it if it had to).
func readWALIndex(path string) (walIndexHeader, error) {
	f, err := shmFile(path)
	if err != nil {
		return walIndexHeader{}, fmt.Errorf("wal-index: %w", err)
	}
	var b [2 * walIndexHeaderSize]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return walIndexHeader{}, fmt.Errorf("wal-index: %w", err)
	}
	return parseWALIndexHeader(b[:])
}

// shmFiles keeps, for the life of the process, a descriptor of every -shm file readWALIndex
// read. It never closes one: closing any descriptor of a file drops every POSIX lock the
// process holds on that file (fcntl(2)), and SQLite's read and write locks are such locks on
// the -shm. A -shm opened and closed at every look let go of the replicator's own snapshot and
// of every lock this process's other connections held, and other processes then restarted
// the WAL under the "held" snapshot. A new file at the path (the old one deleted
// after every connection closed, then created again) gets a new descriptor; the old one stays
// open too, since a close is never known to be harmless.
var shmFiles struct {
	sync.Mutex
	open map[string][]*os.File // the newest last
}

func shmFile(path string) (*os.File, error) {
	fi, err := os.Stat(path) // a stat opens no descriptor
	if err != nil {
		return nil, err
	}
	shmFiles.Lock()
	defer shmFiles.Unlock()
	if fs := shmFiles.open[path]; len(fs) > 0 {
		if ofi, err := fs[len(fs)-1].Stat(); err == nil && os.SameFile(fi, ofi) {
			return fs[len(fs)-1], nil
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if shmFiles.open == nil {
		shmFiles.open = map[string][]*os.File{}
	}
	shmFiles.open[path] = append(shmFiles.open[path], f)
	return f, nil
}

// samePage1 compares two versions of page 1 but for the fields SQLite itself rewrites when
// it puts page 1 in the WAL (the change counter at 24 and, at 92, the counter it is valid for
// and the library version): the marker is read before its commit, the frame after.
func samePage1(a, b []byte) bool {
	if len(a) != len(b) || len(a) < 100 {
		return false
	}
	return bytes.Equal(a[:24], b[:24]) && bytes.Equal(a[28:92], b[28:92]) && bytes.Equal(a[100:], b[100:])
}

// shipChanged reads from the held snapshot the pages that changed (every page when r.wal.full)
// and uploads those whose hash differs from what was shipped; on success it records them
// shipped and forgets the pending pages.
func (r *Replicator) shipChanged(ctx context.Context, at time.Time, everyPage bool) error {
	snap := r.wal.pin
	var pageSize, pageCount int64
	if err := snap.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
		return fmt.Errorf("replicate %s: %w", r.o.Path, err)
	}
	if err := snap.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pageCount); err != nil {
		return fmt.Errorf("replicate %s: %w", r.o.Path, err)
	}
	if pageCount < 0 || pageCount > 1<<31 {
		return fmt.Errorf("replicate %s: page count %d", r.o.Path, pageCount)
	}
	full := r.wal.full || !r.synced || everyPage
	hashes := make([]uint64, pageCount)
	copy(hashes, r.hashes)
	var changed []page
	check := func(no int64, data []byte) error {
		if no < 1 || no > pageCount || int64(len(data)) != pageSize {
			return fmt.Errorf("replicate %s: page %d of %d bytes in a database of %d pages of %d", r.o.Path, no, len(data), pageCount, pageSize)
		}
		h := maphash.Bytes(r.seed, data)
		hashes[no-1] = h
		if int(no-1) < len(r.hashes) && r.hashes[no-1] == h {
			return nil
		}
		changed = append(changed, page{No: uint32(no), Data: bytes.Clone(data)})
		return nil
	}
	if full {
		if err := r.readAll(ctx, snap, check); err != nil {
			return err
		}
		r.wal.stats.Full++
	} else {
		checked := r.checkSlice(pageCount)
		if err := r.readPending(ctx, snap, pageCount, checked, check); err != nil {
			return err
		}
		r.wal.stats.Indexed++
		r.wal.stats.Checked += len(checked)
		if missed := r.missed(changed, checked); missed > 0 {
			r.wal.stats.Missed += missed
			if r.o.Logf != nil {
				r.o.Logf("replicate %s: the WAL frames missed %d changed pages; the rolling check found and ships them", r.o.DB, missed)
			}
		}
		if r.wal.verify {
			if err := r.verifyAgainstFull(ctx, snap, hashes); err != nil {
				return err
			}
		}
	}
	slices.SortFunc(changed, func(a, b page) int { return int(a.No) - int(b.No) })
	base := segment{Identity: r.o.Identity, DB: r.o.DB, Generation: r.gen, Time: at.UnixNano(),
		PageSize: uint32(pageSize), PageCount: uint32(pageCount)}
	if err := r.ship(ctx, base, changed); err != nil {
		return err
	}
	r.hashes, r.synced = hashes, true
	clear(r.wal.pending)
	if full {
		r.wal.full = false
	}
	return nil
}

// checkSlice is the rolling check's share of this look: the next pages in turn, as many as
// cover the database once per checkEvery of looks (lag/2 apart), none already pending.
func (r *Replicator) checkSlice(pageCount int64) map[int64]bool {
	shipped := min(int64(len(r.hashes)), pageCount)
	if r.wal.checkEvery <= 0 || shipped == 0 {
		return nil
	}
	looks := int64(r.wal.checkEvery / (r.o.Lag / 2))
	n := shipped
	if looks > 1 {
		n = (shipped + looks - 1) / looks
	}
	out := make(map[int64]bool, n)
	for ; n > 0; n-- {
		if r.wal.checkNext < 1 || r.wal.checkNext > shipped {
			r.wal.checkNext = 1
		}
		if _, pending := r.wal.pending[uint32(r.wal.checkNext)]; !pending {
			out[r.wal.checkNext] = true
		}
		r.wal.checkNext++
		if len(out) == int(shipped) {
			break
		}
	}
	return out
}

// missed counts the changed pages the rolling check read that no frame named.
func (r *Replicator) missed(changed []page, checked map[int64]bool) int {
	n := 0
	for _, p := range changed {
		if checked[int64(p.No)] {
			n++
		}
	}
	return n
}

// readAll hands every page of the snapshot to check.
func (r *Replicator) readAll(ctx context.Context, snap *sql.Conn, check func(int64, []byte) error) error {
	rows, err := snap.QueryContext(ctx, "SELECT pgno, data FROM sqlite_dbpage('main') ORDER BY pgno")
	if err != nil {
		return fmt.Errorf("replicate %s: read pages: %w", r.o.Path, err)
	}
	defer rows.Close()
	for rows.Next() {
		var no int64
		var data sql.RawBytes // the driver's buffer: copied only when the page changed
		if err := rows.Scan(&no, &data); err != nil {
			return fmt.Errorf("replicate %s: read pages: %w", r.o.Path, err)
		}
		if err := check(no, data); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("replicate %s: read pages: %w", r.o.Path, err)
	}
	return nil
}

// readPending hands check the pending pages that the snapshot holds, the rolling check's
// slice, and every page past what was last shipped (a database that grew).
func (r *Replicator) readPending(ctx context.Context, snap *sql.Conn, pageCount int64, checked map[int64]bool, check func(int64, []byte) error) error {
	nos := make([]int64, 0, len(r.wal.pending)+len(checked))
	for p := range checked {
		nos = append(nos, p)
	}
	for p := range r.wal.pending {
		if int64(p) <= pageCount && int(p) <= len(r.hashes) {
			nos = append(nos, int64(p))
		}
	}
	for p := int64(len(r.hashes)) + 1; p <= pageCount; p++ {
		nos = append(nos, p)
	}
	slices.Sort(nos)
	stmt, err := snap.PrepareContext(ctx, "SELECT data FROM sqlite_dbpage('main') WHERE pgno = ?")
	if err != nil {
		return fmt.Errorf("replicate %s: read pages: %w", r.o.Path, err)
	}
	defer stmt.Close()
	var data []byte
	for _, no := range nos {
		if err := stmt.QueryRowContext(ctx, no).Scan(&data); err != nil {
			return fmt.Errorf("replicate %s: read page %d: %w", r.o.Path, no, err)
		}
		if err := check(no, data); err != nil {
			return err
		}
	}
	return nil
}

// verifyAgainstFull (tests) reads every page of the snapshot and fails when one differs from
// hashes, the state a look from frames arrived at.
func (r *Replicator) verifyAgainstFull(ctx context.Context, snap *sql.Conn, hashes []uint64) error {
	var missed []int64
	err := r.readAll(ctx, snap, func(no int64, data []byte) error {
		if int(no) > len(hashes) || hashes[no-1] != maphash.Bytes(r.seed, data) {
			missed = append(missed, no)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(missed) > 0 {
		return fmt.Errorf("replicate %s: the WAL frames missed pages %v", r.o.Path, missed)
	}
	return nil
}

// ship uploads pages as one sync's segments (at least one: an empty sync still says the
// snapshot's page count and time).
func (r *Replicator) ship(ctx context.Context, base segment, pages []page) error {
	var segs []segment
	for len(pages) > maxPagesPerSegment {
		s := base
		s.Pages, pages = pages[:maxPagesPerSegment], pages[maxPagesPerSegment:]
		segs = append(segs, s)
	}
	s := base
	s.Pages = pages
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
	r.seq, r.prev = seq, prev
	r.mu.Lock()
	r.status.Generation = hex.EncodeToString(r.gen[:])
	r.status.Seq = seq - 1
	r.mu.Unlock()
	return nil
}

// lookWithoutWAL takes a fresh snapshot and says whether data_version moved; every page of a
// changed database is read.
func (r *Replicator) lookWithoutWAL(ctx context.Context) (bool, error) {
	pin, err := r.db.Conn(ctx)
	if err != nil {
		return false, fmt.Errorf("replicate %s: %w", r.o.Path, err)
	}
	var dv int64
	if err = txControl(ctx, pin, "BEGIN"); err == nil {
		err = pin.QueryRowContext(ctx, "PRAGMA data_version").Scan(&dv)
	}
	if err != nil {
		pin.ExecContext(context.WithoutCancel(ctx), "ROLLBACK") // not back to the pool in a transaction
		pin.Close()
		return false, fmt.Errorf("replicate %s: %w", r.o.Path, err)
	}
	r.wal.unpin()
	r.wal.pin = pin
	changed := dv != r.wal.dv
	r.wal.dv = dv
	r.wal.full = r.wal.full || changed
	return changed, nil
}

// restartWAL restarts a grown WAL so that the next look can prove it (see the top of this
// file). It gives up, to try again after the next look, whenever the WAL cannot be fully
// checkpointed (another reader is on an older snapshot) or a writer comes between its steps.
func (r *Replicator) restartWAL(ctx context.Context) error {
	w, c := r.wal.w, r.wal.c
	// The bulk of the checkpoint without the lock: up to the held snapshot.
	if _, err := c.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := txControl(ctx, w, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("take the write lock: %w", err)
	}
	locked := true
	defer func() {
		if locked {
			w.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	// What came since the look, witnessed and pinned, then checkpointed under the lock.
	if _, err := r.witness(ctx); err != nil {
		return fmt.Errorf("witness the WAL: %w", err)
	}
	if r.wal.full || !r.wal.pos.Valid {
		return nil
	}
	var busy, logged, done int64
	if err := c.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logged, &done); err != nil {
		return fmt.Errorf("checkpoint under the write lock: %w", err)
	}
	if logged != done || logged != int64(r.wal.pos.Frame) {
		return nil // an older reader holds part of the WAL: not now
	}
	// The fence is asked before the snapshot is let go: a refusal after it left the WAL
	// unpinned, free for any writer to restart, and the next look read every page.
	if r.o.Fence != nil {
		if err := r.o.Fence(); err != nil {
			return err
		}
	}
	// Everything is in the database file. Without the held snapshot and with a transaction
	// begun now, this connection reads from the file alone, and its commit restarts the WAL
	// (unless some other reader still holds a part of it, when it appends as usual).
	r.wal.unpin()
	if _, err := w.ExecContext(ctx, "ROLLBACK"); err != nil {
		locked = false
		return err
	}
	locked = false
	if err := txControl(ctx, w, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("take the write lock again: %w", err)
	}
	locked = true
	// A writer may have come between the two transactions: then its frames are witnessed
	// and pinned and the restart waits.
	pos, _, unproven, err := r.readWAL()
	if err != nil {
		return err
	}
	if unproven != "" || pos != r.wal.pos {
		r.wal.dv = -1
		_, err := r.witness(ctx)
		return err
	}
	var id int32
	if err := w.QueryRowContext(ctx, "PRAGMA application_id").Scan(&id); err != nil {
		return err
	}
	next := id
	for next == id || next == 0 {
		var b [4]byte
		rand.Read(b[:])
		next = int32(binary.BigEndian.Uint32(b[:]))
	}
	if _, err := w.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", next)); err != nil {
		return err
	}
	var marker []byte
	if err := w.QueryRowContext(ctx, "SELECT data FROM sqlite_dbpage('main') WHERE pgno = 1").Scan(&marker); err != nil {
		return err
	}
	if err := txControl(ctx, w, "COMMIT"); err != nil {
		return fmt.Errorf("commit the marker: %w", err)
	}
	locked = false
	r.wal.dv = -1 // this connection's own commit does not move its data_version
	// A commit that found another reader still on the WAL appended to it rather than
	// restarting it: then there is no restart to recognise, and a marker kept would let a
	// later restart by someone else whose first frame happened to match it pass as proven.
	// The header says which, for the salts change only with a restart.
	if h, ok := r.walHeaderNow(); ok && h.Salt == r.wal.pos.Salt {
		_, err = r.look(ctx)
		return err
	}
	r.wal.marker, r.wal.markerSalt = marker, r.wal.pos.Salt[0]+1
	r.wal.stats.Restarts++
	// Pin the new WAL at once, before another writer's checkpoint could let it restart again.
	_, err = r.look(ctx)
	return err
}

// walHeaderNow reads the WAL's header as it is; false when there is none to read.
func (r *Replicator) walHeaderNow() (walHeader, bool) {
	f, err := os.Open(r.o.Path + "-wal")
	if err != nil {
		return walHeader{}, false
	}
	defer f.Close() // SQLite holds no lock on the -wal file itself (its locks are the -shm's)
	var b [walHeaderSize]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return walHeader{}, false
	}
	h, err := parseWALHeader(b[:])
	return h, err == nil
}
