package dispatch_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/verdict"
)

// runTests is the Python repository's own test runner, outside every gate's changes: it loads
// conftest.py from the root when there is one (as pytest does), runs unittest's discovery of
// tests/test_*.py and, when agora gives it a report directory ($AGORA_REPORT), writes a JUnit
// XML report there after the tests ran.
const runTests = `import os, sys, unittest
from xml.sax.saxutils import quoteattr

root = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, root)
if os.path.exists(os.path.join(root, "conftest.py")):
    import conftest  # noqa: F401  (pytest loads it before collecting)

def cases(s):
    for t in s:
        if isinstance(t, unittest.TestSuite):
            yield from cases(t)
        else:
            yield t

suite = unittest.defaultTestLoader.discover(os.path.join(root, "tests"), pattern="test_*.py", top_level_dir=root)
tests = list(cases(suite))  # before the run, which lets go of them
result = unittest.TextTestRunner(verbosity=2).run(suite)
report = os.environ.get("AGORA_REPORT")
if report:
    bad = {id(t): ("failure", m) for t, m in result.failures}
    bad.update({id(t): ("error", m) for t, m in result.errors})
    skipped = {id(t) for t, _ in result.skipped}
    lines = []
    for t in tests:
        body = ""
        if id(t) in bad:
            kind, msg = bad[id(t)]
            body = "<%s message=%s/>" % (kind, quoteattr(msg.splitlines()[-1]))
        elif id(t) in skipped:
            body = "<skipped/>"
        lines.append("<testcase name=%s>%s</testcase>" % (quoteattr(t.id()), body))
    with open(os.path.join(report, "junit.xml"), "w") as f:
        f.write('<?xml version="1.0" encoding="utf-8"?>\n<testsuite tests="%d" failures="%d" errors="%d">%s</testsuite>\n'
                % (result.testsRun, len(result.failures), len(result.errors), "".join(lines)))
sys.exit(0 if result.wasSuccessful() else 1)
`

// pyRepo is a Python project whose add() raises and whose tests test it: every honest gate on
// it is red until the work fixes src/calc.py.
func pyRepo(t testing.TB) string {
	t.Helper()
	return gitRepo(t, map[string]string{
		"src/calc.py":        "def add(a, b):\n    raise NotImplementedError(\"add\")\n",
		"tests/__init__.py":  "",
		"tests/test_calc.py": "import unittest\n\nfrom src import calc\n\n\nclass TestCalc(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n\n    def test_add_negative(self):\n        self.assertEqual(calc.add(-2, -3), -5)\n",
		"src/__init__.py":    "",
		"Makefile":           "test:\n\tpython3 -m unittest discover -s tests -t .\n",
		"run_tests.py":       runTests,
		"README.md":          "calc\n",
	})
}

func requirePython(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("SKIP: python3 not installed: the gate's commands run Python tests")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("SKIP: make not installed: a gate's command is make test")
	}
}

// exitAtImport is a Python module that ends the process with status 0 as it is imported.
const exitAtImport = "import os\nos._exit(0)\n"

