package dispatch_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
)

// TestDispatch_RealPodGVisor: on the real kubelet, a kubernetes target with
// runtime_class gvisor (a RuntimeClass whose handler is gVisor's runsc) runs a dispatch
// through the Job backend, and through the agent-sandbox backend (its real controller), to
// the same patch as the same target on runc, and it ran under gVisor: the agent's
// /proc/version is gVisor's kernel, and the node's containerd ran the pods' containers with
// runsc's runtime. A target naming a RuntimeClass the cluster lacks
// fails at once, saying so, instead of waiting out its timeout for a pod that never comes.
func TestDispatch_RealPodGVisor(t *testing.T) {
	n := startPodNodeWith(t, k8stest.Options{RealNode: true, GVisor: true, AgentSandbox: true})
	e := newEnv(t)
	e.subagent("editor", realPodEdit+"\ncat /proc/version")
	e.addPodTargets(n, map[string]string{"pod": kubernetes.BackendJobs, "gvisor": kubernetes.BackendJobs,
		"gvisor-as": kubernetes.BackendAgentSandbox, "nope": kubernetes.BackendJobs})
	for name, rc := range map[string]string{"gvisor": k8stest.GVisorRuntimeClass, "gvisor-as": k8stest.GVisorRuntimeClass, "nope": "no-such-class"} {
		tg := e.home.Config.Targets[name]
		tg.RuntimeClass = rc
		e.home.Config.Targets[name] = tg
	}
	repo := gitRepo(t, map[string]string{"README": "one\ntwo\n", "gone.txt": "bye\n"})

	patches, stdouts := map[string]string{}, map[string]string{}
	for _, target := range []string{"pod", "gvisor", "gvisor-as"} {
		begin := time.Now()
		r := e.run(dispatch.Request{Subagent: "editor", Repo: repo, Target: target, Timeout: 4 * time.Minute})
		t.Logf("target %s: %s in %s, isolation %s", target, r.State, time.Since(begin).Round(time.Millisecond), r.Isolation)
		if r.State != lifecycle.DispatchFinished {
			t.Fatalf("target %s: dispatch %s: %s %s: %s\ndispatch logs:\n%s\npod logs:\n%s\ncontainerd log:\n%s", target, r.ID, r.State, r.Reason, r.Detail,
				e.logs(r.ID), n.podLogs(t), n.c.Log("containerd"))
		}
		if r.Result == nil || r.Result.Patch == nil || r.Result.Stdout == nil {
			t.Fatalf("target %s: no patch or stdout", target)
		}
		patches[target], stdouts[target] = e.blob(r.Result.Patch), e.blob(r.Result.Stdout)
		n.logPodTimeline(t)
	}
	if !strings.Contains(patches["pod"], "+uno") {
		t.Errorf("the runc dispatch's patch lacks the edit:\n%s", patches["pod"])
	}
	for _, target := range []string{"gvisor", "gvisor-as"} {
		if patches[target] != patches["pod"] {
			t.Errorf("patches differ:\nrunc:\n%s\n%s:\n%s", patches["pod"], target, patches[target])
		}
		if !strings.Contains(stdouts[target], "-gvisor") {
			t.Errorf("target %s: the agent saw kernel %q, want gVisor's", target, strings.TrimSpace(stdouts[target]))
		}
	}
	t.Logf("the agent's kernel: runc %q, gvisor %q", strings.TrimSpace(stdouts["pod"]), strings.TrimSpace(stdouts["gvisor"]))
	if strings.Contains(stdouts["pod"], "gvisor") {
		t.Errorf("the runc dispatch saw gVisor's kernel: %q", stdouts["pod"])
	}
	// The node's side: the gVisor dispatches' pod sandboxes, fetch and worker containers
	// (a Job's pod and a Sandbox's) ran with runsc's runtime.
	out, err := n.c.Ctr(t.Context(), "containers", "ls")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(out), "io.containerd.runsc.v1"); got < 6 {
		t.Errorf("containerd lists %d containers of runtime io.containerd.runsc.v1, want the two pods' sandbox, fetch and worker:\n%s", got, out)
	}

	begin := time.Now()
	r := e.run(dispatch.Request{Subagent: "editor", Repo: repo, Target: "nope", Timeout: 4 * time.Minute})
	took := time.Since(begin)
	t.Logf("target nope: %s in %s: %s: %s", r.State, took.Round(time.Millisecond), r.Reason, r.Detail)
	if r.State == lifecycle.DispatchFinished || took > time.Minute ||
		!strings.Contains(r.Reason+" "+r.Detail, `runtime_class "no-such-class": the cluster has no RuntimeClass of that name`) {
		t.Errorf("a missing RuntimeClass: %s after %s (%s: %s), want a failure at once that names it", r.State, took, r.Reason, r.Detail)
	}
}

