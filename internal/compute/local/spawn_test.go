package local

import (
	"runtime"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
)

// TestSpawner_ARunAsStartsThreadTakesNoTaskWithIt: an invoker's task is started from a
// thread the test's goroutine then hands back, and a run-as start, queued next, locks a
// thread for its sandbox and ends it with the sandbox. Were the task forked from that
// thread, its parent-death signal would kill it there: every task but a run-as start's bwrap
// is forked from the spawner's thread, which never ends.
func TestSpawner_ARunAsStartsThreadTakesNoTaskWithIt(t *testing.T) {
	requireRoot(t)
	requireBwrap(t)
	requireUserNS(t)
	p := newProvider47n(t)
	killed := 0
	for i := range 6 {
		s := spec47n(t, "task", "hold")
		s.RunAs = nil
		runtime.LockOSThread()
		x, err := start47n(p, s)
		runtime.UnlockOSThread()
		if err != nil {
			t.Fatal(err)
		}
		// Run-as starts, each on a thread it locks and the runtime then ends.
		for range 3 {
			r := run(t, p, compute.Spec{ID: "runas", Argv: []string{"true"}, RunAs: testRunAs})
			if r.exit.Code != 0 {
				t.Fatalf("run-as start: %+v %s", r.exit, r.stderr)
			}
		}
		settle47n(t, &p.netns)
		exit, err := x.end()
		x.ns.Close()
		if err != nil || exit.Code != 0 || exit.Signal != "" {
			killed++
			t.Logf("round %d: the invoker's task ended %+v (%v) before its release", i, exit, err)
		}
	}
	if killed > 0 {
		t.Errorf("%d of 6 invoker tasks died with a run-as start's thread", killed)
	}
}
