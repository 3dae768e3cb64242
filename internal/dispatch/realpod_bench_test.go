package dispatch_test

import (
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
)

// BenchmarkDispatch_Targets is one dispatch's wall time, Accept to the recorded result, of the
// same task on the same commit under bubblewrap, in a hardened container (podman's Docker
// API) and in a pod on a real node (kubelet, containerd, runc): the cost of each provider's
// isolation and, for the pod, of the Job, the init container, the bundle download and the
// upload over the network gateway. A sub-benchmark whose parts are missing skips loudly. Each
// sets its target up (a cluster, images) before the timed loop; b.Loop runs it once.
//
//	go test ./internal/dispatch -run '^$' -bench 'Dispatch_Targets' -benchtime 5x -benchmem
func BenchmarkDispatch_Targets(b *testing.B) {
	for _, tc := range []struct {
		name, target string
		setup        func(b *testing.B, e *env)
	}{
		{"bubblewrap", "", func(*testing.B, *env) {}},
		{"docker", "box", func(b *testing.B, e *env) { e.addDockerTarget(requireContainer(b)) }},
		{"realpod", "pod", func(b *testing.B, e *env) { e.addPodTarget(startPodNode(b)) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e := newEnv(b)
			e.subagent("editor", realPodEdit)
			repo := gitRepo(b, map[string]string{"README": "one\ntwo\n", "gone.txt": "bye\n"})
			tc.setup(b, e)
			for b.Loop() {
				r := e.run(dispatch.Request{Subagent: "editor", Repo: repo, Target: tc.target, Timeout: 4 * time.Minute})
				wantFinished(b, r)
			}
		})
	}
}
