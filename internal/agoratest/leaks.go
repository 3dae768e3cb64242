package agoratest

import (
	"fmt"
	"net/http"
	"os"

	"go.uber.org/goleak"
)

// k8sSpawner is the function of k8stest's spawner goroutine, localSpawner compute/local's.
const (
	k8sSpawner   = "github.com/agora-dev/agora/internal/k8stest.init.func1.1"
	localSpawner = "github.com/agora-dev/agora/internal/compute/local.spawnLoop"
)

// NoLeaks is the exit code of a package's tests that ended with code: 1 when code is 0 but a
// goroutine a test started is still running (goleak), code otherwise. http.DefaultTransport's
// idle connections are closed first: their readers belong to the transport, not to a test.
// A TestMain ends with os.Exit(agoratest.NoLeaks(m.Run())).
func NoLeaks(code int, opts ...goleak.Option) int {
	if code != 0 {
		return code
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	// k8stest's spawner stays locked to its thread for the life of the test binary by design
	// (the Kubernetes children die with that thread); any package whose tests start a control
	// plane (dispatch's real-pod tests, orch/service's) has it. compute/local's spawner is
	// the same for the local provider's tasks, in any package whose tests start one.
	opts = append(opts, goleak.IgnoreAnyFunction(k8sSpawner), goleak.IgnoreAnyFunction(localSpawner))
	if err := goleak.Find(opts...); err != nil {
		fmt.Fprintf(os.Stderr, "goroutines leaked: %v\n", err)
		return 1
	}
	return 0
}
