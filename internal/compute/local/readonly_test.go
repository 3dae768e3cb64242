package local

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
)

// TestProvider_ReadOnlyRootAndSizedScratch: the sandbox's root, /etc and /dev are
// read-only (an agent could otherwise plant /etc/ld.so.preload and run its code in the
// worker's capture and hooks), device nodes still work, and /tmp and /dev/shm are capped at
// Limits.Scratch (an unsized tmpfs holds gigabytes of host memory). As another user the
// sandbox's /etc and /dev are staged (stage.go), so both layouts are run.
func TestProvider_ReadOnlyRootAndSizedScratch(t *testing.T) {
	requireBwrap(t)
	t.Run("bwrap-built", func(t *testing.T) { readOnlyRootAndSizedScratch(t, nil) })
	t.Run("staged", func(t *testing.T) {
		requireRoot(t)
		readOnlyRootAndSizedScratch(t, testRunAs)
	})
}

func readOnlyRootAndSizedScratch(t *testing.T, runAs *compute.HostUser) {
	p := newProvider(t, Options{NoCgroup: true})
	script := `
for f in /x /etc/ld.so.preload /etc/passwd /etc/alternatives/x /dev/x /dev/pts/x /agora-new; do
  if touch "$f" 2>/dev/null; then echo "wrote $f"; fi
done
mount -o remount,rw /etc 2>/dev/null && echo "wrote: remounted /etc"
mkdir /var 2>/dev/null && echo "made /var"
echo ok > /dev/null && echo "devnull ok"
echo hi > /tmp/small && echo "tmp ok"
head -c 3000000 /dev/zero > /tmp/big 2>/dev/null || echo "tmp full"
head -c 3000000 /dev/zero > /dev/shm/big 2>/dev/null || echo "shm full"
`
	r := run(t, p, compute.Spec{ID: "ro", Argv: []string{"sh", "-c", script},
		Limits: compute.Limits{Scratch: 2 << 20}, RunAs: runAs})
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
