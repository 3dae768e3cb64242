package replicate

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// A segment is one replica object: the pages of one database that changed between two read
// snapshots (all of them in a generation's first sync), with the header that ties it to its
// home, database, generation and predecessor. Its layout, all integers big-endian:
//
//	magic      8 bytes  "agrepl01"
//	identity   u16 length, bytes (the home's audit key name; at most maxIdentity)
//	database   u8 length, bytes ("agora" or "orch")
//	generation 16 bytes
//	seq        u64      (0 for the first segment of a generation)
//	time       i64      unix nanoseconds of the read snapshot
//	flags      u8       flagCommit: the last segment of one sync
//	page size  u32      512 to 65536, a power of two
//	page count u32      the database's size in pages at the snapshot
//	prev       32 bytes sha256 of the previous segment (zero for seq 0)
//	pages      u32 count, then count × (u32 page number, page-size bytes), numbers ascending
//	sum        32 bytes HMAC-SHA256 of everything before it, under the home's replica key
//
// The key ([SegmentKey]) derives from keys/secret.key, which is never in the bucket: whoever
// can write to the bucket cannot forge or alter a segment a restore accepts (the identity and
// the chain alone would only stop accidents, audit.pub being public).
// A sync larger than maxPagesPerSegment pages spans several segments; only the last carries
// flagCommit, and a restore applies whole syncs only.
type segment struct {
	Identity   string
	DB         string
	Generation [16]byte
	Seq        uint64
	Time       int64
	Commit     bool
	PageSize   uint32
	PageCount  uint32
	Prev       [32]byte
	Pages      []page
}

type page struct {
	No   uint32
	Data []byte
}

const (
	magic       = "agrepl01"
	flagCommit  = 1
	maxIdentity = 512
	maxDBName   = 64
	// maxSegmentBytes caps one object (a sync of a large database spans several).
	maxSegmentBytes = 16 << 20
	// maxPagesPerSegment keeps a segment of 4 KiB pages near 8 MiB.
	maxPagesPerSegment = 2048
	sumSize            = sha256.Size
)

// ErrCorrupt marks a replica object that does not decode: truncated, altered or not ours.
var ErrCorrupt = errors.New("replica object is corrupt")

// SegmentKey derives the key that authenticates a home's replica segments from its secret
// key (keys/secret.key), so that a restore with the operator's keys accepts only segments
// this home wrote.
func SegmentKey(secretKey []byte) []byte {
	m := hmac.New(sha256.New, secretKey)
	m.Write([]byte("agora replicate segment v1"))
	return m.Sum(nil)
}

func (s *segment) encode(key []byte) []byte {
	n := len(magic) + 2 + len(s.Identity) + 1 + len(s.DB) + 16 + 8 + 8 + 1 + 4 + 4 + 32 + 4 + sumSize
	for _, p := range s.Pages {
		n += 4 + len(p.Data)
	}
	b := make([]byte, 0, n)
	b = append(b, magic...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(s.Identity)))
	b = append(b, s.Identity...)
	b = append(b, byte(len(s.DB)))
	b = append(b, s.DB...)
	b = append(b, s.Generation[:]...)
	b = binary.BigEndian.AppendUint64(b, s.Seq)
	b = binary.BigEndian.AppendUint64(b, uint64(s.Time))
	var flags byte
	if s.Commit {
		flags |= flagCommit
	}
	b = append(b, flags)
	b = binary.BigEndian.AppendUint32(b, s.PageSize)
	b = binary.BigEndian.AppendUint32(b, s.PageCount)
	b = append(b, s.Prev[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.Pages)))
	for _, p := range s.Pages {
		b = binary.BigEndian.AppendUint32(b, p.No)
		b = append(b, p.Data...)
	}
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return m.Sum(b)
}

// decodeSegment reads one replica object. Any damage (a short or altered object, a field out
// of range, pages out of order) is an error wrapping [ErrCorrupt]; the pages alias b.
func decodeSegment(b []byte, key []byte) (*segment, error) {
	bad := func(format string, args ...any) (*segment, error) {
		return nil, fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
	if len(b) > maxSegmentBytes {
		return bad("%d bytes, more than the %d a segment may hold", len(b), maxSegmentBytes)
	}
	if len(b) < len(magic)+sumSize || string(b[:len(magic)]) != magic {
		return bad("not an agora replica segment (no %q header)", magic)
	}
	body, sum := b[:len(b)-sumSize], b[len(b)-sumSize:]
	m := hmac.New(sha256.New, key)
	m.Write(body)
	if !hmac.Equal(m.Sum(nil), sum) {
		return bad("its authentication code does not match (truncated, altered, or written without this home's secret key)")
	}
	r := reader{b: body[len(magic):]}
	s := &segment{}
	s.Identity = string(r.bytes(int(r.u16())))
	s.DB = string(r.bytes(int(r.u8())))
	copy(s.Generation[:], r.bytes(16))
	s.Seq = r.u64()
	s.Time = int64(r.u64())
	flags := r.u8()
	s.Commit = flags&flagCommit != 0
	s.PageSize = r.u32()
	s.PageCount = r.u32()
	copy(s.Prev[:], r.bytes(32))
	n := r.u32()
	if r.short {
		return bad("the header is cut short")
	}
	switch {
	case len(s.Identity) == 0 || len(s.Identity) > maxIdentity:
		return bad("identity of %d bytes", len(s.Identity))
	case len(s.DB) == 0 || len(s.DB) > maxDBName:
		return bad("database name of %d bytes", len(s.DB))
	case flags&^flagCommit != 0:
		return bad("unknown flags %#x", flags)
	case s.PageSize < 512 || s.PageSize > 65536 || s.PageSize&(s.PageSize-1) != 0:
		return bad("page size %d", s.PageSize)
	case s.Time <= 0:
		return bad("time %d", s.Time)
	case uint64(n) > uint64(len(r.b))/(4+uint64(s.PageSize)) || n > maxPagesPerSegment:
		return bad("%d pages do not fit its %d bytes", n, len(r.b))
	}
	s.Pages = make([]page, 0, n)
	var last uint32
	for range n {
		p := page{No: r.u32(), Data: r.bytes(int(s.PageSize))}
		if p.No == 0 || p.No <= last || p.No > s.PageCount {
			return bad("page number %d after %d (page count %d)", p.No, last, s.PageCount)
		}
		last = p.No
		s.Pages = append(s.Pages, p)
	}
	if r.short || len(r.b) != 0 {
		return bad("%d bytes left after the pages", len(r.b))
	}
	return s, nil
}

// reader takes fixed-size fields off a byte slice; past the end it returns zeros and sets short.
type reader struct {
	b     []byte
	short bool
}

func (r *reader) bytes(n int) []byte {
	if n > len(r.b) {
		r.short = true
		r.b = nil
		return make([]byte, n)
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() uint8   { return r.bytes(1)[0] }
func (r *reader) u16() uint16 { return binary.BigEndian.Uint16(r.bytes(2)) }
func (r *reader) u32() uint32 { return binary.BigEndian.Uint32(r.bytes(4)) }
func (r *reader) u64() uint64 { return binary.BigEndian.Uint64(r.bytes(8)) }
