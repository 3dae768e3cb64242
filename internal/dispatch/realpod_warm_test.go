package dispatch_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute/warm"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
)

// podWarmEnv is an env whose kubernetes target "pod" on the real node keeps n warm slots,
// held by this (resident) Dispatcher; the node's gateway serves the home's slots.
func podWarmEnv(t testing.TB, n int) (*env, *dispatch.WarmPools, *podNode) {
	t.Helper()
	node := startPodNode(t)
	e := newEnv(t)
	return e, podWarmOn(t, e, node, n), node
}

// podWarmOn gives e the target "pod" on node with n warm slots, held by e's Dispatcher.
func podWarmOn(t testing.TB, e *env, node *podNode, n int) *dispatch.WarmPools {
	t.Helper()
	e.addPodTarget(node)
	return podWarmTarget(t, e, node, n)
}

// podWarmTarget gives e's target "pod" (on node, made already) n warm slots, held by e's
// Dispatcher.
func podWarmTarget(t testing.TB, e *env, node *podNode, n int) *dispatch.WarmPools {
	t.Helper()
	tg := e.home.Config.Targets["pod"]
	tg.Warm = n
	e.home.Config.Targets["pod"] = tg
	// The dispatcher makes its slots in AGORA_HOME/gateway/slots, which `agora gateway serve`
	// of the same home serves; here the test's gateway serves its own directory.
	gw := filepath.Join(e.home.Dir, "gateway")
	if err := os.MkdirAll(node.slotsDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(gw, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(node.slotsDir, filepath.Join(gw, "slots")); err != nil {
		t.Fatal(err)
	}
	w, err := e.d.StartWarm(t.Context())
	if err != nil || w == nil {
		t.Fatalf("StartWarm: %v, %v", w, err)
	}
	t.Cleanup(w.Close)
	return w
}

func podCounts(w *dispatch.WarmPools) warm.Counts {
	for _, c := range w.Counts() {
		if c.Target == "pod" {
			return c
		}
	}
	return warm.Counts{}
}

// A kubernetes target's warm dispatch on a real kubelet: the first dispatch starts cold
// and teaches the pool its shape; the next claims the started slot pod over the network
// gateway and ends as the cold one did: state, output, patch, isolation; the slot is used once
// (the pool starts another).
func TestDispatch_RealPodWarmSlot(t *testing.T) {
	e, w, _ := podWarmEnv(t, 1)
	e.subagent("editor", realPodEdit+"\necho \"uid-nonroot=$([ \"$(id -u)\" != 0 ] && echo yes)\"")
	repo := gitRepo(t, map[string]string{"README": "one\ntwo\n", "gone.txt": "bye\n"})
	req := dispatch.Request{Subagent: "editor", Repo: repo, Target: "pod", Timeout: 4 * time.Minute}
	cold := e.run(req)
	wantFinished(t, cold)
	if !agoratest.Poll(3*time.Minute, func() bool { return podCounts(w).Ready >= 1 }) {
		t.Fatalf("kubernetes warm slots: %+v, want 1 ready", podCounts(w))
	}
	hot := e.run(req)
	t.Logf("warm: %s %s %s stdout %q stderr %q", hot.State, hot.Reason, hot.Detail, e.stdout(hot), e.stderr(hot))
	wantFinished(t, hot)
	if c := podCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("counts %+v, want claimed 1, cold 0", c)
	}
	for _, r := range []*dispatch.Record{cold, hot} {
		if out := e.stdout(r); !strings.Contains(out, "edited") || !strings.Contains(out, "uid-nonroot=yes") {
			t.Errorf("dispatch %s: stdout %q", r.ID, out)
		}
	}
	if cold.Isolation != hot.Isolation {
		t.Errorf("isolation: cold %q, warm %q", cold.Isolation, hot.Isolation)
	}
	if cp, hp := e.patch(cold), e.patch(hot); cp != hp || !strings.Contains(hp, "+uno") || !strings.Contains(hp, "+hello") {
		t.Errorf("patches differ or lack the edit:\ncold:\n%s\nwarm:\n%s", cp, hp)
	}
	if !strings.HasPrefix(hot.ProviderTaskID, "k8s:") || hot.ProviderTaskID == cold.ProviderTaskID {
		t.Errorf("task ids: cold %q, warm %q", cold.ProviderTaskID, hot.ProviderTaskID)
	}
}

// The isolation probe in a warm slot: an openai dispatch claims a slot pod; the probe
// searches everything the agent can read in that pod for the model key and for the slot's
// token (from the claimed slot's Secret; the gateway revoked it at the claim) and finds
// neither, as in a cold pod (TestDispatch_RealPodSamePatchAsLocal).
func TestDispatch_RealPodWarmProbe(t *testing.T) {
	n := startPodNode(t)
	e := newModelEnv(t)
	w := podWarmOn(t, e, n, 1)
	e.capability("shell", "tools: [run_command]\ncommands: [\"sh -c *\"]\n", nil)
	e.modelSubagent("editor", "openai", "shell")
	repo := gitRepo(t, map[string]string{"README": "one\ntwo\n", "gone.txt": "bye\n"})
	edit := openaitest.CallTool("run_command", mustJSON(t, map[string]any{"argv": []string{"sh", "-c", realPodEdit}}))
	var probe string
	srv := e.model(testAPIKey, edit, openaitest.Say("edited"), edit,
		openaitest.Func(func(req openaitest.Request) openaitest.Reply {
			token := claimedSlotToken(t, n)
			return openaitest.Reply{ToolCalls: []openaitest.Call{{Name: "run_command",
				Arguments: mustJSON(t, map[string]any{"argv": []string{"sh", "-c", realPodProbe(testAPIKey, token)}})}}}
		}),
		openaitest.Func(func(req openaitest.Request) openaitest.Reply {
			probe = lastToolResult(t, req)
			return openaitest.Reply{Content: "probed"}
		}))
	req := dispatch.Request{Subagent: "editor", Repo: repo, Target: "pod", Envs: []string{"model"}, Timeout: 4 * time.Minute}
	cold := e.run(req)
	wantFinished(t, cold)
	if !agoratest.Poll(3*time.Minute, func() bool { return podCounts(w).Ready >= 1 }) {
		t.Fatalf("kubernetes warm slots: %+v, want 1 ready", podCounts(w))
	}
	hot := e.run(req)
	if hot.State != lifecycle.DispatchFinished {
		t.Fatalf("warm dispatch %s: %s %s: %s\ngateway log:\n%s", hot.ID, hot.State, hot.Reason, hot.Detail, n.gwLog)
	}
	if c := podCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("counts %+v, want claimed 1, cold 0: the probe did not run in a slot", c)
	}
	if got := len(srv.Accepted()); got != 5 {
		t.Errorf("the model accepted %d requests, want 5", got)
	}
	if cp, hp := e.blob(cold.Result.Patch), e.blob(hot.Result.Patch); cp != hp {
		t.Errorf("patches differ:\ncold:\n%s\nwarm:\n%s", cp, hp)
	}
	t.Logf("the probe in the warm pod:\n%s", probe)
	checkProbe(t, probe)
}

// claimedSlotToken is the token in the Secret of the slot Job marked claimed.
func claimedSlotToken(t *testing.T, n *podNode) string {
	var jobs struct {
		Items []struct {
			Metadata struct {
				Name        string
				Annotations map[string]string
			}
		}
	}
	if err := n.c.Do(t.Context(), "GET", "/apis/batch/v1/namespaces/"+n.c.Namespace+"/jobs", nil, &jobs); err != nil {
		t.Error(err)
		return "no-claimed-slot"
	}
	for _, j := range jobs.Items {
		if j.Metadata.Annotations["agora.dev/claimed"] == "" {
			continue
		}
		var sec struct{ Data map[string][]byte }
		if err := n.c.Do(t.Context(), "GET", "/api/v1/namespaces/"+n.c.Namespace+"/secrets/"+j.Metadata.Name, nil, &sec); err != nil || len(sec.Data["token"]) < 16 {
			t.Errorf("the claimed slot's Secret: %v", err)
			return "no-claimed-slot"
		}
		return string(sec.Data["token"])
	}
	t.Error("no claimed slot Job while the warm dispatch runs")
	return "no-claimed-slot"
}
