package dispatch_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/compute/warm"
	"github.com/agora-dev/agora/internal/dispatch"
)

// podWarmEnv is an env whose kubernetes target "pod" on the real node keeps n warm slots,
// held by this (resident) Dispatcher; the node's gateway serves the home's slots.
func podWarmEnv(t testing.TB, n int) (*env, *dispatch.WarmPools, *podNode) {
	t.Helper()
	node := startPodNode(t)
	e := newEnv(t)
	e.addPodTarget(node)
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
	return e, w, node
}

func podCounts(w *dispatch.WarmPools) warm.Counts {
	for _, c := range w.Counts() {
		if c.Target == "pod" {
			return c
		}
	}
	return warm.Counts{}
}

// A kubernetes target's warm dispatch on a real kubelet (#30): the first dispatch starts cold
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
	deadline := time.Now().Add(3 * time.Minute)
	for podCounts(w).Ready < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("kubernetes warm slots: %+v, want 1 ready", podCounts(w))
		}
		time.Sleep(100 * time.Millisecond)
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
