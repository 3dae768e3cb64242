package agoratest

import (
	"fmt"
	"net/http"
	"os"

	"go.uber.org/goleak"
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
	if err := goleak.Find(opts...); err != nil {
		fmt.Fprintf(os.Stderr, "goroutines leaked: %v\n", err)
		return 1
	}
	return 0
}
