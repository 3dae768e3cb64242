package dispatch_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestAttack_EverySignalToTheWorker: the agent sends PID 1, the worker, every standard
// signal but SEGV, BUS and FPE (those end it: TestAttack_WorkerEndedBySignal) by kill, STOP
// and KILL included (the kernel spares init those), and SIGTERM and SIGUSR1 by sigqueue as
// well (procps's kill, which also knows STKFLT, as sh's does not).
// Impact if it worked: one `kill -s ILL 1` (or TRAP, SYS, STKFLT, which Go exits on when
// nothing catches them), or a stop, would end or freeze the worker mid-run. The dispatch
// finishes with the change made after the signals. From the same run: the agent and a
// grandchild start with none of those signals ignored, nothing blocked, and no signalfd.
func TestAttack_EverySignalToTheWorker(t *testing.T) {
	e := newEnv(t)
	e.subagent("signaller", `for s in HUP INT QUIT ILL TRAP ABRT USR1 USR2 PIPE ALRM TERM CHLD CONT TSTP TTIN TTOU URG XCPU XFSZ VTALRM PROF WINCH IO PWR SYS STOP KILL; do kill -s $s 1 || echo $s >> errors.txt; done
/usr/bin/kill -s STKFLT 1 && /usr/bin/kill -q 7 -s TERM 1 && /usr/bin/kill -q 7 -s USR1 1 || echo procps >> errors.txt
sleep 0.2; echo survived > change.txt
grep -E '^Sig(Ign|Blk):' /proc/self/status > masks.txt
sh -c "grep -E '^Sig(Ign|Blk):' /proc/self/status; ls -l /proc/self/fd/" >> masks.txt`)
	r := e.run(dispatch.Request{Subagent: "signaller", Timeout: 20 * time.Second})
	if r.State != lifecycle.DispatchFinished || r.Result.Patch == nil {
		t.Fatalf("%s %s: %s", r.State, r.Reason, r.Detail)
	}
	p := e.blob(r.Result.Patch)
	if !strings.Contains(p, "+survived") {
		t.Errorf("the patch lacks the change made after the signals:\n%s", p)
	}
	if strings.Contains(p, "errors.txt") {
		t.Errorf("a signal could not be sent, so it was not tried:\n%s", p)
	}
	if n := checkSignalMasks(t, p); n != 4 {
		t.Errorf("want SigIgn and SigBlk of the agent and its child, got %d lines:\n%s", n, p)
	}
	if strings.Contains(p, "signalfd") || strings.Contains(p, "eventpoll") {
		t.Errorf("the agent's child holds a signal or poll descriptor of the worker's:\n%s", p)
	}
}

// TestAttack_WorkerEndedBySignal: the two ways an agent can still end the worker (SIGSEGV
// by kill; a fault signal by sigqueue, which the Go runtime takes for a real fault) after
// it made a change and an output. Impact if it worked: a worker that died mid-run leaving
// products the host kept as the agent's, or a dispatch left running until its timeout. The
// dispatch fails with worker-failed and nothing kept, well inside its 60 s timeout (the
// agent's sleep 50 would outlast anything but the sandbox's end).
func TestAttack_WorkerEndedBySignal(t *testing.T) {
	e := newEnv(t)
	for name, send := range map[string]string{"segv": "kill -s SEGV 1", "ill-queued": "/usr/bin/kill -q 7 -s ILL 1"} {
		t.Run(name, func(t *testing.T) {
			e.subagent("ender-"+name, `echo kept > change.txt; mkdir -p "$AGORA_OUT/outputs"; echo kept > "$AGORA_OUT/outputs/o.txt"
`+send+`; sleep 50`)
			r := e.run(dispatch.Request{Subagent: "ender-" + name, Timeout: time.Minute})
			if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonWorkerFailed {
				t.Fatalf("%s %s: %s, want failed worker-failed", r.State, r.Reason, r.Detail)
			}
			if r.Result != nil && (r.Result.Patch != nil || len(r.Result.Outputs) != 0) {
				t.Errorf("products kept from a worker that died: %+v", r.Result)
			}
			t.Logf("%s: %s", name, r.Detail)
		})
	}
}

