package selftest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/selftest"
)

// The end-to-end tests run the whole corpus with the programs `make build` makes (not this
// race-built test binary: a race-built agora per dispatch is most of a run's time), built once
// on first use and removed when the package's tests end.
var (
	builtOnce    sync.Once
	builtBin     string
	builtCleanup func()
	builtErr     error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if builtCleanup != nil {
		builtCleanup()
	}
	os.Exit(code)
}

// agoraBin is the agora program the end-to-end tests drive (internal/agoratest BuildBinary:
// under make test, the bin/ it has just built).
func agoraBin(t *testing.T) string {
	t.Helper()
	builtOnce.Do(func() {
		os.Setenv("AGORA_NO_RESIDENT", "1") // nothing outlives the test's homes
		builtBin, builtCleanup, builtErr = agoratest.BuildBinary()
	})
	if builtErr != nil {
		t.Fatal(builtErr)
	}
	return builtBin
}

// WholeEnv set to 1 makes the docker and kubernetes tests run the whole corpus: make
// test-containers and make test-k8s set it. Without it they run providerSlice, since a
// container or a pod costs 10-15 s a dispatch there and the whole corpus would be most of
// make test's time.
const WholeEnv = "AGORA_SELFTEST_WHOLE"

// providerSlice is the --run arguments of a docker or kubernetes test: nothing under
// WholeEnv, else the first entry for provider of each class, expectation, observation and
// subagent, so every kind of evidence the runner reads is still proven on the provider.
func providerSlice(t *testing.T, provider string) []string {
	t.Helper()
	if os.Getenv(WholeEnv) == "1" {
		return nil
	}
	attacks, err := selftest.Corpus()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[4]string]bool{}
	var ids []string
	for _, a := range attacks {
		k := [4]string{a.Class, a.Expect, a.Observe, a.Subagent}
		if a.For(provider) && !seen[k] {
			seen[k] = true
			ids = append(ids, regexp.QuoteMeta(a.ID))
		}
	}
	t.Logf("%d of the corpus's %d entries: one per class, expectation, observation and subagent (%s=1 runs them all)", len(ids), len(attacks), WholeEnv)
	return []string{"--run", "^(" + strings.Join(ids, "|") + ")$"}
}

// needTools skips, saying so, when a tool every selftest run needs is missing.
func needTools(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("SKIP: bubblewrap not installed (apt-get install bubblewrap): selftest dispatches every attack in a sandbox")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIP: git not installed: every attack's workspace is a git repository")
	}
}

// result is the part of `agora selftest -o json` the tests check.
type result struct {
	Reports []selftest.Report `json:"reports"`
	OK      bool              `json:"ok"`
}