// TestRedTeam44_GatePlantsNeedChanges: each of these patches touches no protected path, adds
// a file that changes what the gate's command runs, and turns a red gate green under a
// deny-list; under changes: [src/**] each is red outside-changes before the command runs,
// naming the path, in the verdict, the detail and the audit's dispatch.verified.
func TestRedTeam44_GatePlantsNeedChanges(t *testing.T) {
	requirePython(t)
	e := newEnv(t)
	repo := pyRepo(t)
	unittestCmd := []string{"python3", "-m", "unittest"}
	// The tests themselves, the runner and the Makefile are protected: each plant gets past
	// all of them.
	protect := []string{"tests/**", "**/test_*.py", "run_tests.py", "Makefile"}
	for _, c := range []struct {
		name, script string
		command      []string
		protect      []string
		want         string // a path the red verdict names
	}{
		// python3 -m unittest puts the work tree first on sys.path: a package named unittest
		// there replaces the runner.
		{"unittest/__main__.py", `mkdir unittest && : > unittest/__init__.py && printf 'raise SystemExit(0)\n' > unittest/__main__.py`,
			unittestCmd, protect, "unittest/__main__.py"},
		// unittest's discovery imports test*.py; the protect glob test_*.py misses testz.py.
		{"testz.py", `printf '` + strings.ReplaceAll(exitAtImport, "\n", `\n`) + `' > testz.py`,
			unittestCmd, protect, "testz.py"},
		// GNU make reads GNUmakefile before Makefile.
		{"GNUmakefile", `printf 'test:\n\t@echo all tests pass\n' > GNUmakefile`,
			[]string{"make", "test"}, protect, "GNUmakefile"},
		// protect: [tests] guards the path "tests" alone, nothing below it.
		{"protect tests", `printf '` + strings.ReplaceAll(exitAtImport, "\n", `\n`) + `' > tests/test_zz.py`,
			[]string{"python3", "-m", "unittest", "discover", "-s", "tests", "-t", "."}, []string{"tests"}, "tests/test_zz.py"},
		// pytest (and this repository's runner, as pytest does) loads conftest.py first.
		{"conftest.py", `printf '` + strings.ReplaceAll(exitAtImport, "\n", `\n`) + `' > conftest.py`,
			[]string{"python3", "run_tests.py"}, protect, "conftest.py"},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "plant-" + strings.ToLower(strings.NewReplacer("/", "-", ".", "-", "_", "-", " ", "-").Replace(c.name))
			e.subagent(name, c.script)
			// Without the plant the gate is red: the tests run and add() raises.
			e.subagent(name+"-none", "true")
			r := e.run(dispatch.Request{Subagent: name + "-none", Repo: repo, Verify: &verdict.Spec{Command: c.command, Protect: c.protect}})
			if v := r.Verdict; v == nil || v.Passed || v.Reason != verdict.ReasonExit {
				t.Fatalf("the base is not red under %v: %s %s, verdict %+v", c.command, r.State, r.Reason, v)
			}
			// A deny-list lets the plant through: the gate is green. This is the hole.
			r = e.run(dispatch.Request{Subagent: name, Repo: repo, Verify: &verdict.Spec{Command: c.command, Protect: c.protect}})
			if v := r.Verdict; r.State != lifecycle.DispatchFinished || v == nil || !v.Passed {
				t.Fatalf("without changes: %s %s (%s), verdict %+v; want the plant to turn the gate green", r.State, r.Reason, r.Detail, v)
			}
			// An allow-list refuses it before the command runs.
			spec := &verdict.Spec{Command: c.command, Protect: c.protect, Changes: []string{"src/**"}}
			r = e.run(dispatch.Request{Subagent: name, Repo: repo, Verify: spec})
			v := r.Verdict
			if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonVerifyFailed || v == nil || v.Passed || v.Reason != verdict.ReasonOutside {
				t.Fatalf("with changes: %s %s (%s), verdict %+v; want red outside-changes", r.State, r.Reason, r.Detail, v)
			}
			if !contains(v.OutsidePaths, c.want) || !strings.Contains(v.Detail, `"`+c.want+`" (outside changes)`) || !strings.Contains(r.Detail, c.want) {
				t.Errorf("the verdict does not name %q: paths %q, detail %q", c.want, v.OutsidePaths, v.Detail)
			}
			if v.Exit != -1 || v.OutputBytes != 0 || v.DurationMS != 0 {
				t.Errorf("the command ran: %+v", v)
			}
			verified := auditEntry(t, e, r.ID, "dispatch.verified")
			if !strings.Contains(verified, `"outside_paths":[`) || !strings.Contains(verified, `"`+c.want+`"`) ||
				!strings.Contains(verified, `"reason":"outside-changes"`) || !strings.Contains(verified, v.Digest()) {
				t.Errorf("dispatch.verified does not carry the path and reason: %s", verified)
			}
			if accepted := auditEntry(t, e, r.ID, "dispatch.accepted"); !strings.Contains(accepted, `"changes":["src/**"]`) {
				t.Errorf("dispatch.accepted does not record the changes: %s", accepted)
			}
		})
	}
	t.Run("the honest fix is green", func(t *testing.T) {
		e.subagent("honest", `printf 'def add(a, b):\n    return a + b\n' > src/calc.py`)
		for _, cmd := range [][]string{unittestCmd, {"make", "test"}, {"python3", "run_tests.py"}} {
			r := e.run(dispatch.Request{Subagent: "honest", Repo: repo, Verify: &verdict.Spec{Command: cmd, Protect: protect, Changes: []string{"src/**"}}})
			if v := r.Verdict; r.State != lifecycle.DispatchFinished || v == nil || !v.Passed || !strings.Contains(v.OutputTail, "OK") {
				t.Fatalf("%v: %s %s (%s), verdict %+v; want green", cmd, r.State, r.Reason, r.Detail, v)
			}
		}
	})
}

