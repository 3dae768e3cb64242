// Command verifybench measures `agora verify` of a large audit bundle against `sha256sum` of
// the same file, interleaved in one run on the same machine (the target: no slower than
// sha256sum, peak memory under 3x the file). It writes a real bundle with the audit package
// (a SQLite log of -n entries, a signed checkpoint, an export), then runs each command -runs
// times in turn and prints the median wall time and the largest max RSS of each.
//
//	go build -o bin/agora ./cmd/agora && go run ./bench/verifybench -n 100000 -runs 5
//
// -base names another agora binary (an earlier build) measured in the same rounds, so a change
// is measured against what it replaces at the same time. It needs /usr/bin/time (GNU time)
// for each command's max RSS. -dir keeps the bundle and key there
// (reused by a later run with the same -n) instead of a temporary directory.
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/store"
)

func main() {
	n := flag.Int("n", 100_000, "entries in the bundle")
	runs := flag.Int("runs", 5, "runs of each command")
	bin := flag.String("bin", "bin/agora", "the agora binary")
	base := flag.String("base", "", "another agora binary to measure in the same rounds")
	dir := flag.String("dir", "", "keep the bundle here (reused when it exists) instead of a temporary directory")
	synthetic := flag.Bool("synthetic", false, "write the bundle without a database (writeSynthetic): for 10M entries")
	flag.Parse()
	if err := run(*n, *runs, *bin, *base, *dir, *synthetic); err != nil {
		fmt.Fprintln(os.Stderr, "verifybench:", err)
		os.Exit(1)
	}
}

// sample is one run of a command: its wall time and peak resident memory.
type sample struct {
	wall   time.Duration
	cpu    time.Duration // user + system
	maxRSS int64         // bytes
}

func run(n, runs int, bin, base, dir string, synthetic bool) error {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "verifybench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	name := fmt.Sprintf("bundle-%d", n)
	if synthetic {
		name += "-synthetic"
	}
	bundle := filepath.Join(dir, name+".json")
	key := filepath.Join(dir, name+".pub")
	if _, err := os.Stat(bundle); errors.Is(err, os.ErrNotExist) {
		start := time.Now()
		write := func() error { return writeBundle(context.Background(), dir, n, bundle, key) }
		if synthetic {
			write = func() error { return writeSynthetic(n, bundle, key) }
		}
		if err := write(); err != nil {
			return fmt.Errorf("write the bundle: %w", err)
		}
		fmt.Printf("wrote %s in %s\n", bundle, time.Since(start).Round(time.Millisecond))
	}
	st, err := os.Stat(bundle)
	if err != nil {
		return err
	}
	cmds := []struct {
		name string
		argv []string
	}{
		{"sha256sum", []string{"sha256sum", bundle}},
		{"agora verify", []string{bin, "verify", bundle, "--key", key}},
	}
	if base != "" {
		cmds = append(cmds, struct {
			name string
			argv []string
		}{"agora verify (base)", []string{base, "verify", bundle, "--key", key}})
	}
	got := make([][]sample, len(cmds))
	for r := 0; r < runs; r++ {
		for i, c := range cmds {
			s, err := measure(c.argv)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			got[i] = append(got[i], s)
		}
	}
	fmt.Printf("bundle: %d entries, %.1f MB; %d interleaved runs each; load average %s\n",
		n, float64(st.Size())/1e6, runs, loadavg())
	fmt.Printf("%-22s %10s %10s %10s %12s %10s\n", "command", "median", "min", "CPU med", "max RSS MB", "RSS/file")
	shaMedian, shaCPU := median(got[0]), medianCPU(got[0])
	for i, c := range cmds {
		m := median(got[i])
		rss := slices.MaxFunc(got[i], func(a, b sample) int { return int(a.maxRSS - b.maxRSS) }).maxRSS
		fmt.Printf("%-22s %10s %10s %10s %12.1f %10.3f   %.2fx sha256sum wall, %.2fx CPU\n", c.name, m.Round(time.Millisecond),
			minWall(got[i]).Round(time.Millisecond), medianCPU(got[i]).Round(time.Millisecond), float64(rss)/1e6, float64(rss)/float64(st.Size()),
			float64(m)/float64(shaMedian), float64(medianCPU(got[i]))/float64(shaCPU))
	}
	fmt.Printf("load average after: %s\n", loadavg())
	return nil
}

