package dispatch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/verdict"
)

// passingTests is a test module of pyRepo's two test names whose tests assert nothing.
const passingTests = `import unittest


class TestCalc(unittest.TestCase):
    def test_add(self):
        pass

    def test_add_negative(self):
        pass
`

// TestRedTeam44G_BytecodeShadowsAProtectedTest: protect keeps the paths it names still, not
// what a runner loads in their place. With the tests' directory inside changes and the test
// file protected (how a task that edits code and tests is told to keep the judging tests
// still), an unchecked-hash bytecode file in tests/__pycache__ is imported instead of the
// protected tests/test_calc.py: Python does not compare such a file with its source, and
// unittest's discovery sees the module's __file__ as the source. The gate is green with the
// runner's own report, for work that fixes nothing. This is the residue docs/plan.md states;
// keeping the tests outside changes, or protecting their directory whole, makes it red.
func TestRedTeam44G_BytecodeShadowsAProtectedTest(t *testing.T) {
	requirePython(t)
	e := newEnv(t)
	repo := pyRepo(t)
	e.subagent("bytecode", `python3 - <<'EOF'
import os, py_compile, sys, tempfile
src = os.path.join(tempfile.mkdtemp(), "test_calc.py")
with open(src, "w") as f:
    f.write('''`+passingTests+`''')
os.makedirs("tests/__pycache__", exist_ok=True)
py_compile.compile(src, cfile="tests/__pycache__/test_calc.%s.pyc" % sys.implementation.cache_tag, doraise=True,
                   invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
EOF`)
	cmd := []string{"python3", "run_tests.py"}
	expect := &verdict.Expect{JUnit: "junit.xml", MinTests: 2}
	protect := []string{"tests/test_calc.py", "tests/__init__.py", "run_tests.py"}

	r := e.run(dispatch.Request{Subagent: "bytecode", Repo: repo, Verify: &verdict.Spec{Command: cmd,
		Changes: []string{"src/**", "tests/**"}, Protect: protect, Expect: expect}})
	v := r.Verdict
	if r.State != lifecycle.DispatchFinished || v == nil || !v.Passed || v.Evidence == nil || v.Evidence.Ran() != 2 {
		t.Fatalf("tests inside changes, the test file protected: %s %s (%s), verdict %+v; want the residue: green with 2 tests", r.State, r.Reason, r.Detail, v)
	}
	if !strings.Contains(v.OutputTail, "OK") {
		t.Errorf("output %q", v.OutputTail)
	}

	for _, c := range []struct {
		name             string
		changes, protect []string
		reason           string
	}{
		{"the tests outside changes", []string{"src/**"}, protect, verdict.ReasonOutside},
		{"the tests' directory protected whole", []string{"src/**", "tests/**"}, []string{"tests/**", "run_tests.py"}, verdict.ReasonProtected},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.run(dispatch.Request{Subagent: "bytecode", Repo: repo, Verify: &verdict.Spec{Command: cmd, Changes: c.changes, Protect: c.protect, Expect: expect}})
			v := r.Verdict
			if v == nil || v.Passed || v.Reason != c.reason {
				t.Fatalf("%s %s (%s), verdict %+v; want red %s", r.State, r.Reason, r.Detail, v, c.reason)
			}
			paths := append(v.OutsidePaths, v.ProtectedPaths...)
			if len(paths) != 1 || !strings.HasPrefix(paths[0], "tests/__pycache__/test_calc.") {
				t.Errorf("paths named %q", paths)
			}
		})
	}
}

