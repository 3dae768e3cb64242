package dispatch_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/verdict"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// TestRedTeam27_VerifyOnUnsandboxedTargetRefused: a verify gate's command is the plan
// author's (a model over MCP included) and is judged against no grant, on the ground that it
// runs with nothing to misuse: no network, no secret, a throwaway tree. On a `sandbox: none`
// target none of that holds: the command would run on the host as agora's own user, with the
// host's network and every file agora can read. So a gate is refused there at accept, as on
// a Kubernetes target, and nothing of the command runs.
func TestRedTeam27_VerifyOnUnsandboxedTargetRefused(t *testing.T) {
	e := newEnv(t)
	nobox := e.home.Config.Targets["local"]
	nobox.Sandbox = compute.SandboxNone
	e.home.Config.Targets["nobox"] = nobox
	e.subagent("honest", `echo ok > ok.txt`)
	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("host-only\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := []string{"sh", "-c", "cat " + secret}
	r, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "honest", Target: "nobox", Timeout: 30 * time.Second, Actor: "test",
		Verify: &verdict.Spec{Command: cmd}})
	var re *dispatch.RequestError
	if err == nil {
		if !lifecycle.DispatchEnded(r.State) {
			if r, err = e.d.Supervise(t.Context(), r.ID, nil); err != nil {
				t.Fatal(err)
			}
		}
		t.Fatalf("a verify gate on a sandbox: none target was accepted (%s %s, verdict %+v): its command ran on the host", r.State, r.Reason, r.Verdict)
	}
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "none") || !strings.Contains(err.Error(), "nobox") {
		t.Fatalf("accept: %v; want a request error naming the target and its sandbox", err)
	}
	// The same gate on a sandboxed target runs, and cannot read the host's file.
	e.subagent("honest2", `echo ok > ok.txt`)
	got := e.run(dispatch.Request{Subagent: "honest2", Verify: &verdict.Spec{Command: cmd}})
	if got.Verdict == nil || got.Verdict.Passed || strings.Contains(got.Verdict.OutputTail, "host-only") {
		t.Fatalf("sandboxed gate: %s %s, verdict %+v; want red without the host file", got.State, got.Reason, got.Verdict)
	}
}

// TestRedTeam27_VerifyTimeoutWithinTargetLimit: a target's timeout is the longest anything of
// a dispatch may run on it. A verify gate's command runs in a sandbox of that target, so its
// timeout is held to the same limit: a longer one is refused at accept, as a longer dispatch
// timeout is, and the default (10m) is cut to a shorter limit.
func TestRedTeam27_VerifyTimeoutWithinTargetLimit(t *testing.T) {
	e := newEnv(t)
	short := e.home.Config.Targets["local"]
	short.Timeout = 2 * time.Minute
	e.home.Config.Targets["short"] = short
	e.subagent("honest", `echo ok > ok.txt`)
	req := dispatch.Request{Subagent: "honest", Target: "short", Timeout: time.Minute, Actor: "test",
		Verify: &verdict.Spec{Command: []string{"sleep", "86000"}, Timeout: 24 * time.Hour}}
	r, err := e.d.Accept(t.Context(), req)
	var re *dispatch.RequestError
	if err == nil {
		t.Fatalf("a 24h verify gate on a target of at most 2m was accepted (its record holds %s)", r.Verify.Timeout)
	}
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "short") || !strings.Contains(err.Error(), "2m0s") {
		t.Fatalf("accept: %v; want a request error naming the target and its limit", err)
	}
	req.Verify = &verdict.Spec{Command: []string{"true"}}
	r, err = e.d.Accept(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verify == nil || r.Verify.Timeout != 2*time.Minute {
		t.Fatalf("default verify timeout on a 2m target: %+v, want 2m0s", r.Verify)
	}
}

