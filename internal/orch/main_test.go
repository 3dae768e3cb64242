package orch_test

import (
	"os"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest"
)

// TestMain fails the package when a goroutine a test started (an engine's loop, a
// dispatcher's attempt) outlives the tests.
func TestMain(m *testing.M) { os.Exit(agoratest.NoLeaks(m.Run())) }