// TestRedTeam44_ExitAtImportNeedsEvidence: a module inside changes that exits 0 as it is
// imported ends the test process before any test, and the exit status says success; a gate
// that expects the runner's JUnit report is red no-evidence, and the honest fix is green with
// the report's counts in the verdict and the audit.
func TestRedTeam44_ExitAtImportNeedsEvidence(t *testing.T) {
	requirePython(t)
	e := newEnv(t)
	repo := pyRepo(t)
	cmd := []string{"python3", "run_tests.py"}
	changes := []string{"src/**"}
	expect := &verdict.Expect{JUnit: "junit.xml", MinTests: 2}
	e.subagent("exiter", `printf '`+strings.ReplaceAll(exitAtImport, "\n", `\n`)+`def add(a, b):\n    return 0\n' > src/calc.py`)

	r := e.run(dispatch.Request{Subagent: "exiter", Repo: repo, Verify: &verdict.Spec{Command: cmd, Changes: changes}})
	if v := r.Verdict; v == nil || !v.Passed {
		t.Fatalf("without expect: %s %s (%s), verdict %+v; want the exit at import to read green", r.State, r.Reason, r.Detail, v)
	}

	r = e.run(dispatch.Request{Subagent: "exiter", Repo: repo, Verify: &verdict.Spec{Command: cmd, Changes: changes, Expect: expect}})
	v := r.Verdict
	if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonVerifyFailed || v == nil || v.Passed || v.Reason != verdict.ReasonEvidence {
		t.Fatalf("with expect: %s %s (%s), verdict %+v; want red no-evidence", r.State, r.Reason, r.Detail, v)
	}
	if want := "the command exited 0 but wrote no /agora/report/junit.xml: its tests did not run to their end"; v.Detail != want || v.Exit != 0 || v.Evidence != nil {
		t.Errorf("detail %q, exit %d, evidence %+v; want %q", v.Detail, v.Exit, v.Evidence, want)
	}
	if verified := auditEntry(t, e, r.ID, "dispatch.verified"); !strings.Contains(verified, `"reason":"no-evidence"`) {
		t.Errorf("dispatch.verified: %s", verified)
	}

	e.subagent("broken", `printf 'def add(a, b):\n    return a - b\n' > src/calc.py`)
	r = e.run(dispatch.Request{Subagent: "broken", Repo: repo, Verify: &verdict.Spec{Command: cmd, Changes: changes, Expect: expect}})
	if v := r.Verdict; v == nil || v.Reason != verdict.ReasonExit || v.Evidence == nil || v.Evidence.Failures != 2 || v.Evidence.Tests != 2 {
		t.Fatalf("a failing fix: %s %s (%s), verdict %+v; want red exit-status with the report's counts", r.State, r.Reason, r.Detail, v)
	}

	e.subagent("honest", `printf 'def add(a, b):\n    return a + b\n' > src/calc.py`)
	r = e.run(dispatch.Request{Subagent: "honest", Repo: repo, Verify: &verdict.Spec{Command: cmd, Changes: changes, Expect: expect}})
	v = r.Verdict
	if r.State != lifecycle.DispatchFinished || v == nil || !v.Passed {
		t.Fatalf("the honest fix: %s %s (%s), verdict %+v; want green", r.State, r.Reason, r.Detail, v)
	}
	if want := (verdict.Evidence{Report: "junit.xml", Tests: 2}); v.Evidence == nil || *v.Evidence != want {
		t.Errorf("evidence %+v, want %+v", v.Evidence, want)
	}
	verified := auditEntry(t, e, r.ID, "dispatch.verified")
	if !strings.Contains(verified, `"evidence":{"errors":0,"failures":0,"report":"junit.xml","skipped":0,"tests":2}`) {
		t.Errorf("dispatch.verified lacks the counts: %s", verified)
	}
	if !strings.Contains(v.Summary(), "2 tests, 0 failures") {
		t.Errorf("summary %q", v.Summary())
	}
	// Asking for more tests than ran is red.
	r = e.run(dispatch.Request{Subagent: "honest", Repo: repo, Verify: &verdict.Spec{Command: cmd, Changes: changes, Expect: &verdict.Expect{JUnit: "junit.xml", MinTests: 3}}})
	if v := r.Verdict; v == nil || v.Reason != verdict.ReasonEvidence || !strings.Contains(v.Detail, "fewer than the 3") || v.Evidence == nil {
		t.Fatalf("min_tests 3: verdict %+v; want red no-evidence", v)
	}
}

