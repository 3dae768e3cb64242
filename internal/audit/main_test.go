package audit_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/agora-dev/agora/internal/agoratest/s3test"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path) // never returns: the parent kills it
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { s3test.StopShared() }))
}