// floodOutputs writes 32 outputs of 128 KiB, out$i holding "$i\n" over and over.
const floodOutputs = `mkdir -p "$AGORA_OUT/outputs"; i=0
while [ $i -lt 32 ]; do yes $i | head -c 131072 > "$AGORA_OUT/outputs/out$i"; i=$((i+1)); done
echo flooded > change.txt`

// TestAttack_SignalFloodWhileCollecting: processes the agent leaves behind send the
// worker USR1, TERM, HUP, PIPE, CHLD, URG (the runtime's preemption) and ALRM in a loop
// while it ends the agent's processes (in the bubblewrap sandbox, where it is PID 1) or
// while it hashes the outputs (with no sandbox, where the flood runs until the worker is
// gone). Impact if it worked: a system
// call the flood interrupted (EINTR) failing the capture, a wrong or lost hash, or a worker
// that never got through its stop. Each dispatch finishes, every output's digest is that
// of the bytes the agent wrote, and the patch holds the change.
func TestAttack_SignalFloodWhileCollecting(t *testing.T) {
	e := newEnv(t)
	nobox := e.home.Config.Targets["local"]
	nobox.Sandbox = compute.SandboxNone
	e.home.Config.Targets["nobox"] = nobox
	flood := `while kill -s USR1 $W 2>/dev/null; do kill -s TERM $W; kill -s HUP $W; kill -s PIPE $W; kill -s CHLD $W; kill -s URG $W; kill -s ALRM $W; done`
	// The agent's parent is the worker: PID 1 in the sandbox, the worker's pid without one.
	e.subagent("flooder", `W=$PPID
for n in 1 2; do setsid sh -c 'touch started.'$n'; `+strings.ReplaceAll(flood, "$W", "'$W'")+`' </dev/null >/dev/null 2>&1 & done
n=0; until [ -e started.1 ] && [ -e started.2 ] || [ $n -gt 200 ]; do sleep 0.05; n=$((n+1)); done
`+floodOutputs)
	for _, target := range []string{"local", "nobox"} {
		r := e.run(dispatch.Request{Subagent: "flooder", Target: target, Timeout: time.Minute})
		if r.State != lifecycle.DispatchFinished || r.Result.Patch == nil {
			t.Fatalf("%s: %s %s: %s", target, r.State, r.Reason, r.Detail)
		}
		if p := e.blob(r.Result.Patch); !strings.Contains(p, "+flooded") || !strings.Contains(p, "b/started.2") {
			t.Errorf("%s: the patch lacks the change or a flooder's mark (it never started):\n%s", target, p)
		}
		if len(r.Result.Outputs) != 32 {
			t.Fatalf("%s: %d outputs, want 32: %+v", target, len(r.Result.Outputs), r.Result.Outputs)
		}
		for _, o := range r.Result.Outputs {
			var i int
			if _, err := fmt.Sscanf(o.Path, "out%d", &i); err != nil {
				t.Fatalf("%s: output %q", target, o.Path)
			}
			want := strings.Repeat(strconv.Itoa(i)+"\n", 131072)[:131072]
			if o.Digest != digest.Sum([]byte(want)) || o.Size != 131072 {
				t.Errorf("%s: output %s is %s (%d bytes), want %s", target, o.Path, o.Digest, o.Size, digest.Sum([]byte(want)))
			}
		}
	}
}

