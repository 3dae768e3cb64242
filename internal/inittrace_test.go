package internal_test

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// initBudget is what one package of agora's own may allocate at init, in bytes. It covers a
// few sentinel errors and the sync.OnceValue holders of what is made on first use (72 bytes
// each); a compiled regexp (several KiB), a derived JSON Schema or a built table exceeds it.
// Allocation is deterministic for a given binary, unlike time, so this is what the test pins
// (no package does work at init).
const initBudget = 2048

// initLine is one line of GODEBUG=inittrace=1:
// "init PKG @0.5 ms, 0.01 ms clock, 856 bytes, 14 allocs".
var initLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^init (\S+) @\S+ ms, \S+ ms clock, (\d+) bytes, (\d+) allocs$`)
})

// pkgInit is one package's init as the runtime traced it.
type pkgInit struct {
	pkg           string
	bytes, allocs int
}

// parseInitTrace reads the init lines of a GODEBUG=inittrace=1 stderr; other lines are the
// program's own output.
func parseInitTrace(stderr string) []pkgInit {
	var out []pkgInit
	sc := bufio.NewScanner(strings.NewReader(stderr))
	for sc.Scan() {
		m := initLine().FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		b, _ := strconv.Atoi(m[2])
		a, _ := strconv.Atoi(m[3])
		out = append(out, pkgInit{pkg: m[1], bytes: b, allocs: a})
	}
	return out
}

// overBudget are the inits of agora's own packages that allocate more than budget bytes.
func overBudget(inits []pkgInit, budget int) []pkgInit {
	var out []pkgInit
	for _, in := range inits {
		if strings.HasPrefix(in.pkg, module) && in.bytes > budget {
			out = append(out, in)
		}
	}
	return out
}

func TestParseInitTrace(t *testing.T) {
	trace := "init runtime @0.04 ms, 0.1 ms clock, 0 bytes, 0 allocs\n" +
		"usage: agora ...\n" +
		"init " + module + "internal/secret @4.1 ms, 0.59 ms clock, 412736 bytes, 1570 allocs\n" +
		"init " + module + "internal/audit @12 ms, 0 ms clock, 16 bytes, 1 allocs\n" +
		"init k8s.io/client-go/kubernetes/scheme @19 ms, 6.7 ms clock, 656936 bytes, 5405 allocs\n"
	got := parseInitTrace(trace)
	if len(got) != 4 || got[1] != (pkgInit{module + "internal/secret", 412736, 1570}) {
		t.Fatalf("parseInitTrace = %v", got)
	}
	over := overBudget(got, initBudget)
	if len(over) != 1 || over[0].pkg != module+"internal/secret" {
		t.Errorf("overBudget = %v, want internal/secret alone (third-party inits are not agora's)", over)
	}
}

// TestOverProgramBudget: the whole-program check adds every package's bytes, third-party
// ones included, and names the largest; a program it does not know gets the small budget.
func TestOverProgramBudget(t *testing.T) {
	inits := []pkgInit{
		{pkg: "runtime", bytes: 0},
		{pkg: module + "internal/audit", bytes: 16},
		{pkg: "github.com/distribution/reference", bytes: 414552},
		{pkg: "k8s.io/client-go/kubernetes/scheme", bytes: 656936},
		{pkg: "encoding/gob", bytes: 27088},
	}
	if msg := overProgramBudget("agora-full", inits); msg != "" {
		t.Errorf("agora-full at 1.1 MB is within 2 MiB, got %q", msg)
	}
	msg := overProgramBudget("agora-worker", inits)
	if !strings.Contains(msg, "1098592 bytes at init in 5 packages") ||
		!strings.Contains(msg, "largest: k8s.io/client-go/kubernetes/scheme 656936, github.com/distribution/reference 414552, encoding/gob 27088") {
		t.Errorf("agora-worker over budget: message %q does not total and rank the packages", msg)
	}
	if overProgramBudget("agora-front", inits) == "" {
		t.Error("an unknown program (a small front) got no budget: it must get the worker's")
	}
	big := append(slices.Clone(inits), pkgInit{pkg: "example.com/scheme", bytes: 1 << 20})
	if overProgramBudget("agora-full", big) == "" {
		t.Error("agora-full at 2.1 MB passed its 2 MiB budget")
	}
	if overProgramBudget("agora", inits) == "" {
		t.Error("the front (agora) at 1.1 MB passed: it must get the worker's budget")
	}
}

// TestNoInitWork builds every program under cmd/ and runs it with GODEBUG=inittrace=1: no
// package of agora's own may allocate more than initBudget bytes before main runs, and the
// program as a whole (its dependencies too) stays within its programInitBudgets. Whatever it
// needs (a regexp, a schema, a table) it makes on first use with sync.OnceValue, so a process
// that never uses it never pays for it: every CLI command, each sandbox's worker, each hook.
func TestNoInitWork(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIP: builds every program under cmd/ (-short)")
	}
	progs := mainPackages(t)
	dir := t.TempDir()
	for _, prog := range progs {
		t.Run(path.Base(prog), func(t *testing.T) {
			bin := filepath.Join(dir, path.Base(prog))
			// -trimpath and CGO_ENABLED=0 as make build: its compiled packages serve, so
			// this links (without -trimpath every package compiles again, by its path).
			build := exec.Command("go", "build", "-trimpath", "-o", bin, prog)
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build %s: %v\n%s", prog, err, out)
			}
			inits := traceInits(t, bin)
			for _, in := range overBudget(inits, initBudget) {
				t.Errorf("%s allocates %d bytes (%d allocs) at init in %s, over the budget of %d: make what it builds on first use (sync.OnceValue)",
					strings.TrimPrefix(in.pkg, module), in.bytes, in.allocs, path.Base(prog), initBudget)
			}
			if msg := overProgramBudget(path.Base(prog), inits); msg != "" {
				t.Error(msg)
			}
		})
	}
}

// programInitBudgets is what a whole program may allocate in package init, all its packages
// together (agora's own and its dependencies'), in bytes (every agora process spends at
// most 5 ms in package init). Time is what the target names, but it swings with the machine's
// load; the bytes are the same on every run of a binary, and they follow the work: most of
// agora's init is its dependencies' regexps, schemes and registries, and ~40 % of its clock
// is the page faults of the fresh heap and data pages those allocations touch (perf,
// docs/benchmarks-history.md#28-package-init-session-7). Measured at 67cf834: agora 1,727,224
// bytes in 323 packages with init work (4.9-5.1 ms quiet), agora-worker 84 KB in 99. A new
// dependency that registers an API scheme (client-go's kubernetes/scheme: 656 KB) or compiles
// a regexp table at init (distribution/reference: 414 KB) crosses the line; the message names
// the largest packages so the change that added one is easy to find.
var programInitBudgets = map[string]int{
	// agora-full is the whole program (every command); agora is the front people type
	// (cmd/agora: it hands `dispatch run` to serve and execs agora-full for the rest).
	"agora-full":   2 << 20,
	"agora":        160 << 10,
	"agora-worker": 160 << 10,
}

// otherProgramInitBudget covers a program not named above: a small front (the one-shot CLI
// that forwards to a running serve) exists to start fast and stays as small as the worker.
const otherProgramInitBudget = 160 << 10

// overProgramBudget says how prog's inits exceed its whole-program budget, naming the largest
// packages, or "" when they fit.
func overProgramBudget(prog string, inits []pkgInit) string {
	budget, ok := programInitBudgets[prog]
	if !ok {
		budget = otherProgramInitBudget
	}
	total := 0
	for _, in := range inits {
		total += in.bytes
	}
	if total <= budget {
		return ""
	}
	largest := slices.Clone(inits)
	slices.SortFunc(largest, func(a, b pkgInit) int { return cmp.Compare(b.bytes, a.bytes) })
	var names []string
	for _, in := range largest[:min(8, len(largest))] {
		names = append(names, fmt.Sprintf("%s %d", in.pkg, in.bytes))
	}
	return fmt.Sprintf("%s allocates %d bytes at init in %d packages, over its whole-program budget of %d (#28: <= 5 ms of package init per process); largest: %s. "+
		"A dependency that does work at init costs every command, hook and sandbox start: link it only where it is used, or raise the budget in internal/inittrace_test.go with the measurement that justifies it (docs/BENCHMARKS.md)",
		prog, total, len(inits), budget, strings.Join(names, ", "))
}

// mainPackages lists the module's programs: every main package under cmd/.
func mainPackages(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`, module+"cmd/...").Output()
	if err != nil {
		t.Fatalf("go list %scmd/...: %v%s", module, err, stderrOf(err))
	}
	progs := strings.Fields(string(out))
	if len(progs) == 0 {
		t.Fatal("no main package under cmd/: the programs moved; fix mainPackages")
	}
	return progs
}

// traceInits runs bin --help with the init trace on. Every package init runs before main, so
// the arguments do not change the trace; --help just ends the program quickly.
func traceInits(t *testing.T, bin string) []pkgInit {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--help")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	_ = cmd.Run() // its exit status is the program's business; the trace is on stderr either way
	inits := parseInitTrace(stderr.String())
	if len(inits) == 0 { // the runtime's own init is always traced: the trace did not run
		t.Fatalf("%s --help printed no init trace; stderr:\n%s", bin, clip(stderr.String()))
	}
	return inits
}

func clip(s string) string {
	if len(s) > 2000 {
		return s[:2000] + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return s
}
