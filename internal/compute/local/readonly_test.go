package local

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
)

// TestProvider_ReadOnlyRootAndSizedScratch: the sandbox's root, /etc and /dev are
// read-only (an agent could otherwise plant /etc/ld.so.preload and run its code in the
// worker's capture and hooks), device nodes still work, and /tmp and /dev/shm are capped at
// Limits.Scratch (an unsized tmpfs holds gigabytes of host memory).
func TestProvider_ReadOnlyRootAndSizedScratch(t *testing.T) {
	requireBwrap(t)
	p := newProvider(t, Options{NoCgroup: true})
	script := `
for f in /x /etc/ld.so.preload /dev/x /agora-new; do
  if touch "$f" 2>/dev/null; then echo "wrote $f"; fi
done
mkdir /var 2>/dev/null && echo "made /var"
echo ok > /dev/null && echo "devnull ok"
echo hi > /tmp/small && echo "tmp ok"
head -c 3000000 /dev/zero > /tmp/big 2>/dev/null || echo "tmp full"
head -c 3000000 /dev/zero > /dev/shm/big 2>/dev/null || echo "shm full"
`
	r := run(t, p, compute.Spec{ID: "ro", Argv: []string{"sh", "-c", script},
		Limits: compute.Limits{Scratch: 2 << 20}})
	for _, bad := range []string{"wrote", "made /var"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("the sandbox could write its root, /etc or /dev:\n%s", r.stdout)
		}
	}
	for _, want := range []string{"devnull ok", "tmp ok", "tmp full", "shm full"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("want %q:\n%s\nstderr: %s", want, r.stdout, r.stderr)
		}
	}
}