// TestRedTeam44G_SkipRaisedByCodeUnderTest: code under test that raises unittest.SkipTest
// turns each test that reaches it into a skip, and the runner exits 0. Without expect the gate
// is green; with expect it is red unless as many tests as min_tests ran, so min_tests must be
// the suite's count to catch a partial skip.
func TestRedTeam44G_SkipRaisedByCodeUnderTest(t *testing.T) {
	requirePython(t)
	e := newEnv(t)
	repo := pyRepo(t)
	cmd := []string{"python3", "run_tests.py"}
	changes := []string{"src/**"}
	e.subagent("skipper", `printf 'import unittest\n\n\ndef add(a, b):\n    raise unittest.SkipTest("later")\n' > src/calc.py`)
	e.subagent("half-skipper", `printf 'import unittest\n\n\ndef add(a, b):\n    if a < 0:\n        raise unittest.SkipTest("later")\n    return a + b\n' > src/calc.py`)
	for _, c := range []struct {
		name, subagent string
		expect         *verdict.Expect
		green          bool
		detail         string
	}{
		{"every test skipped, no expect", "skipper", nil, true, ""},
		{"every test skipped", "skipper", &verdict.Expect{JUnit: "junit.xml"}, false, "0 test(s) that ran"},
		{"one test skipped, min_tests 2", "half-skipper", &verdict.Expect{JUnit: "junit.xml", MinTests: 2}, false, "1 test(s) that ran, fewer than the 2"},
		// The residue: a min_tests below the suite's count lets the skip through.
		{"one test skipped, min_tests 1", "half-skipper", &verdict.Expect{JUnit: "junit.xml", MinTests: 1}, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.run(dispatch.Request{Subagent: c.subagent, Repo: repo, Verify: &verdict.Spec{Command: cmd, Changes: changes, Expect: c.expect}})
			v := r.Verdict
			if v == nil || v.Passed != c.green {
				t.Fatalf("%s %s (%s), verdict %+v; want green %v", r.State, r.Reason, r.Detail, v, c.green)
			}
			if !c.green && (v.Reason != verdict.ReasonEvidence || !strings.Contains(v.Detail, c.detail) || v.Exit != 0) {
				t.Errorf("verdict %+v; want no-evidence with %q", v, c.detail)
			}
			if c.expect != nil && (v.Evidence == nil || v.Evidence.Skipped == 0) {
				t.Errorf("evidence %+v; want the skips counted", v.Evidence)
			}
		})
	}
}

// TestRedTeam44G_InProcessLiesRemain: what expect cannot catch, pinned so the docs' "What
// remains" stays true: code inside changes that runs in the test process can write the
// report itself and exit, or make the runner's assertions pass (from a module the tests
// import, or from a sitecustomize the command's PYTHONPATH reaches), and the gate is green.
func TestRedTeam44G_InProcessLiesRemain(t *testing.T) {
	requirePython(t)
	e := newEnv(t)
	repo := pyRepo(t)
	cmd := []string{"python3", "run_tests.py"}
	spec := func() *verdict.Spec {
		return &verdict.Spec{Command: cmd, Changes: []string{"src/**"}, Expect: &verdict.Expect{JUnit: "junit.xml", MinTests: 2}}
	}
	for _, c := range []struct {
		name, subagent, script string
		command                []string // nil: python3 run_tests.py
	}{
		{"the report written at import, then exit 0", "liar-report", `cat > src/calc.py <<'EOF'
import os
with open(os.path.join(os.environ["AGORA_REPORT"], "junit.xml"), "w") as f:
    f.write('<testsuite><testcase name="a"/><testcase name="b"/></testsuite>')
os._exit(0)
EOF`, nil},
		{"the runner's assertions replaced at import", "liar-asserts", `cat > src/calc.py <<'EOF'
import unittest
unittest.TestCase.assertEqual = lambda self, *a, **k: None


def add(a, b):
    return 0
EOF`, nil},
		// Code the tests never import: a sitecustomize on the command's PYTHONPATH runs
		// before the runner, and no test body runs at all.
		{"a sitecustomize on PYTHONPATH", "liar-site", `printf 'import unittest\nunittest.TestCase._callTestMethod = lambda self, method: None\n' > src/sitecustomize.py`,
			[]string{"env", "PYTHONPATH=src", "python3", "run_tests.py"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.subagent(c.subagent, c.script)
			s := spec()
			if c.command != nil {
				s.Command = c.command
			}
			r := e.run(dispatch.Request{Subagent: c.subagent, Repo: repo, Verify: s})
			if v := r.Verdict; v == nil || !v.Passed || v.Evidence == nil || v.Evidence.Ran() != 2 {
				t.Fatalf("%s %s (%s), verdict %+v; the residue is green with 2 tests: if this is red now, update docs/plan.md's What remains", r.State, r.Reason, r.Detail, v)
			}
		})
	}
}

