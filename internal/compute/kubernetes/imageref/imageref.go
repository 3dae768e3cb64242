// Package imageref checks the image references a kubernetes target names: pinned by digest,
// REF@sha256:<64 hex>. It runs on the host over config values, imports only the standard
// library, and lives apart from the kubernetes provider (which links client-go) so its fuzz
// target builds without the provider's import graph.
package imageref

import (
	"fmt"
	"strings"
)

// Check accepts only an image reference pinned by digest, REF@sha256:<64 lowercase hex>: a
// tag names whatever was pushed last, so the same target could run different code. REF may
// carry a tag too (the digest decides); it must be non-empty and free of spaces and control
// characters. field names the setting in the error.
func Check(field, ref string) error {
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
