package dispatch_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
)

// sandboxWatch records the name of every agent-sandbox Sandbox that exists in the node's
// namespace while it runs (listed every 50 ms: a dispatch's Sandbox lives seconds).
type sandboxWatch struct {
	mu   sync.Mutex
	seen map[string]bool
	stop func()
}

func watchSandboxes(t *testing.T, n *podNode) *sandboxWatch {
	w := &sandboxWatch{seen: map[string]bool{}}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var l struct {
				Items []struct{ Metadata struct{ Name string } }
			}
			if err := n.c.Do(ctx, http.MethodGet, "/apis/agents.x-k8s.io/v1beta1/namespaces/"+n.c.Namespace+"/sandboxes", nil, &l); err == nil {
				w.mu.Lock()
				for _, sb := range l.Items {
					w.seen[sb.Metadata.Name] = true
				}
				w.mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	w.stop = func() { cancel(); <-done }
	t.Cleanup(w.stop)
	return w
}

// names stops the watch and returns what it saw.
func (w *sandboxWatch) names() []string {
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for n := range w.seen {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// realPodAgentSandboxWarmSlot is `warm: 1` on a `backend: agent-sandbox` target on a real
// kubelet with agent-sandbox's real controller, on node n, in a home of its own
// (TestDispatch_RealPodAgentSandboxSameAsJob runs it on its node: one node start for both).
// As providers-k8s.md says: the first dispatch runs cold in a Sandbox (its task id names it;
// no Job); the slot is a Job of the Job backend, never a Sandbox; the next dispatch claims it
// and finishes with the same record fields, the same audit kinds in the same order, a
// byte-identical patch and the same isolation as the cold one; its task id names the slot's
// Job, marked claimed by it; no Sandbox exists at any time of the warm dispatch; the slot is
// used once (its gateway slot is gone, the pool counts it claimed).
func realPodAgentSandboxWarmSlot(t *testing.T, n *podNode) {
	e := newEnv(t)
	e.subagent("editor", realPodEdit)
	e.addPodTargets(n, map[string]string{"pod": kubernetes.BackendAgentSandbox})
	w := podWarmTarget(t, e, n, 1)
	repo := gitRepo(t, map[string]string{"README": "one\ntwo\n", "gone.txt": "bye\n"})
	req := dispatch.Request{Subagent: "editor", Repo: repo, Target: "pod", Timeout: 4 * time.Minute}

	begin := time.Now()
	coldSeen := watchSandboxes(t, n)
	cold := e.run(req)
	t.Logf("cold: %s in %s, task %s", cold.State, time.Since(begin).Round(time.Millisecond), cold.ProviderTaskID)
	if cold.State != lifecycle.DispatchFinished {
		t.Fatalf("cold dispatch %s: %s %s: %s\ngateway log:\n%s\npod logs:\n%s\ncontroller log:\n%s", cold.ID, cold.State, cold.Reason, cold.Detail,
			n.gwLog, n.podLogs(t), n.c.AgentSandboxLog())
	}
	coldName := "agora-" + strings.ToLower(cold.ID)
	if cold.ProviderTaskID != "k8s:"+n.c.Namespace+"/"+coldName {
		t.Errorf("cold task id %q, want k8s:%s/%s", cold.ProviderTaskID, n.c.Namespace, coldName)
	}
	if seen := coldSeen.names(); !slices.Contains(seen, coldName) {
		t.Errorf("the cold dispatch ran in no Sandbox of its name: saw %v", seen)
	}

	if !agoratest.Poll(3*time.Minute, func() bool { return podCounts(w).Ready >= 1 }) {
		t.Fatalf("kubernetes warm slots of an agent-sandbox target: %+v, want 1 ready\ngateway log:\n%s", podCounts(w), n.gwLog)
	}
	t.Logf("slot ready %s after the cold dispatch began", time.Since(begin).Round(time.Millisecond))

	hotSeen := watchSandboxes(t, n)
	begin = time.Now()
	hot := e.run(req)
	t.Logf("warm: %s in %s, task %s", hot.State, time.Since(begin).Round(time.Millisecond), hot.ProviderTaskID)
	if hot.State != lifecycle.DispatchFinished {
		t.Fatalf("warm dispatch %s: %s %s: %s\ngateway log:\n%s\npod logs:\n%s", hot.ID, hot.State, hot.Reason, hot.Detail, n.gwLog, n.podLogs(t))
	}
	if seen := hotSeen.names(); len(seen) != 0 {
		t.Errorf("Sandboxes existed during the warm dispatch: %v", seen)
	}
	if c := podCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("counts %+v, want claimed 1, cold 0: the dispatch did not run in the slot", c)
	}

	// The task id names the slot's Job (agora-s<32 hex>), marked claimed by the dispatch.
	slotName, ok := strings.CutPrefix(hot.ProviderTaskID, "k8s:"+n.c.Namespace+"/")
	if !ok || !strings.HasPrefix(slotName, "agora-s") {
		t.Fatalf("warm task id %q, want k8s:%s/agora-s<slot>", hot.ProviderTaskID, n.c.Namespace)
	}
	var job struct {
		Metadata struct {
			Labels      map[string]string
			Annotations map[string]string
		}
	}
	if err := n.c.Do(t.Context(), http.MethodGet, "/apis/batch/v1/namespaces/"+n.c.Namespace+"/jobs/"+slotName, nil, &job); err != nil {
		t.Fatalf("the warm dispatch's Job %s: %v", slotName, err)
	}
	slot := job.Metadata.Labels["agora.slot"]
	if "agora-"+slot != slotName || job.Metadata.Annotations["agora.dev/claimed"] != hot.ID {
		t.Errorf("the slot Job's labels %v, annotations %v: want slot %s claimed by %s", job.Metadata.Labels, job.Metadata.Annotations, slotName, hot.ID)
	}
	// Used once: the gateway's record of the slot (its token's hash) went at the claim.
	if _, err := os.Stat(filepath.Join(n.slotsDir, slot, "slot.json")); !os.IsNotExist(err) {
		t.Errorf("the claimed slot's gateway record stands: %v", err)
	}

	// Indistinguishable from the cold one: record fields, audit kinds, patch, isolation.
	if cf, hf := setFields(t, cold), setFields(t, hot); !slices.Equal(cf, hf) {
		t.Errorf("record fields differ:\ncold: %v\nwarm: %v", cf, hf)
	}
	kinds := func(r *dispatch.Record) []string {
		var out []string
		for _, a := range e.audited(r, "") {
			out = append(out, a.Kind)
		}
		return out
	}
	ck, hk := kinds(cold), kinds(hot)
	t.Logf("audit kinds: %v", hk)
	if !slices.Equal(ck, hk) || !slices.Contains(hk, "dispatch.accepted") || !slices.Contains(hk, "dispatch.finished") {
		t.Errorf("audit kinds differ:\ncold: %v\nwarm: %v", ck, hk)
	}
	if cp, hp := e.patch(cold), e.patch(hot); cp != hp || !strings.Contains(hp, "+uno") {
		t.Errorf("patches differ or lack the edit:\ncold:\n%s\nwarm:\n%s", cp, hp)
	}
	if cold.Isolation != hot.Isolation || hot.Isolation == "" {
		t.Errorf("isolation: cold %q, warm %q", cold.Isolation, hot.Isolation)
	}
	for _, r := range []*dispatch.Record{cold, hot} {
		if out := e.stdout(r); !strings.Contains(out, "edited") {
			t.Errorf("dispatch %s: stdout %q", r.ID, out)
		}
	}
}
