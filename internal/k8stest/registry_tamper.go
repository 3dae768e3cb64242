package k8stest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ServeUnder makes the registry serve the stored bytes of blob from (a manifest, a layer)
// under the digest under as well: a registry, or its storage, handing out other content for
// a pinned digest. The distribution registry does not check a blob's digest when it reads
// it from disk, so only the puller's check stands between the node and the other content.
func (r *Registry) ServeUnder(from, under string) error {
	src, err := r.blobFile(from)
	if err != nil {
		return err
	}
	dst, err := r.blobFile(under)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("serve %s under %s: %w", from, under, err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		return fmt.Errorf("serve %s under %s: %w", from, under, err)
	}
	return nil
}

// blobFile is where the filesystem storage driver keeps digest's bytes.
func (r *Registry) blobFile(digest string) (string, error) {
	hex, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(hex) != 64 {
		return "", fmt.Errorf("digest %q: want sha256:<64 hex>", digest)
	}
	return filepath.Join(r.dir, "storage", "docker", "registry", "v2", "blobs", "sha256", hex[:2], hex, "data"), nil
}