// TestRedTeam44G_FixGateJudgesTheRejectedPatchToo: a fix starts from the rejected patch and
// its own patch holds it, so the task's changes judge both: a fix that repairs src/ but keeps
// the rejected work's conftest.py is red outside-changes naming it; one that also removes it
// is green.
func TestRedTeam44G_FixGateJudgesTheRejectedPatchToo(t *testing.T) {
	requirePython(t)
	e := newEnv(t)
	repo := pyRepo(t)
	spec := func() *verdict.Spec {
		return &verdict.Spec{Command: []string{"python3", "run_tests.py"}, Changes: []string{"src/**"}, Expect: &verdict.Expect{JUnit: "junit.xml", MinTests: 2}}
	}
	e.subagent("planter", `printf 'import os\nos._exit(0)\n' > conftest.py`)
	bad := e.run(dispatch.Request{Subagent: "planter", Repo: repo, Verify: spec()})
	if v := bad.Verdict; v == nil || v.Reason != verdict.ReasonOutside || strings.Join(v.OutsidePaths, ",") != "conftest.py" {
		t.Fatalf("the planted work: %s %s (%s), verdict %+v; want red outside-changes conftest.py", bad.State, bad.Reason, bad.Detail, v)
	}
	fix := func(name, script string) *dispatch.Record {
		e.subagent(name, script)
		return e.run(dispatch.Request{Subagent: name, Repo: repo, Verify: spec(),
			Inputs: []dispatch.InputSpec{{Key: "patch", Select: "patch", FromDispatch: bad.ID, Apply: true}}})
	}
	r := fix("fixer-keeps", `test -f conftest.py && printf 'def add(a, b):\n    return a + b\n' > src/calc.py`)
	if v := r.Verdict; v == nil || v.Reason != verdict.ReasonOutside || strings.Join(v.OutsidePaths, ",") != "conftest.py" {
		t.Fatalf("a fix keeping the plant: %s %s (%s), verdict %+v; want red outside-changes conftest.py", r.State, r.Reason, r.Detail, v)
	}
	r = fix("fixer-cleans", `rm conftest.py && printf 'def add(a, b):\n    return a + b\n' > src/calc.py`)
	if v := r.Verdict; r.State != lifecycle.DispatchFinished || v == nil || !v.Passed || v.Evidence == nil || v.Evidence.Ran() != 2 {
		t.Fatalf("a fix removing the plant: %s %s (%s), verdict %+v; want green with 2 tests", r.State, r.Reason, r.Detail, v)
	}
}

// TestRedTeam44G_ReportOutOfTheAgentsReach: a process the agent leaves behind, writing a
// passing report everywhere it can name, is gone before the gate and never reaches the
// report directory; a report the command leaves past the size cap is no evidence.
func TestRedTeam44G_ReportOutOfTheAgentsReach(t *testing.T) {
	e := newEnv(t)
	repo := gitRepo(t, map[string]string{"README": "one\n"})
	good := `<testsuite><testcase name="a"/></testsuite>`
	e.subagent("lingerer", `setsid sh -c 'while :; do for d in . /tmp .. ../verify-report ../verify /agora/report; do mkdir -p "$d" 2>/dev/null; printf "`+good+`" > "$d/junit.xml" 2>/dev/null; done; done' >/dev/null 2>&1 &
echo started`)
	r := e.run(dispatch.Request{Subagent: "lingerer", Repo: repo, Verify: &verdict.Spec{Command: []string{"sh", "-c", `ls -A "$AGORA_REPORT"; test -z "$(ls -A "$AGORA_REPORT")"`},
		Expect: &verdict.Expect{JUnit: "junit.xml"}}})
	if v := r.Verdict; v == nil || v.Passed || v.Reason != verdict.ReasonEvidence || !strings.Contains(v.Detail, "wrote no /agora/report/junit.xml") {
		t.Fatalf("%s %s (%s), verdict %+v; want red no-evidence with an empty report directory", r.State, r.Reason, r.Detail, v)
	}
	e.subagent("nothing", "true")
	r = e.run(dispatch.Request{Subagent: "nothing", Repo: repo, Verify: &verdict.Spec{Command: []string{"sh", "-c",
		`printf '` + good + `' > "$AGORA_REPORT/junit.xml" && truncate -s 64M "$AGORA_REPORT/junit.xml"`},
		Expect: &verdict.Expect{JUnit: "junit.xml"}}})
	if v := r.Verdict; v == nil || v.Passed || v.Reason != verdict.ReasonEvidence || !strings.Contains(v.Detail, "cannot be read") {
		t.Fatalf("a 64 MiB report: %s %s (%s), verdict %+v; want red no-evidence", r.State, r.Reason, r.Detail, v)
	}
}

