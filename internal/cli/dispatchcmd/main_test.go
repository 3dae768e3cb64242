package dispatchcmd

import (
	"os"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest"
)

// TestMain lets this test binary be the peer of the resident tests (redTeam48bPeer, which
// exits when it is one), and fails the package when a goroutine a test started outlives it.
func TestMain(m *testing.M) {
	redTeam48bPeer()
	os.Exit(agoratest.NoLeaks(m.Run()))
}