// TestRedTeam44_ReportDirectoryIsAgoras: the report directory is fresh and empty when the
// command starts, outside the tree the patch fills, and read only as a regular file with no
// link: a report the command leaves as a symlink, a FIFO or a hard link, or a report shipped
// in the patch at the path the sandbox sees, is no evidence.
func TestRedTeam44_ReportDirectoryIsAgoras(t *testing.T) {
	e := newEnv(t)
	repo := gitRepo(t, map[string]string{"README": "one\n"})
	good := `<testsuite><testcase name="a"/></testsuite>`
	// The agent ships a passing report in every place it can reach.
	e.subagent("shipper", `mkdir -p agora/report report && for d in agora/report report .; do printf '`+good+`' > $d/junit.xml; done`)
	for _, c := range []struct {
		name, script, want string
	}{
		{"nothing written", `test -z "$(ls -A "$AGORA_REPORT")" && test "$AGORA_REPORT" = /agora/report && test -f junit.xml`, "wrote no /agora/report/junit.xml"},
		{"symlink", `ln -s /agora/workspace/junit.xml "$AGORA_REPORT/junit.xml"`, "symlink"},
		{"fifo", `mkfifo "$AGORA_REPORT/junit.xml"`, "not a regular file"},
		{"hard link", `printf '` + good + `' > "$AGORA_REPORT/a.xml" && ln "$AGORA_REPORT/a.xml" "$AGORA_REPORT/junit.xml"`, "hard link"},
		{"directory", `mkdir "$AGORA_REPORT/junit.xml"`, "not a regular file"},
		{"not junit", `echo 'PASS 1 test' > "$AGORA_REPORT/junit.xml"`, "not JUnit XML"},
		{"no tests", `printf '<testsuite/>' > "$AGORA_REPORT/junit.xml"`, "0 test(s) that ran"},
		{"a skipped test only", `printf '<testsuite><testcase><skipped/></testcase></testsuite>' > "$AGORA_REPORT/junit.xml"`, "0 test(s) that ran"},
		{"a suite error", `printf '<testsuite errors="1"><testcase/></testsuite>' > "$AGORA_REPORT/junit.xml"`, "1 error(s)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.run(dispatch.Request{Subagent: "shipper", Repo: repo, Verify: &verdict.Spec{Command: []string{"sh", "-c", c.script},
				Expect: &verdict.Expect{JUnit: "junit.xml"}}})
			v := r.Verdict
			if v == nil || v.Passed || v.Reason != verdict.ReasonEvidence || !strings.Contains(v.Detail, c.want) {
				t.Fatalf("%s %s (%s), verdict %+v; want red no-evidence with %q", r.State, r.Reason, r.Detail, v, c.want)
			}
		})
	}
	t.Run("a report written is read", func(t *testing.T) {
		r := e.run(dispatch.Request{Subagent: "shipper", Repo: repo, Verify: &verdict.Spec{Command: []string{"sh", "-c", `printf '` + good + `' > "$AGORA_REPORT/junit.xml"`},
			Expect: &verdict.Expect{JUnit: "junit.xml"}}})
		if v := r.Verdict; v == nil || !v.Passed || v.Evidence == nil || v.Evidence.Tests != 1 {
			t.Fatalf("%s %s (%s), verdict %+v; want green with 1 test", r.State, r.Reason, r.Detail, v)
		}
	})
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// auditEntry is the audit entry of kind about dispatch id, as stored (JSON).
func auditEntry(t *testing.T, e *env, id, kind string) string {
	t.Helper()
	for _, line := range strings.Split(e.auditDump(), "\n") {
		if strings.Contains(line, `"kind":"`+kind+`"`) && strings.Contains(line, id) {
			if !json.Valid([]byte(line)) {
				t.Fatalf("audit entry is not JSON: %s", line)
			}
			return line
		}
	}
	t.Fatalf("no %s entry for %s", kind, id)
	return ""
}