// TestAttack_StoppedProcesses: SIGSTOP and SIGCONT games. The agent leaves stopped
// processes behind (one in its group, one setsid'd) and sends STOP and TSTP to PID 1; then
// another agent stops itself for good, and a third, with no sandbox, stops the worker.
// Impact if it worked: a stopped process the worker waits on, or a frozen worker, keeping
// the dispatch past its timeout. The first finishes with its change; the others end with
// timeout.
func TestAttack_StoppedProcesses(t *testing.T) {
	e := newEnv(t)
	e.subagent("stopper", `sleep 60 & kill -s STOP $!
setsid sh -c 'kill -s STOP $$; sleep 60' </dev/null >/dev/null 2>&1 &
kill -s STOP 1; kill -s TSTP 1; sleep 0.2; echo done > change.txt`)
	r := e.run(dispatch.Request{Subagent: "stopper", Timeout: 30 * time.Second})
	if r.State != lifecycle.DispatchFinished || r.Result.Patch == nil {
		t.Fatalf("%s %s: %s", r.State, r.Reason, r.Detail)
	}
	if p := e.blob(r.Result.Patch); !strings.Contains(p, "+done") {
		t.Errorf("the patch lacks the change:\n%s", p)
	}
	e.subagent("frozen", `echo x > change.txt; kill -s STOP $$; echo thawed > change.txt`)
	r = e.run(dispatch.Request{Subagent: "frozen", Timeout: 3 * time.Second})
	if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonTimeout {
		t.Fatalf("a stopped agent: %s %s: %s, want failed timeout", r.State, r.Reason, r.Detail)
	}
	// With no sandbox the worker is not init: the agent can stop it outright. Only the
	// host's timeout can end that dispatch.
	nobox := e.home.Config.Targets["local"]
	nobox.Sandbox = compute.SandboxNone
	e.home.Config.Targets["nobox"] = nobox
	e.subagent("freezer", `echo x > change.txt; kill -s STOP $PPID; sleep 30`)
	r = e.run(dispatch.Request{Subagent: "freezer", Target: "nobox", Timeout: 3 * time.Second})
	if r.State != lifecycle.DispatchFailed || r.Reason != lifecycle.ReasonTimeout {
		t.Fatalf("a stopped worker: %s %s: %s, want failed timeout", r.State, r.Reason, r.Detail)
	}
}

// TestAttack_SignalsToTheWorkerInAContainer: attack 1 on a docker target, where the worker
// is the container's PID 1 (exec'd by fdpass) and the host ends it only with SIGKILL
// (ContainerKill, Force remove). The agent sends PID 1 every signal it may catch by kill;
// the dispatch finishes with the change made after them, and the agent and its child start
// with none of them ignored and nothing blocked, whatever the container runtime's init did.
// Only the agent's own, from a command not last in its script: the image's busybox sh
// ignores SIGQUIT itself and execs the last command of `sh -c` with it so (as it does on
// this host, without agora), which says nothing of the worker.
func TestAttack_SignalsToTheWorkerInAContainer(t *testing.T) {
	image := requireContainer(t)
	e := newEnv(t)
	e.addDockerTarget(image)
	e.subagent("signaller", `cat /proc/1/comm > pid1.txt
for s in HUP INT QUIT ILL TRAP ABRT USR1 USR2 PIPE ALRM TERM CHLD CONT TSTP TTIN TTOU URG XCPU XFSZ VTALRM PROF WINCH IO PWR SYS STOP KILL; do kill -s $s 1 || echo $s >> errors.txt; done
grep -E '^Sig(Ign|Blk):' /proc/self/status > masks.txt
sleep 0.2; echo survived > change.txt`)
	r := e.run(dispatch.Request{Subagent: "signaller", Target: "box", Timeout: time.Minute})
	if r.State != lifecycle.DispatchFinished || r.Result.Patch == nil {
		t.Fatalf("%s %s: %s", r.State, r.Reason, r.Detail)
	}
	p := e.blob(r.Result.Patch)
	if !strings.Contains(p, "+survived") || !strings.Contains(p, "+agora-worker") || strings.Contains(p, "errors.txt") {
		t.Errorf("the patch lacks the change, or PID 1 is not the worker, or a signal was not sent:\n%s", p)
	}
	if n := checkSignalMasks(t, p); n != 2 {
		t.Errorf("want SigIgn and SigBlk of the agent, got %d lines:\n%s", n, p)
	}
}

// checkSignalMasks fails t for each SigBlk line of patch p (an agent's report) that is not
// 0 and each SigIgn line with a signal 1-31 ignored but BUS, FPE and SEGV (those the
// worker does not catch), and returns how many lines it checked. Other signals (glibc's 32,
// say) may come ignored from whatever started the test, as they did in CI.
func checkSignalMasks(t *testing.T, p string) int {
	t.Helper()
	const caught = (1<<31 - 1) &^ (1<<(7-1) | 1<<(8-1) | 1<<(11-1))
	n := 0
	for _, l := range strings.Split(p, "\n") {
		name, mask, ok := strings.Cut(strings.TrimPrefix(l, "+"), ":\t")
		if !ok || (name != "SigIgn" && name != "SigBlk") {
			continue
		}
		n++
		m, err := strconv.ParseUint(mask, 16, 64)
		if err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		if name == "SigBlk" && m != 0 || name == "SigIgn" && m&caught != 0 {
			t.Errorf("the agent or its child starts with %s %016x", name, m)
		}
	}
	return n
}
