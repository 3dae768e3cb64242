package dispatch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/dispatch"
)

// podSlotDifference is one line of the isolation probe that a claimed Kubernetes slot shows
// otherwise than a cold pod: the cold line, the claimed one, and why (docs/providers-k8s.md,
// "Differences from a cold pod").
type podSlotDifference struct{ cold, claimed, why string }

// podSlotDifferences are every such line, as the real kubelet showed them: difference 2
// of the docs, a slot's /agora a writable emptyDir its worker fetches the writable mounts into.
// The read-only places (the bundle, its manifest, the capability files) are read-only mounts in
// a claimed slot as in a cold pod: the agent's chmod, append, remove and create
// are refused in both, so no line of theirs differs. Before, a slot's were directories of its
// /agora, read-only by mode only, and the claimed agent wrote and created there after a chmod.
var podSlotDifferences = []podSlotDifference{
	{"agoraroot=readonly", "agoraroot=writable", "a slot's /agora is a writable emptyDir its worker fetches the writable mounts into at the claim; a cold pod's is a directory of its read-only root"},
}

// podIsolationProbe is the docker slots' probe with the attacks on a Kubernetes slot's filler:
// remount a read-only place writable, and reach the filler's writable side of
// the places (its stage) or its socket through any process's /proc/PID/root.
const podIsolationProbe = isolationProbe + `
mount -o remount,rw /agora/bundle 2>/dev/null && echo remount=ok || echo remount=refused
seen=no
for r in /proc/[0-9]*/root; do
  [ -e "$r/agora/stage" ] && seen=yes
  touch "$r/agora/bundle/x" 2>/dev/null && seen=yes
done
echo "filler-side=$seen"
[ -S /agora/fill/fill.sock ] && echo fill-socket=yes || echo fill-socket=no
`

// TestDispatch_RealPodWarmProbeDiff runs the isolation probe (the docker slots' one) in a cold
// pod and in a claimed slot pod on the real kubelet and compares them line by line: every
// line that differs is one of podSlotDifferences, and each of those appears exactly as named
// (a difference that went away fails too: the docs would be stale). The attack: from the
// claimed agent, write a read-only place (chmod back, append, remove, create): refused in the
// claimed slot exactly as in the cold pod.
func TestDispatch_RealPodWarmProbeDiff(t *testing.T) {
	e, w, _ := podWarmEnv(t, 1)
	e.subagent("prober", podIsolationProbe)
	req := dispatch.Request{Subagent: "prober", Repo: gitRepo(t, map[string]string{"README": "one\n"}), Target: "pod", Timeout: 4 * time.Minute}
	cold := e.run(req)
	wantFinished(t, cold)
	if !agoratest.Poll(3*time.Minute, func() bool { return podCounts(w).Ready >= 1 }) {
		t.Fatalf("kubernetes warm slots: %+v, want 1 ready", podCounts(w))
	}
	hot := e.run(req)
	wantFinished(t, hot)
	if c := podCounts(w); c.Claimed != 1 || c.Cold != 0 {
		t.Fatalf("counts %+v, want claimed 1, cold 0: the probe did not run in a slot", c)
	}
	co, ho := e.stdout(cold), e.stdout(hot)
	t.Logf("cold probe:\n%s\nclaimed probe:\n%s", co, ho)
	cl, hl := strings.Split(co, "\n"), strings.Split(ho, "\n")
	if len(cl) != len(hl) {
		t.Fatalf("probe lines: cold %d, claimed %d", len(cl), len(hl))
	}
	seen := map[int]bool{}
	for i := range cl {
		if cl[i] == hl[i] {
			continue
		}
		named := false
		for j, d := range podSlotDifferences {
			if d.cold == cl[i] && d.claimed == hl[i] {
				named, seen[j] = true, true
			}
		}
		if !named {
			t.Errorf("probe line %d differs and is not named: cold %q, claimed %q", i, cl[i], hl[i])
		}
	}
	for j, d := range podSlotDifferences {
		if !seen[j] {
			t.Errorf("named difference %q -> %q (%s) did not appear: update the list and docs/providers-k8s.md", d.cold, d.claimed, d.why)
		}
	}
}
