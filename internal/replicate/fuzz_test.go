package replicate

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecodeSegment: a replica object from the bucket never panics the decoder; what it
// accepts re-encodes to the same bytes (no field is read loosely), and what it refuses is
// ErrCorrupt.
func FuzzDecodeSegment(f *testing.F) {
	s := segment{Identity: "agora-home-x+1+AQ", DB: "agora", Seq: 3, Time: 1, Commit: true, PageSize: 512, PageCount: 2,
		Pages: []page{{No: 2, Data: bytes.Repeat([]byte{7}, 512)}}}
	key := SegmentKey([]byte("fuzz secret key, 32 bytes long.."))
	f.Add(s.encode(key))
	s.Pages, s.Commit = nil, false
	f.Add(s.encode(key))
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeSegment(b, key)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if !bytes.Equal(s.encode(key), b) {
			t.Fatalf("accepted %d bytes that re-encode differently", len(b))
		}
	})
}

// TestDecodeSegment_ForgedKey: attack: a segment written with any key but the home's (a bucket
// writer knows the identity, audit.pub being public, but not keys/secret.key) is refused.
func TestDecodeSegment_ForgedKey(t *testing.T) {
	key := SegmentKey([]byte("the home's secret key, 32 bytes."))
	s := segment{Identity: "agora-home-x+1+AQ", DB: "agora", Time: 1, Commit: true, PageSize: 512, PageCount: 1,
		Pages: []page{{No: 1, Data: bytes.Repeat([]byte{1}, 512)}}}
	if _, err := decodeSegment(s.encode(key), key); err != nil {
		t.Fatal(err)
	}
	forged := s.encode(SegmentKey([]byte("a guess")))
	if _, err := decodeSegment(forged, key); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a forged segment: %v", err)
	}
}
