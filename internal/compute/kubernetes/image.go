package kubernetes

import (
	"fmt"
	"strings"
)

// checkImage accepts only an image reference pinned by digest, REF@sha256:<64 lowercase hex>:
// a tag names whatever was pushed last, so the same target could run different code. REF may
// carry a tag too (the digest decides); it must be non-empty and free of spaces and control
// characters.
func checkImage(field, ref string) error {
	name, dgst, ok := strings.Cut(ref, "@")
	if !ok {
		return fmt.Errorf("%s: image %q is not pinned by digest; want REF@sha256:<64 hex>", field, ref)
	}
	hex, ok := strings.CutPrefix(dgst, "sha256:")
	if !ok || len(hex) != 64 || strings.Contains(dgst, "@") {
		return fmt.Errorf("%s: image %q has no sha256 digest; want REF@sha256:<64 hex>", field, ref)
	}
	for i := 0; i < len(hex); i++ {
		if c := hex[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return fmt.Errorf("%s: image %q: digest is not 64 lowercase hex digits", field, ref)
		}
	}
	if name == "" || len(name) > 255 {
		return fmt.Errorf("%s: image %q: empty or overlong name before @", field, ref)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("%s: image %q: name has a space or control character", field, ref)
		}
	}
	return nil
}
