package dispatch_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestDispatch_RealPodAgentSandboxPool is `warm_pool: true` on a real kubelet
// (containerd, runc, the bridge CNI) with agent-sandbox's real controller: the target's warm
// pods are agent-sandbox's own SandboxWarmPool, which this resident Dispatcher keeps
// (dispatch.PoolKeeper); each pool pod's init step enrols at the node's gateway with the
// kubelet's real projected ServiceAccount token (its symlinked path, its file mode), which
// the gateway verifies with a TokenReview (Dispatcher.PoolVerifier).
//
// The first dispatch finds no pool (the holder learns the shape from it) and starts cold,
// counted. Then two dispatches each claim a pod of the pool and finish with the cold one's
// record fields, audit kinds in the same order, byte-identical patch and isolation; each ran
// in a Sandbox the pool made (a pool pod), not one named for the dispatch; the two never
// share a pod (their Sandboxes and pod uids differ), each pod enrolled once (one marker per
// uid), and the counts say two claimed, one cold.
func TestDispatch_RealPodAgentSandboxPool(t *testing.T) {
	n := startPodNodeWith(t, k8stest.Options{RealNode: true, AgentSandbox: true})
	docs, err := os.ReadFile("../../examples/kubernetes/rbac-pool.yaml") // the agora-pool ServiceAccount
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(strings.ReplaceAll(string(docs), "namespace: agents", "namespace: "+n.c.Namespace), "\n---\n") {
		if err := n.c.ApplyYAML(t.Context(), []byte(doc)); err != nil && !strings.Contains(err.Error(), "already exists") {
			t.Fatalf("apply examples/kubernetes/rbac-pool.yaml: %v", err)
		}
	}
	e := newEnv(t)
	// A pool's pods share one uid: a root agora's dispatches (each as a uid it leases) never
	// claim one; this home stages as the invoking user, for the cold run and the pool's alike.
	dispatch.StageAsInvokingUser(e.d)
	e.subagent("editor", realPodEdit)
	e.addPodTargets(n, map[string]string{"pool": kubernetes.BackendAgentSandbox})
	tg := e.home.Config.Targets["pool"]
	tg.Warm, tg.WarmPool = 2, new(true)
	e.home.Config.Targets["pool"] = tg
	gw := filepath.Join(e.home.Dir, "gateway")
	if err := os.MkdirAll(gw, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(n.slotsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(n.slotsDir, filepath.Join(gw, "slots")); err != nil {
		t.Fatal(err)
	}
	v, err := e.d.PoolVerifier(t.Context())
	if err != nil || v == nil {
		t.Fatalf("PoolVerifier = %v, %v", v, err)
	}
	n.pods.set(v)
	w, err := e.d.StartWarm(t.Context())
	if err != nil || w == nil {
		t.Fatalf("StartWarm: %v, %v", w, err)
	}
	t.Cleanup(w.Close)
	counts := func() (c struct{ Want, Ready, Claimed, Cold int }) {
		for _, x := range w.Counts() {
			if x.Target == "pool" {
				c.Want, c.Ready, c.Claimed, c.Cold = x.Want, x.Ready, int(x.Claimed), int(x.Cold)
			}
		}
		return c
	}

	repo := gitRepo(t, map[string]string{"README": "one\ntwo\n", "gone.txt": "bye\n"})
	req := dispatch.Request{Subagent: "editor", Repo: repo, Target: "pool", Timeout: 4 * time.Minute}
	begin := time.Now()
	cold := e.run(req)
	t.Logf("cold: %s in %s, task %s", cold.State, time.Since(begin).Round(time.Millisecond), cold.ProviderTaskID)
	if cold.State != lifecycle.DispatchFinished {
		t.Fatalf("cold dispatch %s: %s %s: %s\ngateway log:\n%s\npod logs:\n%s", cold.ID, cold.State, cold.Reason, cold.Detail, n.gwLog, n.podLogs(t))
	}
	if want := "k8s:" + n.c.Namespace + "/agora-" + strings.ToLower(cold.ID); cold.ProviderTaskID != want {
		t.Errorf("cold task id %q, want %q (a Sandbox of its own)", cold.ProviderTaskID, want)
	}
	if c := counts(); c.Cold != 1 || c.Claimed != 0 {
		t.Errorf("after the first dispatch: counts %+v, want one cold, none claimed", c)
	}

	if !agoratest.Poll(4*time.Minute, func() bool { return counts().Ready >= 2 }) {
		t.Fatalf("the pool: %+v, want 2 ready\ngateway log:\n%s\npod logs:\n%s\ncontroller log:\n%s", counts(), n.gwLog, n.podLogs(t), n.c.AgentSandboxLog())
	}
	t.Logf("pool ready %s after the cold dispatch began", time.Since(begin).Round(time.Millisecond))

	var hots []*dispatch.Record
	for i := range 2 {
		begin := time.Now()
		hot := e.run(req)
		t.Logf("pool dispatch %d: %s in %s, task %s", i, hot.State, time.Since(begin).Round(time.Millisecond), hot.ProviderTaskID)
		if hot.State != lifecycle.DispatchFinished {
			t.Fatalf("pool dispatch %s: %s %s: %s\ndispatch log:\n%s\ngateway log:\n%s\npod logs:\n%s", hot.ID, hot.State, hot.Reason, hot.Detail, e.logs(hot.ID), n.gwLog, n.podLogs(t))
		}
		hots = append(hots, hot)
	}
	if c := counts(); c.Claimed != 2 || c.Cold != 1 {
		t.Fatalf("counts %+v, want two claimed, one cold: the dispatches did not run in the pool\ndispatch logs:\n%s\n%s", c, e.logs(hots[0].ID), e.logs(hots[1].ID))
	}
	// Each ran in a Sandbox the pool made (agora-pool-<hash>-<suffix>), not one of its own
	// name, and never the same one.
	var sandboxes []string
	for _, hot := range hots {
		name, ok := strings.CutPrefix(hot.ProviderTaskID, "k8s:"+n.c.Namespace+"/")
		if !ok || !strings.HasPrefix(name, "agora-pool-") {
			t.Errorf("pool dispatch %s's task id %q: want k8s:%s/agora-pool-...", hot.ID, hot.ProviderTaskID, n.c.Namespace)
		}
		sandboxes = append(sandboxes, name)
	}
	if sandboxes[0] == sandboxes[1] {
		t.Errorf("two dispatches ran in one Sandbox %s", sandboxes[0])
	}
	// Each pod enrolled once: the gateway's markers, one per pod uid, at least the two claimed.
	marks, err := os.ReadDir(filepath.Join(n.slotsDir, ".pods"))
	if err != nil || len(marks) < 2 {
		t.Errorf("enrolment markers: %d, %v; want one per pool pod, at least 2", len(marks), err)
	}

	kinds := func(r *dispatch.Record) []string {
		var out []string
		for _, a := range e.audited(r, "") {
			out = append(out, a.Kind)
		}
		return out
	}
	ck, cf, cp := kinds(cold), setFields(t, cold), e.patch(cold)
	if !strings.Contains(cp, "+uno") {
		t.Errorf("the cold patch lacks the edit:\n%s", cp)
	}
	for _, hot := range hots {
		if hf := setFields(t, hot); !slices.Equal(cf, hf) {
			t.Errorf("record fields differ:\ncold: %v\npool: %v", cf, hf)
		}
		if hk := kinds(hot); !slices.Equal(ck, hk) || !slices.Contains(hk, "dispatch.finished") {
			t.Errorf("audit kinds differ:\ncold: %v\npool: %v", ck, hk)
		}
		if hp := e.patch(hot); hp != cp {
			t.Errorf("patches differ:\ncold:\n%s\npool:\n%s", cp, hp)
		}
		if hot.Isolation != cold.Isolation || hot.Isolation == "" {
			t.Errorf("isolation: cold %q, pool %q", cold.Isolation, hot.Isolation)
		}
		if out := e.stdout(hot); !strings.Contains(out, "edited") {
			t.Errorf("pool dispatch %s: stdout %q", hot.ID, out)
		}
	}
	t.Logf("audit kinds: %v", ck)
}
