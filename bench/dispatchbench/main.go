// Command dispatchbench measures the end-to-end overhead of a no-op dispatch: `agora dispatch
// run` of a subagent whose command is `true`, against a bare `bwrap ... true`, in the same run
// on the same machine. It prints medians, p90s and the ratio.
//
//	go build -o bin/agora ./cmd/agora && go run ./bench/dispatchbench -n 50
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
)

func main() {
	n := flag.Int("n", 50, "runs of each")
	bin := flag.String("bin", "bin/agora", "the agora binary")
	flag.Parse()
	if err := run(*n, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "dispatchbench:", err)
		os.Exit(1)
	}
}

func run(n int, bin string) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "dispatchbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	home := filepath.Join(tmp, "home")
	capDir := filepath.Join(tmp, "cap")
	os.MkdirAll(capDir, 0o755)
	if err := os.WriteFile(filepath.Join(capDir, "capability.yaml"), []byte("commands: [\"true\"]\n"), 0o644); err != nil {
		return err
	}
	env := append(os.Environ(), "AGORA_HOME="+home)
	for _, args := range [][]string{
		{"capability", "register", "noop", "--from", capDir},
		{"subagent", "register", "noop", "--command", "true", "--capability", "noop"},
	} {
		c := exec.Command(bin, args...)
		c.Env = env
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("agora %v: %v\n%s", args, err, out)
		}
	}
	dispatch := func() error {
		c := exec.Command(bin, "dispatch", "run", "--subagent", "noop")
		c.Env = env
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("dispatch run: %v\n%s", err, out)
		}
		return nil
	}
	bare := func() error {
		return exec.Command("bwrap", "--ro-bind", "/", "/", "true").Run()
	}
	isolated := func() error {
		return exec.Command("bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr",
			"--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
			"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "true").Run()
	}
	// Warm up caches (page cache, the binary) before measuring.
	for range 3 {
		if err := dispatch(); err != nil {
			return err
		}
		bare()
	}
	// Interleave the three so load changes hit them alike.
	var d, b, iso []time.Duration
	for range n {
		for _, m := range []struct {
			f   func() error
			out *[]time.Duration
		}{{dispatch, &d}, {bare, &b}, {isolated, &iso}} {
			start := time.Now()
			if err := m.f(); err != nil {
				return err
			}
			*m.out = append(*m.out, time.Since(start))
		}
	}
	fmt.Printf("runs: %d each, interleaved\n", n)
	report("agora dispatch run (no-op worker)", d)
	report("bwrap --ro-bind / / true (bare)", b)
	report("bwrap with the sandbox's namespaces", iso)
	fmt.Printf("ratio dispatch/bare median: %.2fx\n", float64(median(d))/float64(median(b)))
	fmt.Printf("ratio dispatch/namespaced-bwrap median: %.2fx\n", float64(median(d))/float64(median(iso)))
	return nil
}

func median(ds []time.Duration) time.Duration { return pct(ds, 50) }

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

func report(name string, ds []time.Duration) {
	fmt.Printf("%-40s median %6.1f ms   p90 %6.1f ms\n", name, ms(median(ds)), ms(pct(ds, 90)))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
