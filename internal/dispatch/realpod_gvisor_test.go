package dispatch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/k8stest"
)

// TestDispatch_RealPodGVisor (#30): on the real kubelet, a kubernetes target with
// runtime_class gvisor (a RuntimeClass whose handler is gVisor's runsc) runs a dispatch
// through the Job backend to the same patch as the same target on runc, and it ran under
// gVisor: the agent's /proc/version is gVisor's kernel, and the node's containerd ran the
// pod's containers with runsc's runtime. A target naming a RuntimeClass the cluster lacks
// fails at once, saying so, instead of waiting out its timeout for a pod that never comes.
func TestDispatch_RealPodGVisor(t *testing.T) {
	n := startPodNodeWith(t, k8stest.Options{RealNode: true, GVisor: true})
	e := newEnv(t)
	e.subagent("editor", realPodEdit+"\ncat /proc/version")
	e.addPodTargets(n, map[string]string{"pod": kubernetes.BackendJobs, "gvisor": kubernetes.BackendJobs, "nope": kubernetes.BackendJobs})
	for name, rc := range map[string]string{"gvisor": k8stest.GVisorRuntimeClass, "nope": "no-such-class"} {
		tg := e.home.Config.Targets[name]
		tg.RuntimeClass = rc
		e.home.Config.Targets[name] = tg
	}
	repo := gitRepo(t, map[string]string{"README": "one\ntwo\n", "gone.txt": "bye\n"})

	patches, stdouts := map[string]string{}, map[string]string{}
	for _, target := range []string{"pod", "gvisor"} {
		begin := time.Now()
		r := e.run(dispatch.Request{Subagent: "editor", Repo: repo, Target: target, Timeout: 4 * time.Minute})
		t.Logf("target %s: %s in %s, isolation %s", target, r.State, time.Since(begin).Round(time.Millisecond), r.Isolation)
		if r.State != dispatch.StateFinished {
			t.Fatalf("target %s: dispatch %s: %s %s: %s\ndispatch logs:\n%s\npod logs:\n%s\ncontainerd log:\n%s", target, r.ID, r.State, r.Reason, r.Detail,
				e.logs(r.ID), n.podLogs(t), n.c.Log("containerd"))
		}
		if r.Result == nil || r.Result.Patch == nil || r.Result.Stdout == nil {
			t.Fatalf("target %s: no patch or stdout", target)
		}
		patches[target], stdouts[target] = e.blob(r.Result.Patch), e.blob(r.Result.Stdout)
		n.logPodTimeline(t)
	}
	if patches["pod"] != patches["gvisor"] || !strings.Contains(patches["gvisor"], "+uno") {
		t.Errorf("patches differ or lack the edit:\nrunc:\n%s\ngvisor:\n%s", patches["pod"], patches["gvisor"])
	}
	t.Logf("the agent's kernel: runc %q, gvisor %q", strings.TrimSpace(stdouts["pod"]), strings.TrimSpace(stdouts["gvisor"]))
	if strings.Contains(stdouts["pod"], "gvisor") || !strings.Contains(stdouts["gvisor"], "-gvisor") {
		t.Errorf("want the host's kernel on runc and gVisor's on runtime_class gvisor")
	}
	// The node's side: the gVisor dispatch's pod sandbox, fetch and worker containers ran
	// with runsc's runtime.
	out, err := n.c.Ctr(t.Context(), "containers", "ls")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(out), "io.containerd.runsc.v1"); got < 3 {
		t.Errorf("containerd lists %d containers of runtime io.containerd.runsc.v1, want the pod's sandbox, fetch and worker:\n%s", got, out)
	}

	begin := time.Now()
	r := e.run(dispatch.Request{Subagent: "editor", Repo: repo, Target: "nope", Timeout: 4 * time.Minute})
	took := time.Since(begin)
	t.Logf("target nope: %s in %s: %s: %s", r.State, took.Round(time.Millisecond), r.Reason, r.Detail)
	if r.State == dispatch.StateFinished || took > time.Minute ||
		!strings.Contains(r.Reason+" "+r.Detail, `runtime_class "no-such-class": the cluster has no RuntimeClass of that name`) {
		t.Errorf("a missing RuntimeClass: %s after %s (%s: %s), want a failure at once that names it", r.State, took, r.Reason, r.Detail)
	}
}
