// Command initbench measures what an agora process spends in package init before main, from
// the runtime's own trace (GODEBUG=inittrace=1): the sum of every package's init clock time, per
// run, over -runs runs each of `agora version` and `agora --help` (issue #28's goal: at most
// 5 ms, median). -base names another agora binary (an earlier build) measured in the same
// rounds, interleaved, so a change is read against what it replaces under the same load.
//
//	go build -o bin/agora ./cmd/agora && go run ./bench/initbench -runs 30 -base /tmp/agora-main
//
// It prints, per binary and command, the median and p90 of the summed init time, the number of
// packages with init work, the bytes they allocate, and the ten packages with the largest
// median init time (with their bytes, which unlike time do not vary from run to run).
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

func main() {
	runs := flag.Int("runs", 30, "runs of each command per binary")
	bin := flag.String("bin", "bin/agora", "the agora binary")
	base := flag.String("base", "", "another agora binary to measure in the same rounds")
	top := flag.Int("top", 10, "packages to list by median init time")
	flag.Parse()
	bins := []string{*bin}
	if *base != "" {
		bins = append(bins, *base)
	}
	if err := run(bins, *runs, *top); err != nil {
		fmt.Fprintln(os.Stderr, "initbench:", err)
		os.Exit(1)
	}
}

// pkgInit is one package's init in one run.
type pkgInit struct {
	pkg   string
	ms    float64
	bytes int64
}

// series is every run of one binary and command.
type series struct {
	sums  []float64            // summed init ms, per run
	pkgMS map[string][]float64 // per package, its ms in each run
	bytes map[string]int64     // per package, its bytes (the same every run)
	inits int                  // packages traced in a run
}

var commands = [][]string{{"version"}, {"--help"}}

func run(bins []string, runs, top int) error {
	all := map[string]*series{}
	key := func(bin string, args []string) string { return bin + " " + strings.Join(args, " ") }
	for r := 0; r < runs; r++ {
		for i := range bins {
			bin := bins[(i+r)%len(bins)] // alternate which binary goes first
			for _, args := range commands {
				inits, err := trace(bin, args)
				if err != nil {
					return err
				}
				k := key(bin, args)
				s := all[k]
				if s == nil {
					s = &series{pkgMS: map[string][]float64{}, bytes: map[string]int64{}}
					all[k] = s
				}
				sum := 0.0
				for _, in := range inits {
					sum += in.ms
					s.pkgMS[in.pkg] = append(s.pkgMS[in.pkg], in.ms)
					s.bytes[in.pkg] = in.bytes
				}
				s.sums = append(s.sums, sum)
				s.inits = len(inits)
			}
		}
	}
	for _, bin := range bins {
		for _, args := range commands {
			report(key(bin, args), all[key(bin, args)], top)
		}
	}
	return nil
}

// trace runs bin with args and the init trace on, and parses the trace.
func trace(bin string, args []string) ([]pkgInit, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w\n%s", bin, strings.Join(args, " "), err, stderr.String())
	}
	var out []pkgInit
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		// init PKG @0.5 ms, 0.01 ms clock, 856 bytes, 14 allocs
		f := strings.Fields(sc.Text())
		if len(f) != 11 || f[0] != "init" || f[6] != "clock," {
			continue
		}
		ms, err1 := strconv.ParseFloat(f[4], 64)
		b, err2 := strconv.ParseInt(f[7], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: unreadable trace line %q", bin, sc.Text())
		}
		out = append(out, pkgInit{pkg: f[1], ms: ms, bytes: b})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s %s printed no init trace", bin, strings.Join(args, " "))
	}
	return out, nil
}

func report(name string, s *series, top int) {
	var total int64
	for _, b := range s.bytes {
		total += b
	}
	fmt.Printf("%s: init %.2f ms median, %.2f ms p90 (%d runs); %d packages with init work, %d bytes\n",
		name, quantile(s.sums, 0.5), quantile(s.sums, 0.9), len(s.sums), s.inits, total)
	type row struct {
		pkg    string
		median float64
	}
	var rows []row
	for p, ms := range s.pkgMS {
		rows = append(rows, row{p, quantile(ms, 0.5)})
	}
	slices.SortFunc(rows, func(a, b row) int {
		if a.median != b.median {
			if a.median > b.median {
				return -1
			}
			return 1
		}
		return strings.Compare(a.pkg, b.pkg)
	})
	for _, r := range rows[:min(top, len(rows))] {
		fmt.Printf("    %-60s %6.3f ms  %8d bytes\n", r.pkg, r.median, s.bytes[r.pkg])
	}
}

// quantile is the q-quantile of xs by the nearest-rank method.
func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}