// runSelftest makes a fresh home with agora.yaml yml (none when ""), runs `agora selftest
// ARGS -o json` there and returns the home, the parsed result and the exit code.
func runSelftest(t *testing.T, yml string, args ...string) (string, result, int) {
	t.Helper()
	bin := agoraBin(t)
	home := filepath.Join(t.TempDir(), "home") // agora init makes it, 0700
	agora(t, bin, home, "init")
	if yml != "" {
		if err := os.WriteFile(filepath.Join(home, "agora.yaml"), []byte(yml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(t.Context(), bin, append(append([]string{"selftest"}, args...), "-o", "json")...)
	cmd.Env = append(os.Environ(), "AGORA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("agora selftest %s: exit %d after %s", strings.Join(args, " "), code, time.Since(start).Round(time.Millisecond))
	var res result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || len(res.Reports) != 1 {
		t.Fatalf("agora selftest %s: exit %d, want one report as JSON: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, err, stdout.Bytes(), stderr.Bytes())
	}
	return home, res, code
}

func agora(t *testing.T, bin, home string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = append(os.Environ(), "AGORA_HOME="+home)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("agora %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out
}

// logTimes logs the run's wall time, the slowest attacks and each class's summed attack time
// and rows (the report's classes): the numbers docs/BENCHMARKS.md quotes.
func logTimes(t *testing.T, rep selftest.Report) {
	t.Helper()
	rows := append([]selftest.Row(nil), rep.Rows...)
	sort.Slice(rows, func(i, j int) bool { return rows[i].Seconds > rows[j].Seconds })
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nslowest:", rep.Summary())
	for _, r := range rows[:min(5, len(rows))] {
		fmt.Fprintf(&b, " %s %.1f s;", r.ID, r.Seconds)
	}
	b.WriteString("\nby class (attack seconds summed, rows):")
	for _, c := range rep.Classes {
		fmt.Fprintf(&b, " %s %.1f (%d);", c.Class, c.Seconds, c.Rows)
	}
	// An attack whose sandbox or pod started too late for its time limit runs once more.
	for _, r := range rep.Rows {
		if strings.HasPrefix(r.Evidence, "run again:") {
			fmt.Fprintf(&b, "\n%s: %s", r.ID, r.Evidence)
		}
	}
	t.Log(b.String())
}

// failed lists the rows that did not pass, one a line.
func failed(rep selftest.Report) string {
	var b strings.Builder
	for _, r := range rep.Rows {
		if !r.Pass {
			fmt.Fprintf(&b, "  %s: expected %s, seen %s: %s\n", r.ID, r.Expected, r.Seen, r.Evidence)
		}
	}
	return b.String()
}

// TestSelftest_LocalWholeCorpus runs the whole corpus on the default local (bubblewrap) target
// of a fresh home: every attack blocked, every legitimate operation allowed, none not run,
// the counts those of the corpus, and the run in the home's audit log with the table's
// digest. Without root the disk quota is not enforced, and that row alone may fail, saying so.
func TestSelftest_LocalWholeCorpus(t *testing.T) {
	needTools(t)
	all, err := selftest.Corpus()
	if err != nil {
		t.Fatal(err)
	}
	attacks, legit := 0, 0
	for _, a := range all {
		if a.Expect == selftest.Blocked {
			attacks++
		} else {
			legit++
		}
	}
	home, res, code := runSelftest(t, "", "--target", "local")
	rep := res.Reports[0]
	logTimes(t, rep)
	if len(rep.Rows) != len(all) || rep.Attacks != attacks || rep.Legit != legit {
		t.Errorf("got %d rows, %d attacks, %d legitimate; want the corpus's %d, %d, %d", len(rep.Rows), rep.Attacks, rep.Legit, len(all), attacks, legit)
	}
	for i, r := range rep.Rows {
		if i < len(all) && r.ID != all[i].ID {
			t.Errorf("row %d is %s, want %s: the table keeps the corpus's order", i, r.ID, all[i].ID)
			break
		}
	}
	for _, r := range rep.Rows {
		if r.Seen == selftest.NotRun {
			t.Errorf("%s was not run: %s", r.ID, r.Evidence)
		}
		if r.Seen == selftest.NotEnforced && os.Geteuid() == 0 {
			t.Errorf("%s not enforced as root: %s", r.ID, r.Evidence)
		}
	}
	if os.Geteuid() == 0 {
		if code != 0 || !res.OK || rep.Failed != 0 {
			t.Errorf("exit %d, ok %v, %d failed; want 0, true, 0:\n%s", code, res.OK, rep.Failed, failed(rep))
		}
	} else if rep.Failed != rep.Unenforc {
		t.Errorf("%d failed, %d of them not enforced here; without root only those may fail:\n%s", rep.Failed, rep.Unenforc, failed(rep))
	}
	entries := string(agora(t, agoraBin(t), home, "audit", "log", "--kind", "selftest.run", "-o", "json"))
	if !strings.Contains(entries, `"subject": "target/local"`) || !strings.Contains(entries, rep.Digest) {
		t.Errorf("the audit log lacks the run's selftest.run entry with digest %s:\n%s", rep.Digest, entries)
	}
}
