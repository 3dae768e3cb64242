package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
)

// BenchmarkStartTrue compares Start+Wait of `true` through the provider (full sandbox,
// limits, cgroup) with a bare `bwrap --ro-bind / / true`, and with bwrap run directly
// with the provider's own options, which separates the cost of the isolation itself
// (namespaces, binds, /dev, /proc) from the provider's plumbing.
func BenchmarkStartTrue(b *testing.B) {
	requireBwrap(b)
	b.Run("provider", func(b *testing.B) {
		p := newProvider(b, Options{})
		s := compute.Spec{ID: "bench", Argv: []string{"true"}, Env: []string{"PATH=/usr/bin:/bin"}}
		for b.Loop() {
			h, err := p.Start(b.Context(), s)
			if err != nil {
				b.Fatal(err)
			}
			if exit, err := h.Wait(); err != nil || exit.Code != 0 {
				b.Fatalf("Wait = %+v, %v", exit, err)
			}
		}
	})
	b.Run("provider-runas", func(b *testing.B) {
		// As root: the sandbox uid, its limits set with prlimit(2) (no prlimit(1) exec'd
		// inside), and four binds from a private mount namespace, as a dispatch's are.
		if os.Geteuid() != 0 {
			b.Skip("SKIP: needs root to run as another host user")
		}
		p := newProvider(b, Options{})
		dir := b.TempDir()
		var binds []compute.Bind
		for _, d := range []string{"bin", "bundle", "workspace", "out"} {
			if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
				b.Fatal(err)
			}
			binds = append(binds, compute.Bind{Src: filepath.Join(dir, d), Dst: "/agora/" + d, Writable: d == "out"})
		}
		s := compute.Spec{ID: "bench", Argv: []string{"true"}, Env: []string{"PATH=/usr/bin:/bin"}, RunAs: testRunAs, Binds: binds}
		for b.Loop() {
			h, err := p.Start(b.Context(), s)
			if err != nil {
				b.Fatal(err)
			}
			if exit, err := h.Wait(); err != nil || exit.Code != 0 {
				b.Fatalf("Wait = %+v, %v", exit, err)
			}
		}
	})
	b.Run("bwrap-same-options", func(b *testing.B) {
		p := newProvider(b, Options{})
		s := compute.Spec{ID: "bench", Argv: []string{"true"}, Env: []string{"PATH=/usr/bin:/bin"}}
		args := append(bwrapOptions(s, p.system, stagedSystem{}, fdLayout{}, false), "true")
		for b.Loop() {
			cmd := exec.Command(p.bwrap, args...)
			cmd.Env = []string{}
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bare", func(b *testing.B) {
		bwrap, err := exec.LookPath("bwrap")
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := exec.Command(bwrap, "--ro-bind", "/", "/", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
