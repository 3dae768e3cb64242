package dispatch_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// holderScript forks sleepers until a fork fails, reports its limits, uid and how many it
// holds, and holds them (its shell execs the last sleep: a fork would fail).
const holderScript = `grep -E '^Max (processes|file size|open files)' /proc/self/limits
( n=0; while [ $n -lt 300 ]; do sleep 300 </dev/null >/dev/null 2>&1 & n=$((n+1)); echo $n > /tmp/n; done ) 2>/dev/null
read n < /tmp/n; echo "uid=$(id -u) held=$n"; exec sleep 300`

// The process-limit attack, in real pods on one node: dispatch A's agent forks up
// to its max_procs and holds. A pod has no process limit of its own, so the worker applies
// max_procs as RLIMIT_NPROC to itself and the agent; the kernel counts it per uid on the node,
// and each dispatch's pod runs as its own uid, so B, on the same node meanwhile, still forks
// and finishes while A holds.
func TestDispatch_RealPodNprocPerDispatch(t *testing.T) {
	n := startPodNode(t)
	e := newEnv(t)
	e.addPodTarget(n)
	tg := e.home.Config.Targets["pod"]
	tg.MaxProcs = 48
	e.home.Config.Targets["pod"] = tg
	e.subagent("holder", holderScript)
	e.subagent("forker", `echo "uid=$(id -u)"; sleep 0 & wait && echo forked=ok`)

	ctx := t.Context()
	a, err := e.d.Accept(ctx, dispatch.Request{Subagent: "holder", Target: "pod", Timeout: 4 * time.Minute, Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	aDone := make(chan *dispatch.Record, 1)
	go func() {
		r, err := e.d.Supervise(ctx, a.ID, nil)
		if err != nil {
			t.Error(err)
		}
		aDone <- r
	}()
	held := ""
	agoratest.Poll(3*time.Minute, func() bool {
		if l := e.d.Live(a.ID).LastLine; strings.Contains(l, "held=") {
			held = l
		}
		select {
		case r := <-aDone:
			t.Fatalf("A ended before it held its processes: %s %s: %s\n%s", r.State, r.Reason, r.Detail, n.podLogs(t))
		default:
		}
		return held != ""
	})
	if held == "" {
		t.Fatalf("A never reported its sleepers\npod logs:\n%s", n.podLogs(t))
	}
	t.Logf("A (%s): %s", a.ID, held)

	b := e.run(dispatch.Request{Subagent: "forker", Target: "pod", Timeout: 3 * time.Minute})
	out := ""
	if b.Result != nil && b.Result.Stdout != nil {
		out = e.stdout(b)
	}
	t.Logf("B (%s): %s %s, stdout %q", b.ID, b.State, b.Reason, out)
	if b.State != lifecycle.DispatchFinished || !strings.Contains(out, "forked=ok") {
		t.Errorf("B could not fork while A held its processes: %s %s: %s, stdout %q", b.State, b.Reason, b.Detail, out)
	}
	if strings.Contains(out, strings.Fields(held)[0]+"\n") {
		t.Errorf("A and B ran as the same uid (%s)", strings.Fields(held)[0])
	}
	// A still holds: B's success is not A's death.
	select {
	case r := <-aDone:
		t.Fatalf("A ended while B ran (%s %s: %s): the test shows nothing", r.State, r.Reason, r.Detail)
	default:
	}
	if _, err := e.d.Cancel(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	r := <-aDone
	all := e.stdout(r)
	t.Logf("A's output:\n%s", all)
	// The limits the worker applied, as the agent saw them, and a held count under them (the
	// worker's own threads count too).
	if !strings.Contains(all, "Max processes             48                   48") {
		t.Errorf("A's agent did not run under max_procs 48 as RLIMIT_NPROC: %q", all)
	}
	var count int
	if i := strings.Index(held, "held="); i >= 0 {
		count, _ = strconv.Atoi(strings.TrimSpace(held[i+len("held="):]))
	}
	if count < 5 || count >= 48 {
		t.Errorf("A held %d sleepers under max_procs 48", count)
	}
}
