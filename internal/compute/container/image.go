package container

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotPinned means an image reference does not name its content by digest.
var ErrNotPinned = errors.New("image is not pinned by digest")

// maxImageRef bounds an image reference; Docker's own limit on a name is 255 bytes.
const maxImageRef = 512

// Image is an image reference pinned by digest: Name[:tag]@sha256:<64 hex>.
type Image struct {
	// Name is everything before the "@" (repository, and a tag if one was given).
	Name string
	// Digest is "sha256:<64 lowercase hex>".
	Digest string
}

func (i Image) String() string { return i.Name + "@" + i.Digest }

// ParseImage parses a digest-pinned image reference. A reference by tag alone is refused:
// a tag can be moved to other content, and a dispatch must run what was configured.
func ParseImage(s string) (Image, error) {
	if len(s) > maxImageRef {
		return Image{}, fmt.Errorf("image reference is %d bytes, longer than %d", len(s), maxImageRef)
	}
	name, dig, ok := strings.Cut(s, "@")
	if !ok {
		return Image{}, fmt.Errorf("image %q is not pinned by digest; want REF@sha256:<64 hex>: %w", s, ErrNotPinned)
	}
	if !validName(name) {
		return Image{}, fmt.Errorf("image %q: malformed name %q; want REF@sha256:<64 hex>", s, name)
	}
	hex, ok := strings.CutPrefix(dig, "sha256:")
	if !ok || len(hex) != 64 || !isLowerHex(hex) {
		return Image{}, fmt.Errorf("image %q: malformed digest; want REF@sha256:<64 hex>: %w", s, ErrNotPinned)
	}
	return Image{Name: name, Digest: dig}, nil
}

// validName accepts the characters of a Docker reference's name and tag: lowercase
// letters, digits, and the separators . _ - / : (the registry host may have a port and
// uppercase is allowed only in a tag, which the engine checks again).
func validName(s string) bool {
	if s == "" || s[0] == '-' || s[0] == '.' || s[0] == '/' || s[0] == ':' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '_', c == '-', c == '/', c == ':':
		default:
			return false
		}
	}
	return true
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
