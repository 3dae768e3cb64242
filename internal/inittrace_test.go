package internal_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
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
// (#28: no package does work at init).
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

// TestNoInitWork builds every program under cmd/ and runs it with GODEBUG=inittrace=1: no
// package of agora's own may allocate more than initBudget bytes before main runs. Whatever it
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
			build := exec.Command("go", "build", "-o", bin, prog)
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build %s: %v\n%s", prog, err, out)
			}
			inits := traceInits(t, bin)
			for _, in := range overBudget(inits, initBudget) {
				t.Errorf("%s allocates %d bytes (%d allocs) at init in %s, over the budget of %d: make what it builds on first use (sync.OnceValue)",
					strings.TrimPrefix(in.pkg, module), in.bytes, in.allocs, path.Base(prog), initBudget)
			}
		})
	}
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
