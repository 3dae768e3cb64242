package dispatch_test

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/netgw"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
)

// TestDispatch_RealPodAgentSandboxSameAsJob runs the agent-sandbox backend on a real kubelet
// (containerd, runc, the bridge CNI) with agent-sandbox's real controller: the same
// openai-runtime dispatch runs once on a Job target and once on a `backend: agent-sandbox`
// target, and the two records, audit trails and patches are the same in shape: the same
// state, isolation, fields set, audit kinds in the same order, and byte-identical patches.
// Then, on the same node, its WarmSlot subtest: a warm slot of such a target.
func TestDispatch_RealPodAgentSandboxSameAsJob(t *testing.T) {
	n := startPodNodeWith(t, k8stest.Options{RealNode: true, AgentSandbox: true})
	e := newModelEnv(t)
	e.addPodTargets(n, map[string]string{"pod": kubernetes.BackendJobs, "pod-as": kubernetes.BackendAgentSandbox})
	e.capability("shell", "tools: [run_command]\ncommands: [\"sh -c *\"]\n", nil)
	e.modelSubagent("editor", "openai", "shell")
	repo := gitRepo(t, map[string]string{"README": "one\ntwo\n", "gone.txt": "bye\n"})

	type run struct {
		r      *dispatch.Record
		patch  string
		kinds  []string
		fields []string
	}
	runs := map[string]run{}
	for _, target := range []string{"pod", "pod-as"} {
		e.model(testAPIKey, openaitest.CallTool("run_command", mustJSON(t, map[string]any{"argv": []string{"sh", "-c", realPodEdit}})),
			openaitest.Say("edited"))
		begin := time.Now()
		r := e.run(dispatch.Request{Subagent: "editor", Repo: repo, Target: target, Envs: []string{"model"}, Timeout: 4 * time.Minute})
		t.Logf("target %q: %s in %s, task %s, isolation %s", target, r.State, time.Since(begin).Round(time.Millisecond), r.ProviderTaskID, r.Isolation)
		if r.State != lifecycle.DispatchFinished {
			t.Fatalf("target %q: dispatch %s: %s %s: %s\ndispatch logs:\n%s\ngateway log:\n%s\npod logs:\n%s\ncontroller log:\n%s", target, r.ID, r.State, r.Reason, r.Detail,
				e.logs(r.ID), n.gwLog, n.podLogs(t), n.c.AgentSandboxLog())
		}
		if r.Result == nil || r.Result.Patch == nil {
			t.Fatalf("target %q: no patch", target)
		}
		var kinds []string
		for _, a := range e.audited(r, "") {
			kinds = append(kinds, a.Kind)
		}
		runs[target] = run{r: r, patch: e.blob(r.Result.Patch), kinds: kinds, fields: setFields(t, r)}
	}
	job, sb := runs["pod"], runs["pod-as"]
	if job.patch != sb.patch || !strings.Contains(sb.patch, "+uno") {
		t.Errorf("patches differ:\njob:\n%s\nagent-sandbox:\n%s", job.patch, sb.patch)
	}
	if job.r.Isolation != sb.r.Isolation {
		t.Errorf("isolation: job %q, agent-sandbox %q", job.r.Isolation, sb.r.Isolation)
	}
	for _, want := range []string{"dispatch.accepted", "tool.call", "dispatch.finished"} {
		if !slices.Contains(sb.kinds, want) {
			t.Errorf("the agent-sandbox dispatch's audit has no %s: %v", want, sb.kinds)
		}
	}
	if !slices.Contains(sb.fields, "patch.digest") || !slices.Contains(sb.fields, "provider_task_id") {
		t.Errorf("the record's fields look empty: %v", sb.fields)
	}
	t.Logf("audit kinds: %v\nrecord fields: %v", sb.kinds, sb.fields)
	if !slices.Equal(job.kinds, sb.kinds) {
		t.Errorf("audit kinds differ:\njob:           %v\nagent-sandbox: %v", job.kinds, sb.kinds)
	}
	if !slices.Equal(job.fields, sb.fields) {
		t.Errorf("record fields differ:\njob:           %v\nagent-sandbox: %v", job.fields, sb.fields)
	}
	if !strings.HasPrefix(sb.r.ProviderTaskID, "k8s:"+n.c.Namespace+"/agora-") {
		t.Errorf("task id %q, want k8s:<namespace>/agora-<id>", sb.r.ProviderTaskID)
	}
	// Nothing of the agent-sandbox dispatch is left: the Sandbox went at its end.
	var sandboxes struct{ Items []json.RawMessage }
	if err := n.c.Do(t.Context(), "GET", "/apis/agents.x-k8s.io/v1beta1/namespaces/"+n.c.Namespace+"/sandboxes", nil, &sandboxes); err != nil {
		t.Fatal(err)
	}
	if len(sandboxes.Items) != 0 {
		t.Errorf("%d Sandboxes left after the dispatch ended", len(sandboxes.Items))
	}
}

