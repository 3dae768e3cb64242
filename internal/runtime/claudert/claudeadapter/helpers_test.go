package claudeadapter

import (
	"os"
	"testing"

	"github.com/agora-dev/agora/internal/runtime/agentrun/agentruntest"
	"go.uber.org/goleak"
)

// The claude-code adapter's tests run it against the real gateway (the host side, imported by
// tests only) with the fake claude or the real CLI, and the real agora-worker as its hook;
// these helpers are the worker's tests' own.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// memAuditor keeps the gateway's records.
type memAuditor = agentruntest.Auditor

// startGateway runs the real gateway on a socket in a fresh directory, recording into a.
func startGateway(t *testing.T, a *memAuditor) string { return agentruntest.StartGateway(t, a) }
