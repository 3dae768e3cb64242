package replicate_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/agora-dev/agora/internal/agoratest/s3test"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { s3test.StopShared() }))
}
