package remote

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionOf_UnversionedIsItsBytes: a build without a version (this test binary) is named
// by its bytes, the same way whether the worker asks of itself (Version) or the host of the
// worker program it has (VersionOf); a copy with one byte changed, as a stale image of such a
// build is, does not match ("dev" == "dev" passed the check).
func TestVersionOf_UnversionedIsItsBytes(t *testing.T) {
	self := Version()
	if !strings.Contains(self, "+sha256:") || strings.HasSuffix(self, "unknown") {
		t.Fatalf("Version() of an unversioned test binary = %q, want its digest", self)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if got := VersionOf(exe); got != self {
		t.Errorf("VersionOf(own program) = %q, want Version() = %q", got, self)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(t.TempDir(), "agora-worker")
	if err := os.WriteFile(stale, append(b, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := VersionOf(stale); got == self || !strings.HasPrefix(got, "dev+sha256:") {
		t.Errorf("VersionOf(a changed copy) = %q, want another dev+sha256 identity than %q", got, self)
	}
	if got := VersionOf(filepath.Join(t.TempDir(), "missing")); got != "dev+sha256:unknown" {
		t.Errorf("VersionOf(no file) = %q, want dev+sha256:unknown (matches no worker)", got)
	}
}
