package replicate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The WAL file's format (https://www.sqlite.org/fileformat2.html#walformat), all big-endian:
// a 32-byte header (magic, version, page size, checkpoint sequence, two salts, a checksum of
// the first 24 bytes), then frames of a 24-byte header (page number, the database's size in
// pages for a commit frame or 0, the two salts, a checksum) and one page. Each frame's
// checksum continues the previous frame's (the header's for the first), over the frame
// header's first 8 bytes and the page; its 32-bit words are read big-endian when the magic's
// low bit is set, little-endian otherwise. A frame belongs to the current WAL only when its
// salts are the header's and its checksum continues the chain: a restart rewrites the header
// with new salts and overwrites the file from the start, leaving older frames behind it.
const (
	walHeaderSize      = 32
	walFrameHeaderSize = 24
	walMagicLE         = 0x377f0682
	walMagicBE         = 0x377f0683
	walVersion         = 3007000
)

// walHeader is a WAL file's header.
type walHeader struct {
	PageSize uint32
	Salt     [2]uint32
	Sum      [2]uint32 // the chain's start
	BE       bool      // checksum words are big-endian
}

// walPos is how far the frames of one WAL (its salts) have been witnessed: every frame up to
// Frame, the last commit frame seen, whose checksum was Sum. Frame 0 is the header itself.
type walPos struct {
	Valid    bool
	Salt     [2]uint32
	PageSize uint32
	BE       bool
	Frame    uint32
	Sum      [2]uint32
}

func parseWALHeader(b []byte) (walHeader, error) {
	if len(b) < walHeaderSize {
		return walHeader{}, errors.New("wal header: short")
	}
	var h walHeader
	switch binary.BigEndian.Uint32(b[0:]) {
	case walMagicLE:
	case walMagicBE:
		h.BE = true
	default:
		return walHeader{}, errors.New("wal header: bad magic")
	}
	if v := binary.BigEndian.Uint32(b[4:]); v != walVersion {
		return walHeader{}, fmt.Errorf("wal header: version %d", v)
	}
	h.PageSize = binary.BigEndian.Uint32(b[8:])
	if h.PageSize == 1 { // how the format writes 65536
		h.PageSize = 65536
	}
	if h.PageSize < 512 || h.PageSize > 65536 || h.PageSize&(h.PageSize-1) != 0 {
		return walHeader{}, fmt.Errorf("wal header: page size %d", h.PageSize)
	}
	h.Salt = [2]uint32{binary.BigEndian.Uint32(b[16:]), binary.BigEndian.Uint32(b[20:])}
	sum := walChecksum(h.BE, [2]uint32{}, b[:24])
	if sum != [2]uint32{binary.BigEndian.Uint32(b[24:]), binary.BigEndian.Uint32(b[28:])} {
		return walHeader{}, errors.New("wal header: checksum mismatch")
	}
	h.Sum = sum
	return h, nil
}

// start is the position of a WAL of which nothing but the header has been witnessed.
func (h walHeader) start() walPos {
	return walPos{Valid: true, Salt: h.Salt, PageSize: h.PageSize, BE: h.BE, Sum: h.Sum}
}

// walChecksum continues s over b (a multiple of 8 bytes), SQLite's Fibonacci-weighted sum.
func walChecksum(be bool, s [2]uint32, b []byte) [2]uint32 {
	s0, s1 := s[0], s[1]
	if be {
		for i := 0; i+8 <= len(b); i += 8 {
			s0 += binary.BigEndian.Uint32(b[i:]) + s1
			s1 += binary.BigEndian.Uint32(b[i+4:]) + s0
		}
	} else {
		for i := 0; i+8 <= len(b); i += 8 {
			s0 += binary.LittleEndian.Uint32(b[i:]) + s1
			s1 += binary.LittleEndian.Uint32(b[i+4:]) + s0
		}
	}
	return [2]uint32{s0, s1}
}

// walFrame is one frame as readFramesTo hands it on.
type walFrame struct {
	No     uint32 // its index in the WAL, from 1
	Page   uint32 // the database page it holds
	Commit uint32 // the database's size in pages after it, for a commit frame; else 0
	Data   []byte // the page, for a commit frame only (valid during the callback); else nil
}