// TestRedTeam44G_ContainerReportTricks: on a docker target (podman here) the report is read
// as it is in bubblewrap: a symbolic link (absolute or relative), a hard link, a FIFO or a
// directory at the report's name is no evidence, and a report shipped in the patch is not in
// the report directory.
func TestRedTeam44G_ContainerReportTricks(t *testing.T) {
	image := requireContainer(t)
	e := newEnv(t)
	e.addDockerTarget(image)
	repo := gitRepo(t, map[string]string{"README": "one\n"})
	good := `<testsuite><testcase name="a"/></testsuite>`
	e.subagent("shipper", `mkdir -p agora/report && printf '`+good+`' > agora/report/junit.xml && printf '`+good+`' > junit.xml`)
	for _, c := range []struct{ name, script, want string }{
		{"shipped in the patch", `test -f /agora/workspace/junit.xml && test -z "$(ls -A "$AGORA_REPORT")"`, "wrote no /agora/report/junit.xml"},
		{"a symlink to the shipped one", `ln -s /agora/workspace/junit.xml "$AGORA_REPORT/junit.xml"`, "symlink"},
		{"a relative symlink", `cp junit.xml "$AGORA_REPORT/a.xml" && ln -s a.xml "$AGORA_REPORT/junit.xml"`, "symlink"},
		{"a hard link", `printf '` + good + `' > "$AGORA_REPORT/a.xml" && ln "$AGORA_REPORT/a.xml" "$AGORA_REPORT/junit.xml"`, "hard link"},
		{"a FIFO", `mkfifo "$AGORA_REPORT/junit.xml"`, "not a regular file"},
		{"a directory", `mkdir "$AGORA_REPORT/junit.xml"`, "not a regular file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.run(dispatch.Request{Subagent: "shipper", Repo: repo, Target: "box", Timeout: 2 * time.Minute,
				Verify: &verdict.Spec{Command: []string{"sh", "-c", c.script}, Expect: &verdict.Expect{JUnit: "junit.xml"}}})
			if v := r.Verdict; v == nil || v.Passed || v.Reason != verdict.ReasonEvidence || !strings.Contains(v.Detail, c.want) {
				t.Fatalf("%s %s (%s), verdict %+v; want red no-evidence with %q", r.State, r.Reason, r.Detail, r.Verdict, c.want)
			}
		})
	}
}

// TestRedTeam44G_IgnoredSubmoduleIsSeen: the repository's .gitmodules says "ignore = all" for
// a submodule path, as some do for a vendored checkout. The agent fixes src/calc.py and makes
// a nested repository at that path, which its capture records as a gitlink in the patch; the
// gate's touched paths must hold it, so the gate is red outside-changes (or red for a
// submodule inside changes) instead of green for a patch carrying a submodule nobody ran.
func TestRedTeam44G_IgnoredSubmoduleIsSeen(t *testing.T) {
	requirePython(t)
	e := newEnv(t)
	gitmodules := "[submodule \"v\"]\n\tpath = vendor\n\turl = https://example.invalid/v.git\n\tignore = all\n" +
		"[submodule \"w\"]\n\tpath = src/vendor\n\turl = https://example.invalid/w.git\n\tignore = all\n"
	repo := gitRepo(t, map[string]string{"src/__init__.py": "", "src/calc.py": "def add(a, b):\n    raise NotImplementedError\n",
		".gitmodules": gitmodules, "run.sh": "python3 -c 'from src import calc; assert calc.add(2, 3) == 5'\n"})
	fix := `printf 'def add(a, b):\n    return a + b\n' > src/calc.py`
	for _, c := range []struct{ name, path, why string }{
		{"outside changes", "vendor", "(outside changes)"},
		{"inside changes", "src/vendor", "submodule"},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "submoduler-" + strings.ReplaceAll(c.path, "/", "-")
			e.subagent(name, fix+` && git init -q `+c.path+` && git -C `+c.path+` -c user.name=a -c user.email=a@a commit -q --allow-empty -m x`)
			r := e.run(dispatch.Request{Subagent: name, Repo: repo, Verify: &verdict.Spec{Command: []string{"sh", "run.sh"}, Changes: []string{"src/**"}}})
			v := r.Verdict
			if v == nil || v.Passed || v.Reason != verdict.ReasonOutside || strings.Join(v.OutsidePaths, ",") != c.path || !strings.Contains(v.Detail, c.why) {
				t.Fatalf("%s %s (%s), verdict %+v; want red outside-changes naming %s", r.State, r.Reason, r.Detail, v, c.path)
			}
			verified := auditEntry(t, e, r.ID, "dispatch.verified")
			if !strings.Contains(verified, `"reason":"outside-changes"`) || !strings.Contains(verified, `"outside_paths":["`+c.path+`"]`) ||
				!strings.Contains(verified, `"passed":false`) {
				t.Errorf("dispatch.verified: %s", verified)
			}
		})
	}
}
