package replicate_test

import (
	"database/sql"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/replicate"
)

// Red team 44: attacks on the replicator's WAL-frame index (look.go, wal.go).

// walChain continues SQLite's WAL checksum s over b (little-endian words: the magic's low bit
// is clear on the hosts the tests run on, which the test checks).
func walChain(s [2]uint32, b []byte) [2]uint32 {
	for i := 0; i+8 <= len(b); i += 8 {
		s[0] += binary.LittleEndian.Uint32(b[i:]) + s[1]
		s[1] += binary.LittleEndian.Uint32(b[i+4:]) + s[0]
	}
	return s
}

// appendDeadCommitFrame writes, after the last frame of the WAL's checksum chain, one more
// valid commit frame for page 1 (zeros) without touching the wal-index (-shm): the file a
// writer process leaves when it is killed (or its fsync fails, synchronous=FULL) after it
// wrote its commit frame and before it published the frame in the wal-index header. SQLite
// never counts that frame (the header's mxFrame ends before it) and the next writer overwrites
// it. It returns the frame's number.
func appendDeadCommitFrame(t *testing.T, path string, dbPages uint32) uint32 {
	t.Helper()
	b, err := os.ReadFile(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 32 || binary.BigEndian.Uint32(b) != 0x377f0682 {
		t.Skip("SKIP: the WAL is not a little-endian-checksum WAL")
	}
	pageSize := int(binary.BigEndian.Uint32(b[8:]))
	frameSize := 24 + pageSize
	sum := walChain([2]uint32{}, b[:24])
	n := 0
	for off := 32; off+frameSize <= len(b); off += frameSize {
		f := b[off : off+frameSize]
		if binary.BigEndian.Uint32(f[0:]) == 0 || string(f[8:16]) != string(b[16:24]) {
			break
		}
		next := walChain(walChain(sum, f[:8]), f[24:])
		if next != [2]uint32{binary.BigEndian.Uint32(f[16:]), binary.BigEndian.Uint32(f[20:])} {
			break
		}
		sum = next
		n++
	}
	f := make([]byte, frameSize)
	binary.BigEndian.PutUint32(f[0:], 1)
	binary.BigEndian.PutUint32(f[4:], dbPages)
	copy(f[8:16], b[16:24])
	sum = walChain(walChain(sum, f[:8]), f[24:])
	binary.BigEndian.PutUint32(f[16:], sum[0])
	binary.BigEndian.PutUint32(f[20:], sum[1])
	w, err := os.OpenFile(path+"-wal", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteAt(f, int64(32+n*frameSize)); err != nil {
		t.Fatal(err)
	}
	return uint32(n + 1)
}

// TestRedTeam44WAL_DeadWritersCommitFrame: a writer in another process dies between writing
// its commit frame and publishing it in the wal-index (kill -9 during the WAL's fsync of a
// synchronous=FULL database, orch.db's setting). While the replicator's process lives the
// -shm stays, SQLite never recovers, and the frame is garbage the next commit overwrites. A
// look that takes every checksum-valid commit frame in the file as committed moves its
// position past SQLite's own end of the WAL; the next writer's frames then break the chain
// from that position, and the pages they changed are never shipped (verify fails the sync;
// without it the replica silently lacks them).
func TestRedTeam44WAL_DeadWritersCommitFrame(t *testing.T) {
	_, _, c := bucket(t)
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "agora.db")
	db := openDB(t, path)
	insert(t, db, 0, 200)
	o := replicate.Options{Client: c, DB: "agora", Path: path, Identity: identity, Key: testKey, Lag: time.Hour, Logf: t.Logf}
	r, err := replicate.StartManual(ctx, o, true, 1<<30, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	insert(t, db, 200, 210)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// A commit, then a writer that dies: it held the write lock (its death let it go) and wrote
	// one commit frame; then the look.
	insert(t, db, 210, 212)
	var pages uint32
	if err := db.SQL().QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	appendDeadCommitFrame(t, path, pages)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// The next writers: SQLite overwrites the dead frame.
	for i := range 3 {
		if err := db.Tx(ctx, func(tx *sql.Tx) error {
			_, err := tx.Exec("UPDATE t SET v = ? WHERE n = ?", []byte("after the dead writer"), 20+i*60)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := r.Sync(ctx); err != nil {
			t.Fatalf("sync %d after the dead writer: %v", i, err)
		}
	}
	if st := replicate.Stats(r); st.Full != 1 || st.Unproven != 0 {
		t.Errorf("looks: %+v; want every look after the first from frames (the dead frame is not SQLite's)", st)
	}
	var ok string
	if err := db.SQL().QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("the source after the dead frame: %q, %v", ok, err)
	}
	if got, want := restoreDump(t, r, o), dump(t, db.SQL()); got != want {
		t.Fatal("the restore differs from the source")
	}
}