// measure runs argv under /usr/bin/time with its output discarded and returns its wall time
// and max RSS. /usr/bin/time forks its child, so the RSS is the child's own: Go starts a
// child with vfork, and Linux would report this process's peak (large, after writing the
// bundle) as the child's. A verify that fails (exit status not 0) is an error: a benchmark of
// a failing check is none.
func measure(argv []string) (sample, error) {
	out, err := os.CreateTemp("", "verifybench-rss")
	if err != nil {
		return sample{}, err
	}
	out.Close()
	defer os.Remove(out.Name())
	cmd := exec.Command("/usr/bin/time", append([]string{"-f", "%M %U %S", "-o", out.Name()}, argv...)...)
	cmd.Stderr = os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return sample{}, err
	}
	wall := time.Since(start)
	b, err := os.ReadFile(out.Name())
	if err != nil {
		return sample{}, err
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return sample{}, fmt.Errorf("/usr/bin/time said %q", b)
	}
	kib, err := strconv.ParseInt(f[len(f)-3], 10, 64)
	if err != nil {
		return sample{}, fmt.Errorf("/usr/bin/time said %q: %w", b, err)
	}
	user, err1 := strconv.ParseFloat(f[len(f)-2], 64)
	sys, err2 := strconv.ParseFloat(f[len(f)-1], 64)
	if err1 != nil || err2 != nil {
		return sample{}, fmt.Errorf("/usr/bin/time said %q", b)
	}
	return sample{wall: wall, cpu: time.Duration((user + sys) * float64(time.Second)), maxRSS: kib * 1024}, nil
}

func median(s []sample) time.Duration {
	w := make([]time.Duration, len(s))
	for i := range s {
		w[i] = s[i].wall
	}
	slices.Sort(w)
	return w[len(w)/2]
}

// medianCPU is the median user + system time.
func medianCPU(s []sample) time.Duration {
	c := make([]time.Duration, len(s))
	for i := range s {
		c[i] = s[i].cpu
	}
	slices.Sort(c)
	return c[len(c)/2]
}

func minWall(s []sample) time.Duration {
	return slices.MinFunc(s, func(a, b sample) int { return int(a.wall - b.wall) }).wall
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// writeBundle appends n entries to a fresh audit log, checkpoints it and exports the whole
// range, as `agora audit export` does, then writes the bundle and the public key.
func writeBundle(ctx context.Context, dir string, n int, bundlePath, keyPath string) error {
	dbPath := filepath.Join(dir, "bench-audit.db")
	os.Remove(dbPath)
	defer os.Remove(dbPath)
	db, err := store.Open(ctx, dbPath, audit.Migrations)
	if err != nil {
		return err
	}
	defer db.Close()
	l := audit.New(nil)
	for done := 0; done < n; {
		batch := make([]audit.Entry, min(5000, n-done))
		for i := range batch {
			batch[i] = audit.Entry{Actor: "alice", Kind: "catalog.register", Subject: fmt.Sprintf("capability/c%d", done+i),
				Details: map[string]any{"digest": "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}}
		}
		if err := db.Tx(ctx, func(tx *sql.Tx) error {
			_, err := l.AppendAll(ctx, tx, batch)
			return err
		}); err != nil {
			return err
		}
		done += len(batch)
	}
	var id [8]byte
	rand.Read(id[:])
	skey, vkey, err := note.GenerateKey(rand.Reader, "agora/"+hex.EncodeToString(id[:]))
	if err != nil {
		return err
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		return err
	}
	cp, err := audit.NewCheckpointer(db, audit.CheckpointerOptions{LogName: "agora.db", Signer: signer, VerifierKey: vkey, Every: 10, Interval: time.Hour})
	if err != nil {
		return err
	}
	if _, err := cp.Checkpoint(ctx); err != nil {
		return err
	}
	b, err := cp.Export(ctx, audit.Selection{})
	if err != nil {
		return err
	}
	f, err := os.Create(bundlePath)
	if err != nil {
		return err
	}
	if err := verify.WriteBundle(f, b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.WriteFile(keyPath, []byte(vkey+"\n"), 0o644)
}
