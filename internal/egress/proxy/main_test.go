package proxy

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine a test started outlives the tests: a proxy
// leaks one per connection it forgets.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
