package replicate_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/agora-dev/agora/internal/agoratest/s3test"
)

func TestMain(m *testing.M) {
	if os.Getenv(rpoChildEnv) != "" {
		rpoChild() // BenchmarkRPOAtKill's writer: it runs until it is killed
		return
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { s3test.StopShared() }))
}