// setFields lists the record's JSON fields that are set (and its result's), sorted: the shape
// of the record, not its values.
func setFields(t *testing.T, r *dispatch.Record) []string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if v == nil || v == "" || v == false || v == float64(0) {
				continue
			}
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub)
				continue
			}
			out = append(out, prefix+k)
		}
	}
	walk("", m)
	sort.Strings(out)
	return out
}

// addPodTargets adds one kubernetes target per name, on the node, with the backend given. A
// caller may set a target's runtime_class before its first dispatch.
func (e *env) addPodTargets(n *podNode, backends map[string]string) {
	base := e.home.Config.Targets[config.DefaultTarget]
	for name, backend := range backends {
		tg := base
		tg.Provider = config.ProviderKubernetes
		tg.Image, tg.WorkerImage = n.toolchain, n.workerRef
		tg.Kubeconfig, tg.Namespace, tg.Gateway, tg.Backend = n.c.Kubeconfig, n.c.Namespace, n.gatewayURL, backend
		e.home.Config.Targets[name] = tg
	}
	built := map[string]compute.Provider{}
	e.d.RemoteProviders = func(ctx context.Context, name string, tg config.Target) (compute.Provider, error) {
		if p := built[name]; p != nil {
			return p, nil
		}
		kp, err := kubernetes.New(kubernetes.Options{
			Kubeconfig: tg.Kubeconfig, Namespace: tg.Namespace, Image: tg.Image, WorkerImage: tg.WorkerImage,
			GatewayURL: tg.Gateway, GatewayCA: n.ca, Exporter: n.reg, Target: name, Backend: tg.Backend,
			RuntimeClass: tg.RuntimeClass, BindPod: (&netgw.Slots{Dir: n.slotsDir}).BindPod,
		})
		if err == nil {
			built[name] = kp
		}
		return kp, err
	}
}

// BenchmarkDispatch_RealPodJobVsAgentSandbox is one cold dispatch's wall time, Accept to the
// recorded result, of the same task on one real node (kubelet, containerd, runc) with
// agent-sandbox's controller: a Job target and a backend: agent-sandbox target, interleaved
// (each iteration runs one of each).
//
//	go test ./internal/dispatch -run '^$' -bench 'RealPodJobVsAgentSandbox' -benchtime 10x -benchmem
func BenchmarkDispatch_RealPodJobVsAgentSandbox(b *testing.B) {
	n := startPodNodeWith(b, k8stest.Options{RealNode: true, AgentSandbox: true})
	e := newEnv(b)
	e.subagent("editor", realPodEdit)
	e.addPodTargets(n, map[string]string{"pod": kubernetes.BackendJobs, "pod-as": kubernetes.BackendAgentSandbox})
	repo := gitRepo(b, map[string]string{"README": "one\ntwo\n", "gone.txt": "bye\n"})
	lat := map[string][]time.Duration{}
	for b.Loop() {
		for _, target := range []string{"pod", "pod-as"} {
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
