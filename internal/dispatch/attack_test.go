package dispatch_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// Attacks on the host through the sandbox, run as a hostile exec agent would.

// swapOutputs leaves decoys, a 95 MB file that keeps the worker hashing, and a setsid daemon
// that waits for the worker to reach capture and then swaps directory a for a symlink to
// the host's AGORA_HOME/keys (four levels up from out/outputs/ on the host) and c for one to
// /etc. Before the fix, result.json listed outputs/a/secret.key and the host read the real
// key through the swapped parent.
const swapOutputs = `o="$AGORA_OUT/outputs"
mkdir -p "$o/a" "$o/c" "$o/z"
echo decoy > "$o/a/secret.key"
echo decoy > "$o/c/shadow"
head -c 95000000 /dev/zero > "$o/z/big"
setsid sh -c '
  o="$AGORA_OUT/outputs"
  touch "$AGORA_OUT/.daemon"
  while [ ! -e "$AGORA_OUT/patch.diff" ]; do sleep 0.005; done
  sleep 0.05
  mv "$o/a" "$o/a.old"; ln -s ../../../../keys "$o/a"
  mv "$o/c" "$o/c.old"; ln -s /etc "$o/c"
  sleep 600' </dev/null >/dev/null 2>&1 &
while [ ! -e "$AGORA_OUT/.daemon" ]; do sleep 0.01; done # out of the process group now
exit 0`

func TestAttack_OutputsSwappedForSymlinks(t *testing.T) {
	e := newEnv(t)
	e.subagent("swapper", swapOutputs)
	key, err := os.ReadFile(filepath.Join(e.home.Dir, home.SecretKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	shadow, _ := os.ReadFile("/etc/shadow")
	runs := 10 // a race: try it often (each run writes a 95 MB decoy)
	if testing.Short() {
		runs = 3
	}
	for i := range runs {
		r := e.run(dispatch.Request{Subagent: "swapper"})
		for _, o := range r.Result.Outputs {
			if o.Size > 1<<20 {
				continue
			}
			got := e.blob(&dispatch.Artifact{Digest: o.Digest, Size: o.Size})
			if strings.Contains(got, string(key)) || (len(shadow) > 0 && got == string(shadow)) {
				t.Fatalf("run %d: output %s holds a host file", i, o.Path)
			}
		}
		// The daemon died before capture, so nothing was swapped: the decoys are the outputs.
		if r.State != lifecycle.DispatchFinished {
			t.Fatalf("run %d: %s %s: %s", i, r.State, r.Reason, r.Detail)
		}
		if got := e.output(r, "a/secret.key"); got != "decoy\n" {
			t.Fatalf("run %d: a/secret.key = %q, want the decoy", i, got)
		}
	}
}

// replacePatch leaves a change and a setsid loop that keeps moving a forged file over
// out/patch.diff. Before the fix the forged file was stored as the dispatch's patch, its
// digest in the record and the audit.
const replacePatch = `echo real > change.txt
printf 'forged' > "$AGORA_OUT/.forged"
setsid sh -c 'touch "$AGORA_OUT/.daemon"; while [ -d "$AGORA_OUT" ]; do cp "$AGORA_OUT/.forged" "$AGORA_OUT/.f2" 2>/dev/null && mv -f "$AGORA_OUT/.f2" "$AGORA_OUT/patch.diff" 2>/dev/null; done' </dev/null >/dev/null 2>&1 &
while [ ! -e "$AGORA_OUT/.daemon" ]; do sleep 0.01; done # out of the process group now
exit 0`

func TestAttack_PatchReplaced(t *testing.T) {
	e := newEnv(t)
	e.subagent("forger", replacePatch)
	for i := range 3 {
		r := e.run(dispatch.Request{Subagent: "forger"})
		if r.State != lifecycle.DispatchFinished || r.Result.Patch == nil {
			t.Fatalf("run %d: %s %s: %s", i, r.State, r.Reason, r.Detail)
		}
		p := e.blob(r.Result.Patch)
		if strings.Contains(p, "forged") || !strings.Contains(p, "+real") {
			t.Fatalf("run %d: the stored patch is not the captured one:\n%s", i, p)
		}
	}
}

// TestAttack_PatchReplaced_NoSandbox: with `sandbox: none` there is no PID namespace, so the
// worker cannot end the loop; the host's hash check is what holds. The forged patch is never
// stored: the dispatch fails integrity-failed (or, if the loop lost every race, it keeps the
// real patch).
func TestAttack_PatchReplaced_NoSandbox(t *testing.T) {
	e := newEnv(t)
	nobox := e.home.Config.Targets["local"]
	nobox.Sandbox = compute.SandboxNone
	e.home.Config.Targets["nobox"] = nobox
	e.subagent("forger", replacePatch)
	integrity := 0
	// At least 3 runs, and on until the loop has won a race once (at most 20): the slim
	// worker's capture is quick enough that on a loaded machine 3 runs could all be lost.
	for i := 0; i < 20 && (i < 3 || integrity == 0); i++ {
		r := e.run(dispatch.Request{Subagent: "forger", Target: "nobox"})
		switch {
		case r.State == lifecycle.DispatchFailed && r.Reason == lifecycle.ReasonIntegrityFailed:
			integrity++
			if r.Result.Patch != nil || len(r.Result.Outputs) != 0 {
				t.Errorf("run %d: integrity-failed but products kept: %+v", i, r.Result)
			}
			if !strings.Contains(r.Detail, "patch") {
				t.Errorf("run %d: detail %q does not name the patch", i, r.Detail)
			}
		case r.State == lifecycle.DispatchFinished:
			if p := e.blob(r.Result.Patch); strings.Contains(p, "forged") {
				t.Fatalf("run %d: the forged patch was stored", i)
			}
		default:
			t.Fatalf("run %d: %s %s: %s", i, r.State, r.Reason, r.Detail)
		}
	}
	if integrity == 0 {
		t.Error("the loop never won a race in 20 runs: the hash check was not exercised")
	}
}

// TestInputs_FanInBounded: five upstreams that each left 256 outputs are more input files
// than one dispatch's manifest may list (a run whose fan-in pushed a downstream
// manifest past what agora verify reads would be unverifiable for good). The dispatch is
// refused before anything is recorded, with what to do instead.
func TestInputs_FanInBounded(t *testing.T) {
	e := newEnv(t)
	e.subagent("many", `mkdir -p "$AGORA_OUT/outputs"; i=0; while [ $i -lt 256 ]; do echo $i > "$AGORA_OUT/outputs/f$i"; i=$((i+1)); done`)
	var specs []dispatch.InputSpec
	for i := range 5 {
		r := e.run(dispatch.Request{Subagent: "many"})
		if r.State != lifecycle.DispatchFinished || len(r.Result.Outputs) != 256 {
			t.Fatalf("upstream %d: %s %s: %s (%d outputs)", i, r.State, r.Reason, r.Detail, len(r.Result.Outputs))
		}
		specs = append(specs, dispatch.InputSpec{Key: fmt.Sprintf("up%d", i), Select: "outputs", FromDispatch: r.ID})
	}
	if _, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "many", Actor: "test", Timeout: time.Minute, Inputs: specs[:4]}); err != nil {
		t.Fatalf("1,024 input files were refused: %v", err)
	}
	_, err := e.d.Accept(t.Context(), dispatch.Request{Subagent: "many", Actor: "test", Timeout: time.Minute, Inputs: specs})
	if err == nil || !strings.Contains(err.Error(), "over the limit of 1024 files") {
		t.Fatalf("1,280 input files: %v, want the limit named", err)
	}
}