// walIndexHeader is what the wal-index (the -shm file beside the WAL) says of the WAL: SQLite's
// own end of it. The file holds two copies of a 48-byte header in the host's byte order
// (iVersion, unused, iChange, isInit, bigEndCksum, szPage, mxFrame, nPage, aFrameCksum[2],
// aSalt[2] as the WAL header's bytes, aCksum[2]); a writer updates them under the write lock.
// A frame past MaxFrame is not part of the database even when its checksum continues the
// chain: a writer killed after writing its commit frame and before publishing it in this
// header (or whose fsync of the WAL failed) leaves exactly such a frame, and, as long as
// another process keeps the -shm, SQLite never recovers it and the next commit overwrites it.
type walIndexHeader struct {
	MaxFrame uint32
	Salt     [2]uint32
	Sum      [2]uint32 // the checksum of frame MaxFrame (the WAL header's when 0)
}

const walIndexHeaderSize = 48

func parseWALIndexHeader(b []byte) (walIndexHeader, error) {
	if len(b) < 2*walIndexHeaderSize {
		return walIndexHeader{}, errors.New("wal-index header: short")
	}
	if !bytes.Equal(b[:walIndexHeaderSize], b[walIndexHeaderSize:2*walIndexHeaderSize]) {
		return walIndexHeader{}, errors.New("wal-index header: its two copies differ")
	}
	ne := binary.NativeEndian
	if v := ne.Uint32(b[0:]); v != walVersion || b[12] != 1 {
		return walIndexHeader{}, fmt.Errorf("wal-index header: version %d, initialised %d", v, b[12])
	}
	return walIndexHeader{
		MaxFrame: ne.Uint32(b[16:]),
		Sum:      [2]uint32{ne.Uint32(b[24:]), ne.Uint32(b[28:])},
		Salt:     [2]uint32{binary.BigEndian.Uint32(b[32:]), binary.BigEndian.Uint32(b[36:])},
	}, nil
}

// readFramesTo continues the WAL read from r (size bytes) at from, whose salts must be the
// header's, and calls each for every frame up to the last commit frame whose salts match and
// whose checksum continues the chain, in order, reading no frame past limit (the wal-index's
// MaxFrame); frames after that commit frame (a transaction still being written, or one rolled
// back) are read but not passed on. It returns the position at that commit frame (from itself
// when there is none). A frame that breaks the chain ends the WAL, as it does for SQLite's own
// recovery: it is not an error.
func readFramesTo(r io.ReaderAt, size int64, from walPos, limit uint32, each func(walFrame) error) (walPos, error) {
	if !from.Valid || from.PageSize < 512 || from.PageSize > 65536 {
		return from, errors.New("wal: no valid position to read from")
	}
	frameSize := int64(walFrameHeaderSize) + int64(from.PageSize)
	buf := make([]byte, frameSize)
	at := from
	sum := from.Sum
	var held []walFrame // frames since the last commit frame (no page), handed on at a commit
	for n := int64(from.Frame) + 1; ; n++ {
		off := walHeaderSize + (n-1)*frameSize
		if n > int64(limit) || off+frameSize > size {
			break
		}
		if _, err := r.ReadAt(buf, off); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return from, fmt.Errorf("wal: read frame %d: %w", n, err)
		}
		pgno := binary.BigEndian.Uint32(buf[0:])
		commit := binary.BigEndian.Uint32(buf[4:])
		if pgno == 0 || binary.BigEndian.Uint32(buf[8:]) != from.Salt[0] || binary.BigEndian.Uint32(buf[12:]) != from.Salt[1] {
			break
		}
		next := walChecksum(from.BE, sum, buf[:8])
		next = walChecksum(from.BE, next, buf[walFrameHeaderSize:])
		if next != [2]uint32{binary.BigEndian.Uint32(buf[16:]), binary.BigEndian.Uint32(buf[20:])} {
			break
		}
		sum = next
		f := walFrame{No: uint32(n), Page: pgno, Commit: commit}
		if commit == 0 {
			held = append(held, f)
			continue
		}
		f.Data = buf[walFrameHeaderSize:]
		for _, h := range held {
			if err := each(h); err != nil {
				return from, err
			}
		}
		held = held[:0]
		if err := each(f); err != nil {
			return from, err
		}
		at.Frame, at.Sum = uint32(n), sum
	}
	return at, nil
}