// BenchmarkDispatch_RealPodRuncVsGVisor is one cold dispatch's wall time, Accept to the
// recorded result, of the same task on one real node, on a Job target without a RuntimeClass
// (runc) and with runtime_class gvisor (runsc), interleaved (each iteration runs one of each):
// what gVisor adds to a dispatch.
//
//	go test ./internal/dispatch -run '^$' -bench 'RealPodRuncVsGVisor' -benchtime 10x -benchmem
func BenchmarkDispatch_RealPodRuncVsGVisor(b *testing.B) {
	n := startPodNodeWith(b, k8stest.Options{RealNode: true, GVisor: true})
	e := newEnv(b)
	e.subagent("editor", realPodEdit)
	e.addPodTargets(n, map[string]string{"runc": kubernetes.BackendJobs, "gvisor": kubernetes.BackendJobs})
	tg := e.home.Config.Targets["gvisor"]
	tg.RuntimeClass = k8stest.GVisorRuntimeClass
	e.home.Config.Targets["gvisor"] = tg
	repo := gitRepo(b, map[string]string{"README": "one\ntwo\n", "gone.txt": "bye\n"})
	lat := map[string][]time.Duration{}
	for b.Loop() {
		for _, target := range []string{"runc", "gvisor"} {
			begin := time.Now()
			r := e.run(dispatch.Request{Subagent: "editor", Repo: repo, Target: target, Timeout: 4 * time.Minute})
			wantFinished(b, r)
			lat[target] = append(lat[target], time.Since(begin))
		}
	}
	for target, l := range lat {
		slices.Sort(l)
		b.ReportMetric(float64(l[len(l)/2].Milliseconds()), "ms-median-"+target)
		b.Logf("%s: %v", target, l)
	}
}

// TestDispatch_RealPodGVisorProbe is TestDispatch_RealPodSamePatchAsLocal's key search on
// runtime_class gvisor: an openai-runtime dispatch in a gVisor pod searches everything
// it can read (files, every process's environment and command line) for the model key and
// its gateway token and finds neither, while its canaries show the search works; no object
// of the namespace and nothing the node keeps (runsc's state and logs included) holds the key.
func TestDispatch_RealPodGVisorProbe(t *testing.T) {
	n := startPodNodeWith(t, k8stest.Options{RealNode: true, GVisor: true})
	e := newModelEnv(t)
	e.addPodTargets(n, map[string]string{"gvisor": kubernetes.BackendJobs})
	tg := e.home.Config.Targets["gvisor"]
	tg.RuntimeClass = k8stest.GVisorRuntimeClass
	e.home.Config.Targets["gvisor"] = tg
	e.capability("shell", "tools: [run_command]\ncommands: [\"sh -c *\"]\n", nil)
	e.modelSubagent("editor", "openai", "shell")
	repo := gitRepo(t, map[string]string{"README": "one\ntwo\n", "gone.txt": "bye\n"})

	var (
		probe string
		objs  map[string][]byte
	)
	srv := e.model(testAPIKey,
		openaitest.Func(func(req openaitest.Request) openaitest.Reply {
			var err error
			if objs, err = n.objectsJSON(t.Context()); err != nil {
				t.Error(err)
			}
			token := sessionToken(t, objs["secrets"])
			return openaitest.Reply{ToolCalls: []openaitest.Call{{Name: "run_command",
				Arguments: mustJSON(t, map[string]any{"argv": []string{"sh", "-c", "cat /proc/version\n" + realPodProbe(testAPIKey, token)}})}}}
		}),
		openaitest.Func(func(req openaitest.Request) openaitest.Reply {
			probe = lastToolResult(t, req)
			return openaitest.Reply{Content: "probed"}
		}))
	r := e.run(dispatch.Request{Subagent: "editor", Repo: repo, Target: "gvisor", Envs: []string{"model"}, Timeout: 4 * time.Minute})
	if r.State != lifecycle.DispatchFinished {
		t.Fatalf("dispatch %s: %s %s: %s\ndispatch logs:\n%s\ngateway log:\n%s\npod logs:\n%s", r.ID, r.State, r.Reason, r.Detail,
			e.logs(r.ID), n.gwLog, n.podLogs(t))
	}
	if got := len(srv.Accepted()); got != 2 {
		t.Errorf("the model accepted %d requests, want 2", got)
	}
	t.Logf("the probe in the gVisor pod:\n%s", probe)
	if !strings.Contains(probe, "-gvisor") {
		t.Errorf("the probe did not run on gVisor's kernel")
	}
	checkProbe(t, probe)
	checkObjectsHoldNoKey(t, n, objs)
	checkNodeHoldsNoKey(t, n)
}

