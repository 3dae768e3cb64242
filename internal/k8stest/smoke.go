package k8stest

import (
	"os"
	"strings"
	"testing"
)

// Which real-node tests run. A real node costs each test 30-120 s (containerd, the kubelet,
// images imported), and there are some thirty of them: all of them in `make test` would take
// CI's whole 45-minute budget (.ci/run on a fresh 2-core machine). So by default only the smoke
// set runs, one test per thing only a real node shows; AGORA_K8S_REAL_NODE=1 runs every one
// (make test-k8s), and =0 none. Every other real-node test skips, saying how to run it.
const (
	realNodeAll   = "1"
	realNodeNone  = "0"
	realNodeSmoke = "smoke"
)

// realNodeMode is AGORA_K8S_REAL_NODE: realNodeAll, realNodeNone, or realNodeSmoke (unset,
// or anything else).
func realNodeMode() string {
	switch m := os.Getenv("AGORA_K8S_REAL_NODE"); m {
	case realNodeAll, realNodeNone:
		return m
	}
	return realNodeSmoke
}

// inSmokeSet reports whether top-level test name is one of the real-node tests make test runs
// by default: the dispatch in a pod gives the same patch as a local one (dispatch, 21 s), a
// pod reaches only the gateway under the enforced NetworkPolicy (compute/kubernetes, 44 s)
// and the agent-sandbox warm pool's claim (dispatch, 42 s), quiet, under -race; and agora
// selftest's corpus in pods (selftest: one entry per class and observation), since CI proves
// the corpus on every provider.
// Not the leader killed under a running plan (TestRealNodeLeaderKill, 136 s: it builds and
// imports agora's images). A function, not a map: no work at init.
func inSmokeSet(name string) bool {
	switch name {
	case "TestDispatch_RealPodSamePatchAsLocal",
		"TestRealNodeNetpol_DispatchReachesOnlyTheGateway",
		"TestDispatch_RealPodAgentSandboxPool",
		"TestSelftest_KubernetesCorpus":
		return true
	}
	return false
}

// realNodeWanted reports, as a skip, why t gets no real node though the parts may be there.
// Benchmarks always get one: they run only when asked for.
func realNodeWanted(t testing.TB) error {
	switch realNodeMode() {
	case realNodeNone:
		return &skipError{"Options.RealNode is turned off by AGORA_K8S_REAL_NODE=0"}
	case realNodeAll:
		return nil
	}
	if _, bench := t.(*testing.B); bench {
		return nil
	}
	top, _, _ := strings.Cut(t.Name(), "/")
	if inSmokeSet(top) {
		return nil
	}
	return &skipError{top + " needs a real node, and make test runs only its smoke set of them " +
		"(k8stest smoke.go; a real node costs 30-120 s a test, CI's budget is 45 minutes): " +
		"AGORA_K8S_REAL_NODE=1 runs every real-node test (make test-k8s)"}
}