// TestAttack_SignalsToTheWorker: the agent signals PID 1, the worker, with everything the
// Go runtime would exit on and a process may ignore (the kernel spares
// init only the signals it has no handler for). The worker runs on and captures the agent's
// change. What still ends the worker (SEGV, BUS, FPE sent by kill; a fault signal sent by
// sigqueue: TestAttack_WorkerEndedBySignal) fails the agent's own dispatch with nothing
// kept, which it could do by exiting anyway.
func TestAttack_SignalsToTheWorker(t *testing.T) {
	e := newEnv(t)
	e.subagent("signaller", `for s in HUP INT QUIT ABRT USR1 USR2 PIPE ALRM TERM TSTP TTIN TTOU XCPU XFSZ VTALRM IO PWR; do kill -s $s 1 2>/dev/null; done
sleep 0.2; echo survived > change.txt`)
	r := e.run(dispatch.Request{Subagent: "signaller"})
	if r.State != lifecycle.DispatchFinished || r.Result.Patch == nil {
		t.Fatalf("%s %s: %s", r.State, r.Reason, r.Detail)
	}
	if p := e.blob(r.Result.Patch); !strings.Contains(p, "+survived") {
		t.Errorf("the patch lacks the change made after the signals:\n%s", p)
	}
}

// TestAttack_AgentGetsDefaultSignals: the worker survives the agent's signals by catching
// them, not by ignoring them, since an ignored signal stays ignored across exec. The agent
// starts with no signal ignored, and a child it sends SIGTERM ends (143). Before, the agent
// inherited HUP, INT, PIPE, TERM and the rest ignored: `timeout` or a CLI stopping its tool's
// process with SIGTERM ended nothing.
func TestAttack_AgentGetsDefaultSignals(t *testing.T) {
	e := newEnv(t)
	e.subagent("signals", `grep '^SigIgn:' /proc/self/status > ignored.txt
sleep 30 & p=$!; kill -TERM $p; wait $p; echo "code=$?" > term.txt`)
	r := e.run(dispatch.Request{Subagent: "signals", Timeout: 20 * time.Second})
	if r.State != lifecycle.DispatchFinished || r.Result.Patch == nil {
		t.Fatalf("%s %s: %s", r.State, r.Reason, r.Detail)
	}
	p := e.blob(r.Result.Patch)
	// The signals the worker drops (worker.ignoredSignals) and an agent relies on. Others
	// (glibc's 32, say) may come ignored from whatever started the test, as they did in CI.
	_, mask, _ := strings.Cut(p, "+SigIgn:\t")
	ign, err := strconv.ParseUint(strings.TrimSpace(strings.SplitN(mask, "\n", 2)[0]), 16, 64)
	if err != nil {
		t.Fatalf("no SigIgn line in the agent's report: %v\n%s", err, p)
	}
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGUSR1,
		syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGALRM, syscall.SIGTERM, syscall.SIGTSTP, syscall.SIGXCPU, syscall.SIGXFSZ} {
		if ign&(1<<(uint(sig)-1)) != 0 {
			t.Errorf("the agent starts with %v ignored (SigIgn %016x)", sig, ign)
		}
	}
	if !strings.Contains(p, "+code=143") {
		t.Errorf("a child the agent sent SIGTERM did not end by it:\n%s", p)
	}
}