// TestDispatch_RealPodGVisorNproc: max_procs and file_size bind in a gVisor pod too. The
// worker applies them as RLIMIT_NPROC and RLIMIT_FSIZE to itself and the agent
// (worker/remote/rlimit.go); under runc the host kernel enforces them, under gVisor gVisor's
// kernel must. The agent forks sleepers until a fork fails and reports how many it holds
// (holderScript); another writes past file_size.
func TestDispatch_RealPodGVisorNproc(t *testing.T) {
	n := startPodNodeWith(t, k8stest.Options{RealNode: true, GVisor: true})
	e := newEnv(t)
	e.addPodTargets(n, map[string]string{"gvisor": kubernetes.BackendJobs})
	tg := e.home.Config.Targets["gvisor"]
	tg.RuntimeClass, tg.MaxProcs, tg.FileSize = k8stest.GVisorRuntimeClass, 48, 1<<20
	e.home.Config.Targets["gvisor"] = tg
	e.subagent("holder", holderScript)
	e.subagent("writer", `dd if=/dev/zero of=/tmp/big bs=4096 count=1024 2>/dev/null; echo "dd=$?"; echo "size=$(wc -c < /tmp/big)"`)

	w := e.run(dispatch.Request{Subagent: "writer", Target: "gvisor", Timeout: 3 * time.Minute})
	out := ""
	if w.Result != nil && w.Result.Stdout != nil {
		out = e.stdout(w)
	}
	t.Logf("writer: %s %s, stdout %q", w.State, w.Reason, out)
	if !strings.Contains(out, "size=1048576\n") || strings.Contains(out, "dd=0\n") {
		t.Errorf("a write past file_size 1 MiB on gVisor: %q, want dd refused at 1048576 bytes", out)
	}

	ctx := t.Context()
	a, err := e.d.Accept(ctx, dispatch.Request{Subagent: "holder", Target: "gvisor", Timeout: 4 * time.Minute, Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *dispatch.Record, 1)
	go func() {
		r, err := e.d.Supervise(ctx, a.ID, nil)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	held := ""
	agoratest.Poll(3*time.Minute, func() bool {
		if l := e.d.Live(a.ID).LastLine; strings.Contains(l, "held=") {
			held = l
		}
		select {
		case r := <-done:
			t.Fatalf("the agent ended before it held its processes: %s %s: %s\n%s", r.State, r.Reason, r.Detail, n.podLogs(t))
		default:
		}
		return held != ""
	})
	if held == "" {
		t.Fatalf("the agent never reported its sleepers\npod logs:\n%s", n.podLogs(t))
	}
	if _, err := e.d.Cancel(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	r := <-done
	all := e.stdout(r)
	t.Logf("the agent's output:\n%s", all)
	if !strings.Contains(all, "Max processes             48                   48") {
		t.Errorf("the agent did not run under max_procs 48 as RLIMIT_NPROC")
	}
	var count int
	if i := strings.Index(held, "held="); i >= 0 {
		count, _ = strconv.Atoi(strings.TrimSpace(held[i+len("held="):]))
	}
	if count < 5 || count >= 48 {
		t.Errorf("the agent held %d sleepers under max_procs 48 on gVisor", count)
	}
}
