package fencefile

import (
	"encoding/binary"
	"fmt"
)

// Helpers only the tests call: the product reaches what they wrap by another way, so they
// live with the tests rather than in the package.

// ParseHeader reads the fixed part of a fence file's contents b and the deadline word as it
// stood. It refuses anything but one whole record with the magic and a valid duration in
// (0, 1h].
func ParseHeader(b []byte) (Header, int64, error) {
	if len(b) != size {
		return Header{}, 0, fmt.Errorf("%d bytes, want %d", len(b), size)
	}
	h, err := parseFixed(b[:offDead])
	if err != nil {
		return h, 0, err
	}
	return h, int64(binary.NativeEndian.Uint64(b[offDead:])), nil
}
