package dispatch_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestDispatch_RealPodGVisorMemory: an agent that allocates without end (`tail
// /dev/zero` holds all it reads, looking for a line) on a target with memory 96 MiB, on runc
// and on runtime_class gvisor. The limit binds on both, differently: under runc the pod's
// cgroup OOM-kills the container, worker and all (the dispatch ends failed/worker-failed,
// "killed"); under gVisor the pod's cgroup holds gVisor's whole sandbox, gVisor's kernel
// could not back the agent's next page and the agent died of SIGSEGV (exit 139) after ~25 s,
// while the worker lived on and reported: the dispatch finished with the agent's failure in
// its output.
func TestDispatch_RealPodGVisorMemory(t *testing.T) {
	n := startPodNodeWith(t, k8stest.Options{RealNode: true, GVisor: true})
	e := newEnv(t)
	e.addPodTargets(n, map[string]string{"runc": kubernetes.BackendJobs, "gvisor": kubernetes.BackendJobs})
	for name, rc := range map[string]string{"runc": "", "gvisor": k8stest.GVisorRuntimeClass} {
		tg := e.home.Config.Targets[name]
		tg.RuntimeClass, tg.Memory = rc, 96<<20
		e.home.Config.Targets[name] = tg
	}
	e.subagent("eater", `echo start; tail /dev/zero; echo "tail=$?"`)
	// What each runtime did here (runc: failed/worker-failed, "tail=137"; gVisor: finished,
	// "tail=139") is logged; the test holds what must not change: the agent is stopped by the
	// limit (a signal, not its own exit and not the dispatch's timeout), in well under the
	// timeout, on both.
	for _, target := range []string{"runc", "gvisor"} {
		begin := time.Now()
		r := e.run(dispatch.Request{Subagent: "eater", Target: target, Timeout: 3 * time.Minute})
		took := time.Since(begin)
		out := ""
		if r.Result != nil && r.Result.Stdout != nil {
			out = e.stdout(r)
		}
		t.Logf("%s: %s %s: %s in %s, stdout %q", target, r.State, r.Reason, r.Detail, took.Round(time.Millisecond), out)
		signalled := regexp.MustCompile(`tail=1(2[89]|[3-9][0-9])\n`).MatchString(out)
		if !strings.Contains(out, "start\n") || !signalled || r.Reason == lifecycle.ReasonTimeout || took > 2*time.Minute {
			t.Errorf("%s: the agent past its memory limit: %s %s, %q after %s; want it killed by a signal well before the timeout",
				target, r.State, r.Reason, out, took)
		}
	}
}
