package main

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// pkgInit is one package's init in one run.
type pkgInit struct {
	pkg   string
	ms    float64
	bytes int64
}

// subject is one binary and command, and every run of it.
type subject struct {
	bin  string
	args []string

	sums    []float64            // summed init ms, per run
	cpu     []float64            // the process's CPU ms (user + system), per run
	faults  []float64            // the process's minor page faults, per run
	pkgMS   map[string][]float64 // per package, its ms in each run
	bytes   map[string]int64     // per package, its bytes (the same every run)
	inits   int                  // packages traced in a run
	modules []string             // the binary's module paths, longest first
}

// measure runs the subject once with the init trace on.
func (s *subject) measure() error {
	if s.pkgMS == nil {
		s.pkgMS, s.bytes = map[string][]float64{}, map[string]int64{}
		info, err := buildinfo.ReadFile(s.bin)
		if err != nil {
			return fmt.Errorf("%s: %w", s.bin, err)
		}
		s.modules = append(s.modules, info.Main.Path)
		for _, d := range info.Deps {
			s.modules = append(s.modules, d.Path)
		}
		slices.SortFunc(s.modules, func(a, b string) int { return len(b) - len(a) })
	}
	inits, cpu, faults, err := trace(s.bin, s.args)
	if err != nil {
		return err
	}
	s.cpu = append(s.cpu, cpu)
	s.faults = append(s.faults, faults)
	sum := 0.0
	for _, in := range inits {
		sum += in.ms
		s.pkgMS[in.pkg] = append(s.pkgMS[in.pkg], in.ms)
		s.bytes[in.pkg] = in.bytes
	}
	s.sums = append(s.sums, sum)
	s.inits = len(inits)
	return nil
}

// trace runs bin with args and the init trace on, and parses the trace; it also returns the
// whole process's CPU time in ms (its start, inits and the command, up to exit) and its minor
// page faults. They hint at the binary's page-cache state, which moves its init by up to
// 1.5 ms: a file cached by read() faults ~200 times fewer than one the linker wrote or an exec
// first faulted in; a copy faults as often, but each fault maps a large folio and costs less
// (docs/benchmarks-history.md#28-package-init-session-7). Compare builds in the same state.
func trace(bin string, args []string) ([]pkgInit, float64, float64, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// agora-worker refuses a command line a person types (exit 2) after its inits ran: the
	// exit status is the program's business, the trace is on stderr either way.
	runErr := cmd.Run()
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
			return nil, 0, 0, fmt.Errorf("%s: unreadable trace line %q", bin, sc.Text())
		}
		out = append(out, pkgInit{pkg: f[1], ms: ms, bytes: b})
	}
	if len(out) == 0 {
		return nil, 0, 0, fmt.Errorf("%s %s printed no init trace (%v):\n%s", bin, strings.Join(args, " "), runErr, stderr.String())
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	var faults float64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		faults = float64(ru.Minflt)
	}
	return out, float64(cpu.Microseconds()) / 1000, faults, nil
}

// origin is the module a package comes from ("std" for the standard library).
func (s *subject) origin(pkg string) string {
	for _, m := range s.modules {
		if pkg == m || strings.HasPrefix(pkg, m+"/") {
			return m
		}
	}
	return "std"
}

type row struct {
	name string
	ms   float64
	n    int
}

func sortRows(rows []row) {
	slices.SortFunc(rows, func(a, b row) int {
		if a.ms != b.ms {
			if a.ms > b.ms {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
}

func (s *subject) report(top, origins int) {
	var total int64
	for _, b := range s.bytes {
		total += b
	}
	fmt.Printf("%s: init %s (%d runs); %d packages with init work, %d bytes\n",
		s.name(), summary(s.sums), len(s.sums), s.inits, total)
	fmt.Printf("  the whole process's CPU (user + system): %s\n", summary(s.cpu))
	fmt.Printf("  its minor page faults: %.0f median\n", quantile(s.faults, 0.5))
	var pkgs []row
	byOrigin := map[string]*row{}
	for p, ms := range s.pkgMS {
		med := quantile(ms, 0.5)
		pkgs = append(pkgs, row{name: p, ms: med})
		o := s.origin(p)
		if byOrigin[o] == nil {
			byOrigin[o] = &row{name: o}
		}
		byOrigin[o].ms += med
		byOrigin[o].n++
	}
	var ors []row
	for _, r := range byOrigin {
		ors = append(ors, *r)
	}
	sortRows(ors)
	fmt.Printf("  by origin (sum of each package's median):\n")
	for _, r := range ors[:min(origins, len(ors))] {
		fmt.Printf("    %-60s %6.3f ms  %3d inits\n", r.name, r.ms, r.n)
	}
	sortRows(pkgs)
	fmt.Printf("  largest:\n")
	for _, r := range pkgs[:min(top, len(pkgs))] {
		fmt.Printf("    %-60s %6.3f ms  %8d bytes\n", r.name, r.ms, s.bytes[r.name])
	}
}

// summary is "min / median / p90" of xs in ms.
func summary(xs []float64) string {
	if len(xs) == 0 {
		return "no runs"
	}
	return fmt.Sprintf("%.2f min, %.2f median, %.2f p90 ms", slices.Min(xs), quantile(xs, 0.5), quantile(xs, 0.9))
}

// quantile is the q-quantile of xs by the nearest-rank method.
func quantile(xs []float64, q float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}
