package dispatch_test

import (
	"os"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/verdict"
)

// goToolchain is where the test expects the Go toolchain: under /usr, which the local
// sandbox binds read-only.
const goToolchain = "/usr/local/go/bin"

// TestGate_GoTest: `go test ./...` as the gate on a tiny module, found through the target's
// verify_path, with the standard library from the target's verify_cache: a patch that breaks
// the code is red (verify-failed, the failing test in the tail, the patch kept), one that
// keeps it working is green.
func TestGate_GoTest(t *testing.T) {
	if _, err := os.Stat(goToolchain + "/go"); err != nil {
		t.Skipf("SKIP: no Go toolchain at %s to run `go test` in the verify sandbox", goToolchain)
	}
	e := newEnv(t)
	cache := agoratest.VerifyGoCache(t, goToolchain)
	e.setTarget(func(tg *config.Target) { tg.VerifyPath = []string{goToolchain}; tg.VerifyCache = cache })
	repo := calcRepo(t)
	gate := &verdict.Spec{Command: []string{"go", "test", "./..."}, Protect: []string{"**/*_test.go"}}

	e.subagent("breaker", `sed -i 's/a + b/a - b/' calc.go`)
	r := e.run(dispatch.Request{Subagent: "breaker", Repo: repo, Verify: gate})
	v := r.Verdict
	if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonVerifyFailed || v == nil || v.Passed || v.Reason != verdict.ReasonExit {
		t.Fatalf("dispatch %s %s (%s), verdict %+v: want red verify-failed", r.State, r.Reason, r.Detail, v)
	}
	if !strings.Contains(v.OutputTail, "Add(2, 3) != 5") || !strings.Contains(v.OutputTail, "FAIL") {
		t.Errorf("the tail does not show the failing test:\n%s", v.OutputTail)
	}
	if !strings.Contains(e.patch(r), "-func Add(a, b int) int { return a + b }") {
		t.Errorf("the failing patch was not kept:\n%s", e.patch(r))
	}

	e.subagent("fixer", `printf '\nfunc Sub(a, b int) int { return a - b }\n' >> calc.go`)
	r = e.run(dispatch.Request{Subagent: "fixer", Repo: repo, Verify: gate})
	v = r.Verdict
	if r.State != lifecycle.DispatchFinished || v == nil || !v.Passed || !strings.Contains(v.OutputTail, "ok") {
		t.Fatalf("dispatch %s %s (%s), verdict %+v: want finished and green", r.State, r.Reason, r.Detail, v)
	}
}

// BenchmarkGate_GoTest is one dispatch with a `go test ./...` gate on the tiny module: cold
// (no verify_cache: the sandbox builds the standard library's part in its own scratch space)
// beside warm (the target's verify_cache holds it). Run with -benchtime=3x; each cold
// iteration is tens of seconds.
func BenchmarkGate_GoTest(b *testing.B) {
	if _, err := os.Stat(goToolchain + "/go"); err != nil {
		b.Skipf("SKIP: no Go toolchain at %s", goToolchain)
	}
	for _, mode := range []string{"cold", "warm"} {
		b.Run(mode, func(b *testing.B) {
			e := newEnv(b)
			cache := ""
			if mode == "warm" {
				cache = agoratest.VerifyGoCache(b, goToolchain)
			}
			e.setTarget(func(tg *config.Target) { tg.VerifyPath = []string{goToolchain}; tg.VerifyCache = cache })
			repo := calcRepo(b)
			e.subagent("adder", `printf '\nfunc Sub(a, b int) int { return a - b }\n' >> calc.go`)
			gate := &verdict.Spec{Command: []string{"go", "test", "./..."}}
			for b.Loop() {
				r := e.run(dispatch.Request{Subagent: "adder", Repo: repo, Verify: gate})
				if r.Verdict == nil || !r.Verdict.Passed {
					b.Fatalf("dispatch %s %s (%s): want green", r.State, r.Reason, r.Detail)
				}
			}
		})
	}
}
