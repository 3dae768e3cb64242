// Package digest names content by its SHA-256. It is a leaf: catalog types, the sandbox
// manifest and the MCP server carry digests without linking the blob store that computes
// them on write.
package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Digest names content by its SHA-256: "sha256:" followed by 64 lowercase hex digits.
type Digest string

const prefix = "sha256:"

// Sum returns the digest of b.
func Sum(b []byte) Digest {
	s := sha256.Sum256(b)
	return FromSum(s[:])
}

// FromSum returns the digest of content whose SHA-256 is sum, as a streaming hash (for a
// file too large to hold at once) computes it.
func FromSum(sum []byte) Digest { return Digest(prefix + hex.EncodeToString(sum)) }

// Parse checks that s is a well-formed digest and returns it.
func Parse(s string) (Digest, error) {
	hexPart, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return "", fmt.Errorf("digest %q: want sha256:<64 hex digits>", s)
	}
	if len(hexPart) != 64 || strings.ToLower(hexPart) != hexPart {
		return "", fmt.Errorf("digest %q: want sha256:<64 lowercase hex digits>", s)
	}
	if _, err := hex.DecodeString(hexPart); err != nil {
		return "", fmt.Errorf("digest %q: want sha256:<64 lowercase hex digits>", s)
	}
	return Digest(s), nil
}

// Hex is the digest without its algorithm prefix.
func (d Digest) Hex() string { return strings.TrimPrefix(string(d), prefix) }

// Short is the first 12 hex digits, for tables meant for people.
func (d Digest) Short() string {
	h := d.Hex()
	h = h[:min(len(h), 12)]
	return h
}

func (d Digest) String() string { return string(d) }
