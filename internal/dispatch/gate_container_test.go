package dispatch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/verdict"
)

// TestGate_Container: on a docker target (podman here) the gate runs as another container of
// the target's image, fresh, on the base tree plus the patch: green and red verdicts, and a
// protected path red before any container starts.
func TestGate_Container(t *testing.T) {
	image := requireContainer(t)
	e := newEnv(t)
	e.addDockerTarget(image)
	repo := gitRepo(t, map[string]string{"README": "one\n", "a_test.sh": "exit 0\n"})
	e.subagent("editor", `printf 'hello\n' > greeting.txt; setsid sh -c 'while :; do echo PASS; sleep 0.1; done' >/dev/null 2>&1 &`)
	// /usr/local/go is the host's (bound into a bubblewrap sandbox under /usr), never the
	// toolchain image's: its absence says the command ran in the container.
	green := []string{"sh", "-c", "test ! -e /usr/local/go && test -f greeting.txt && echo in-container"}
	r := e.run(dispatch.Request{Subagent: "editor", Repo: repo, Target: "box", Timeout: 2 * time.Minute,
		Verify: &verdict.Spec{Command: green, Protect: []string{"*_test.sh"}}})
	if r.State != lifecycle.DispatchFinished || r.Verdict == nil || !r.Verdict.Passed || r.Verdict.OutputTail != "in-container\n" {
		t.Fatalf("dispatch %s %s (%s), verdict %+v: want finished, green, run in the container", r.State, r.Reason, r.Detail, r.Verdict)
	}
	r = e.run(dispatch.Request{Subagent: "editor", Repo: repo, Target: "box", Timeout: 2 * time.Minute,
		Verify: &verdict.Spec{Command: []string{"sh", "-c", "ps 2>/dev/null | grep -c PASS; echo failing; exit 4"}}})
	if v := r.Verdict; r.Reason != lifecycle.ReasonVerifyFailed || v == nil || v.Exit != 4 || !strings.Contains(v.OutputTail, "failing") {
		t.Fatalf("dispatch %s %s (%s), verdict %+v: want red with exit 4", r.State, r.Reason, r.Detail, v)
	}
	e.subagent("cheater", `printf 'exit 0 # always\n' > a_test.sh`)
	r = e.run(dispatch.Request{Subagent: "cheater", Repo: repo, Target: "box", Timeout: 2 * time.Minute,
		Verify: &verdict.Spec{Command: green, Protect: []string{"*_test.sh"}}})
	if v := r.Verdict; v == nil || v.Reason != verdict.ReasonProtected || strings.Join(v.ProtectedPaths, ",") != "a_test.sh" {
		t.Fatalf("dispatch %s %s (%s), verdict %+v: want red protected-path a_test.sh", r.State, r.Reason, r.Detail, v)
	}
	// changes and expect work in a container as in bubblewrap: a path outside changes is red
	// before any container starts; the report directory is bound at /agora/report, writable
	// by the dispatch's uid, and read once the container is gone.
	e.subagent("planter", `printf 'test:\n\t@true\n' > GNUmakefile`)
	r = e.run(dispatch.Request{Subagent: "planter", Repo: repo, Target: "box", Timeout: 2 * time.Minute,
		Verify: &verdict.Spec{Command: green, Changes: []string{"*.txt"}}})
	if v := r.Verdict; v == nil || v.Reason != verdict.ReasonOutside || strings.Join(v.OutsidePaths, ",") != "GNUmakefile" {
		t.Fatalf("dispatch %s %s (%s), verdict %+v: want red outside-changes GNUmakefile", r.State, r.Reason, r.Detail, v)
	}
	expect := &verdict.Expect{JUnit: "junit.xml"}
	r = e.run(dispatch.Request{Subagent: "editor", Repo: repo, Target: "box", Timeout: 2 * time.Minute,
		Verify: &verdict.Spec{Command: green, Changes: []string{"*.txt"}, Expect: expect}})
	if v := r.Verdict; v == nil || v.Reason != verdict.ReasonEvidence || !strings.Contains(v.Detail, "wrote no /agora/report/junit.xml") {
		t.Fatalf("dispatch %s %s (%s), verdict %+v: want red no-evidence", r.State, r.Reason, r.Detail, v)
	}
	report := []string{"sh", "-c", `test ! -e /usr/local/go && printf '<testsuite><testcase name="a"/></testsuite>' > "$AGORA_REPORT/junit.xml"`}
	r = e.run(dispatch.Request{Subagent: "editor", Repo: repo, Target: "box", Timeout: 2 * time.Minute,
		Verify: &verdict.Spec{Command: report, Changes: []string{"*.txt"}, Expect: expect}})
	if v := r.Verdict; v == nil || !v.Passed || v.Evidence == nil || v.Evidence.Tests != 1 {
		t.Fatalf("dispatch %s %s (%s), verdict %+v: want green with 1 test", r.State, r.Reason, r.Detail, v)
	}
}