// TestRedTeam44_ChangesOnEveryKindOfChange: the allow-list judges what git applies, not the
// patch's text: renames (both sides), deletions, modes, types, symbolic links (resolved from
// their directory), submodules, case, look-alike and non-UTF-8 names, attribute files and
// binary files. A path outside changes is red before the command, which would pass, runs.
func TestRedTeam44_ChangesOnEveryKindOfChange(t *testing.T) {
	e := newEnv(t)
	repo := pyRepo(t)
	spec := func() *verdict.Spec {
		return &verdict.Spec{Command: passIfRun, Changes: []string{"src/**"}, Protect: []string{"src/secret/**"}}
	}
	for _, c := range []struct {
		name, script string
		want         []string // the paths named, in order; nil: green
		why          string   // a part of the detail
	}{
		{"rename out of changes", `mv src/calc.py calc.py`, []string{"calc.py"}, "(outside changes)"},
		{"rename into changes", `mv tests/test_calc.py src/test_calc.py`, []string{"tests/test_calc.py"}, "(outside changes)"},
		{"delete outside", `rm README.md`, []string{"README.md"}, "(outside changes)"},
		{"mode change outside", `chmod +x run_tests.py`, []string{"run_tests.py"}, "(outside changes)"},
		{"mode change inside", `chmod +x src/calc.py`, nil, ""},
		{"link inside to inside", `ln -s calc.py src/alias.py`, nil, ""},
		{"link inside to the tests", `ln -s ../tests/test_calc.py src/t.py`, []string{"src/t.py"}, `a symbolic link to \"tests/test_calc.py\", outside changes`},
		{"link inside to a protected path", `ln -s secret/key src/k`, []string{"src/k"}, "a protected path"},
		{"link inside out of the tree", `ln -s ../../../../etc/passwd src/p`, []string{"src/p"}, "leaves the tree"},
		{"absolute link inside", `ln -s /etc/passwd src/p`, []string{"src/p"}, "absolute"},
		{"file turned link", `rm src/calc.py && ln -s ../run_tests.py src/calc.py`, []string{"src/calc.py"}, `a symbolic link to \"run_tests.py\"`},
		{"directory turned link", `rm -r tests && ln -s src tests`, []string{"tests", "tests/__init__.py", "tests/test_calc.py"}, "(outside changes)"},
		{"case differs", `mkdir Src && echo x > Src/calc.py`, []string{"Src/calc.py"}, "(outside changes)"},
		{"look-alike directory", `mkdir srс && echo x > srс/calc.py`, []string{"srс/calc.py"}, "(outside changes)"},
		{"non-UTF-8 name", `echo x > "$(printf 'a\377')"`, []string{`"a\xff"`}, "(outside changes)"},
		{"attributes at the root", `printf '* filter=evil\n' > .gitattributes`, []string{".gitattributes"}, "(outside changes)"},
		{"attributes inside", `printf 'calc.py text eol=crlf\n' > src/.gitattributes`, nil, ""},
		{"binary outside", `head -c 256 /dev/urandom > data.bin`, []string{"data.bin"}, "(outside changes)"},
		{"binary inside", `head -c 256 /dev/urandom > src/data.bin`, nil, ""},
		{"submodule inside", `git init -q src/vendor && git -C src/vendor -c user.name=a -c user.email=a@a commit -q --allow-empty -m x`, []string{"src/vendor"}, "submodule"},
		{"dot-dot spelled in a new name", `mkdir -p src/a && echo x > src/a/..x`, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "kind-" + strings.ToLower(strings.NewReplacer(" ", "-").Replace(c.name))
			e.subagent(name, c.script)
			r := e.run(dispatch.Request{Subagent: name, Repo: repo, Verify: spec()})
			v := r.Verdict
			if v == nil {
				t.Fatalf("%s %s (%s): no verdict", r.State, r.Reason, r.Detail)
			}
			if c.want == nil {
				if !v.Passed || v.OutputTail != "ran\n" {
					t.Fatalf("%s %s (%s), verdict %+v; want green", r.State, r.Reason, r.Detail, v)
				}
				return
			}
			if v.Passed || v.Reason != verdict.ReasonOutside || strings.Contains(v.OutputTail, "ran") {
				t.Fatalf("%s %s (%s), verdict %+v; want red outside-changes before the command", r.State, r.Reason, r.Detail, v)
			}
			if strings.Join(v.OutsidePaths, "|") != strings.Join(c.want, "|") {
				t.Errorf("paths %q, want %q", v.OutsidePaths, c.want)
			}
			if !strings.Contains(strings.ReplaceAll(v.Detail, `"`, `\"`), c.why) {
				t.Errorf("detail %q lacks %q", v.Detail, c.why)
			}
		})
	}
}
