package replicate

import (
	"bytes"
	"database/sql"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// walOf writes a database in WAL mode with n rows committed one by one and autocheckpoint off,
// and returns its WAL file's bytes and SQLite's own count of the frames in it.
func walOf(t testing.TB, n, pageSize int) ([]byte, int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "w.db")
	db, err := sql.Open("sqlite", fmt.Sprintf("file:%s?_pragma=page_size(%d)&_pragma=journal_mode(wal)&_pragma=wal_autocheckpoint(0)", path, pageSize))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("CREATE TABLE t (n INTEGER PRIMARY KEY, v BLOB)"); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := db.Exec("INSERT INTO t VALUES (?, ?)", i, bytes.Repeat([]byte{byte(i)}, pageSize/6)); err != nil {
			t.Fatal(err)
		}
	}
	var busy, logged, done int64
	if err := db.QueryRow("PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logged, &done); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	return b, logged
}

// TestWAL_FramesAgreeWithSQLite: the reader finds as many frames as SQLite says its WAL holds,
// every page the rows went to, and stops at a frame whose checksum or salt is wrong.
func TestWAL_FramesAgreeWithSQLite(t *testing.T) {
	b, logged := walOf(t, 40, 4096)
	h, err := parseWALHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint32]bool{}
	pos, err := readFrames(bytes.NewReader(b), int64(len(b)), h.start(), func(f walFrame) error {
		seen[f.Page] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if int64(pos.Frame) != logged || logged < 40 {
		t.Fatalf("read %d frames; SQLite logged %d", pos.Frame, logged)
	}
	if !seen[1] || !seen[2] || len(seen) < 10 {
		t.Fatalf("pages seen: %v", seen)
	}
	// From the middle: a read of the first 20 frames, continued over the whole file, passes
	// on only what follows and ends where one read does.
	frameSize := walFrameHeaderSize + int(h.PageSize)
	first := b[:walHeaderSize+20*frameSize]
	at20, err := readFrames(bytes.NewReader(first), int64(len(first)), h.start(), func(walFrame) error { return nil })
	if err != nil || at20.Frame != 20 {
		t.Fatalf("the first 20 frames: read to %d, %v", at20.Frame, err)
	}
	rest, err := readFrames(bytes.NewReader(b), int64(len(b)), at20, func(f walFrame) error {
		if f.No <= 20 {
			t.Errorf("frame %d passed on again", f.No)
		}
		return nil
	})
	if err != nil || rest != pos {
		t.Fatalf("continued: %+v, %v; want %+v", rest, err, pos)
	}
	// A flipped byte in frame 30's page ends the WAL before frame 30.
	bad := bytes.Clone(b)
	bad[walHeaderSize+29*frameSize+walFrameHeaderSize+100] ^= 1
	cut, err := readFrames(bytes.NewReader(bad), int64(len(bad)), h.start(), func(walFrame) error { return nil })
	if err != nil || cut.Frame >= 30 {
		t.Fatalf("a corrupt frame 30: read to %d, %v", cut.Frame, err)
	}
	// Another WAL's salt in frame 10 ends it there too.
	bad = bytes.Clone(b)
	binary.BigEndian.PutUint32(bad[walHeaderSize+9*frameSize+8:], h.Salt[0]+1)
	cut, _ = readFrames(bytes.NewReader(bad), int64(len(bad)), h.start(), func(walFrame) error { return nil })
	if cut.Frame >= 10 {
		t.Fatalf("a stale frame 10: read to %d", cut.Frame)
	}
	// A header with a wrong checksum is refused.
	bad = bytes.Clone(b)
	bad[20] ^= 1
	if _, err := parseWALHeader(bad); err == nil {
		t.Fatal("a header with a broken checksum parsed")
	}
}

// makeWAL builds a little-endian-checksummed WAL of pageSize pages: frame i holds page
// pages[i], a commit frame when commits[i] is non-zero.
func makeWAL(pageSize uint32, pages, commits []uint32) []byte {
	h := make([]byte, walHeaderSize)
	binary.BigEndian.PutUint32(h[0:], walMagicLE)
	binary.BigEndian.PutUint32(h[4:], walVersion)
	binary.BigEndian.PutUint32(h[8:], pageSize)
	binary.BigEndian.PutUint32(h[16:], 0x1234)
	binary.BigEndian.PutUint32(h[20:], 0x5678)
	sum := walChecksum(false, [2]uint32{}, h[:24])
	binary.BigEndian.PutUint32(h[24:], sum[0])
	binary.BigEndian.PutUint32(h[28:], sum[1])
	out := h
	for i, p := range pages {
		fr := make([]byte, walFrameHeaderSize+int(pageSize))
		binary.BigEndian.PutUint32(fr[0:], p)
		binary.BigEndian.PutUint32(fr[4:], commits[i])
		copy(fr[8:16], h[16:24])
		for j := range fr[walFrameHeaderSize:] {
			fr[walFrameHeaderSize+j] = byte(i + j)
		}
		sum = walChecksum(false, sum, fr[:8])
		sum = walChecksum(false, sum, fr[walFrameHeaderSize:])
		binary.BigEndian.PutUint32(fr[16:], sum[0])
		binary.BigEndian.PutUint32(fr[20:], sum[1])
		out = append(out, fr...)
	}
	return out
}

// FuzzWALFrames: a WAL file's bytes (the host's own file, but a parser all the same) never
// panic the reader, which never reads past the file, passes on no page 0, and returns a
// position within it.
func FuzzWALFrames(f *testing.F) {
	b := makeWAL(512, []uint32{2, 3, 1, 4, 2, 5}, []uint32{0, 0, 3, 0, 5, 0})
	f.Add(b)
	f.Add(b[:walHeaderSize+100])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		from := uint32(0)
		if len(b) > 0 {
			from = uint32(b[len(b)-1])
		}
		h, err := parseWALHeader(b)
		if err != nil {
			return
		}
		p := h.start()
		p.Frame = from % 64
		frames := uint32(0)
		if n := int64(len(b)) - walHeaderSize; n > 0 {
			frames = uint32(n / (walFrameHeaderSize + int64(h.PageSize)))
		}
		var bad *walFrame
		pos, err := readFrames(bytes.NewReader(b), int64(len(b)), p, func(fr walFrame) error {
			if bad == nil && (fr.Page == 0 || fr.No > frames || fr.No <= p.Frame) {
				bad = &fr
			}
			return nil
		})
		if bad != nil {
			t.Fatalf("frame %d (page %d) of a %d-frame WAL read from %d", bad.No, bad.Page, frames, p.Frame)
		}
		if err != nil {
			t.Fatal(err)
		}
		if pos.Frame != p.Frame && pos.Frame > frames {
			t.Fatalf("position %d past the %d frames", pos.Frame, frames)
		}
	})
}