// TestRedTeam27_ProtectSeesThroughAttributesAndBinary: an agent that marks the tests it
// edits binary or filtered in a .gitattributes of its own, writes binary bytes into a
// protected file, or hides the edit under a case variant of a protected directory's path
// that the file system would keep apart, is judged on the paths its patch touches: each
// protected one is named and the command never runs; the case variant touches only itself.
func TestRedTeam27_ProtectSeesThroughAttributesAndBinary(t *testing.T) {
	e := newEnv(t)
	repo := calcRepo(t)
	for _, c := range []struct {
		name, script string
		want         []string
	}{
		{"attributes mark the test binary", `printf '*_test.go -diff binary\n' > .gitattributes; printf 'package calc\n' > calc_test.go`, []string{"calc_test.go"}},
		{"attributes filter the test", `printf '*_test.go filter=lfs diff=lfs merge=lfs -text\n' > .gitattributes; printf 'package calc\n' > calc_test.go`, []string{"calc_test.go"}},
		{"binary bytes in protected data", `printf '\000\001\002\377' > testdata/want.txt`, []string{"testdata/want.txt"}},
		{"a new binary test data file", `head -c 4096 /dev/urandom > testdata/blob.bin`, []string{"testdata/blob.bin"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "rt27-" + strings.ReplaceAll(c.name, " ", "-")
			e.subagent(name, c.script)
			r := e.run(dispatch.Request{Subagent: name, Repo: repo, Verify: &verdict.Spec{Command: passIfRun, Protect: protect}})
			v := r.Verdict
			if r.Reason != lifecycle.ReasonVerifyFailed || v == nil || v.Reason != verdict.ReasonProtected {
				t.Fatalf("dispatch %s %s (%s), verdict %+v: want red protected-path", r.State, r.Reason, r.Detail, v)
			}
			if strings.Join(v.ProtectedPaths, ",") != strings.Join(c.want, ",") || strings.Contains(v.OutputTail, "ran") {
				t.Errorf("protected paths %q (tail %q), want %q and the command not run", v.ProtectedPaths, v.OutputTail, c.want)
			}
		})
	}
	t.Run("case variant of a protected directory", func(t *testing.T) {
		e.subagent("rt27-case", `mkdir -p TestData && printf '6\n' > TestData/want.txt`)
		r := e.run(dispatch.Request{Subagent: "rt27-case", Repo: repo, Verify: &verdict.Spec{Command: []string{"cat", "testdata/want.txt"}, Protect: protect}})
		if r.Verdict == nil || !r.Verdict.Passed || r.Verdict.OutputTail != "5\n" {
			t.Fatalf("dispatch %s %s, verdict %+v: want green, the protected file unchanged", r.State, r.Reason, r.Verdict)
		}
	})
}

// TestRedTeam27_GateTreeLinksReachNothingOnTheHost: the patch's symbolic links are written
// into the gate's tree by the host (as root here) and the tree is handed to the sandbox uid;
// a link to a host file is never followed by that hand-over (the file keeps its owner) nor
// by the command, which writes through it into its own /tmp.
func TestRedTeam27_GateTreeLinksReachNothingOnTheHost(t *testing.T) {
	e := newEnv(t)
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("host\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(victim)
	if err != nil {
		t.Fatal(err)
	}
	e.subagent("linker", `ln -s `+victim+` victim && ln -s `+filepath.Dir(victim)+` victimdir`)
	cmd := []string{"sh", "-c", "cat victim 2>&1; echo owned > victim 2>&1; echo owned > victimdir/new 2>&1; exit 0"}
	r := e.run(dispatch.Request{Subagent: "linker", Repo: calcRepo(t), Verify: &verdict.Spec{Command: cmd}})
	if r.Verdict == nil || strings.Contains(r.Verdict.OutputTail, "host") {
		t.Fatalf("dispatch %s %s, verdict %+v: the command read the host file", r.State, r.Reason, r.Verdict)
	}
	if !strings.Contains(r.Verdict.OutputTail, "cannot create victimdir/new") {
		t.Fatalf("tail %q: the command did not meet the links", r.Verdict.OutputTail)
	}
	after, err := os.Stat(victim)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "host\n" || ownerOf(after) != ownerOf(before) || after.Mode() != before.Mode() {
		t.Fatalf("the host file changed: %q, owner %d (was %d)", b, ownerOf(after), ownerOf(before))
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(victim), "new")); err == nil {
		t.Fatal("the command wrote into a host directory through a link")
	}
}

func ownerOf(fi os.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return 1<<32 - 1
}

// TestRedTeam27_AnswerKeepsTheGate: an agent that asks a question first, to finish in the
// answer's dispatch, is judged there by the gate its parent had: its edit of a protected
// test is red, the command never runs.
func TestRedTeam27_AnswerKeepsTheGate(t *testing.T) {
	e := newEnv(t)
	e.subagent("asker", `if printf %s "$AGORA_INPUT_JSON" | grep -q agora_resume; then printf 'package calc\n' > calc_test.go; `+
		`else printf '{"question":"may I?"}' > "$AGORA_OUT/`+wire.NeedsInputFile+`"; fi`)
	parent := e.run(dispatch.Request{Subagent: "asker", Repo: calcRepo(t), Verify: &verdict.Spec{Command: passIfRun, Protect: protect}})
	if parent.State != lifecycle.DispatchNeedsInput || parent.Verdict != nil {
		t.Fatalf("parent: %s %s %s, verdict %+v; want needs_input, not judged", parent.State, parent.Reason, parent.Detail, parent.Verdict)
	}
	req, err := e.d.ResumeRequest(t.Context(), parent, "yes", dispatch.Answerer{Actor: "test", Via: dispatch.ViaCLI})
	if err != nil {
		t.Fatal(err)
	}
	child := e.run(req)
	v := child.Verdict
	if child.Reason != lifecycle.ReasonVerifyFailed || v == nil || v.Reason != verdict.ReasonProtected || strings.Join(v.ProtectedPaths, ",") != "calc_test.go" {
		t.Fatalf("answer's dispatch: %s %s (%s), verdict %+v; want red protected-path naming calc_test.go", child.State, child.Reason, child.Detail, v)
	}
}
