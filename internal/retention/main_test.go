package retention_test

import (
	"os"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest/s3test"
)

func TestMain(m *testing.M) {
	code := m.Run()
	s3test.StopShared() // the versitygw TestS3_ starts, if any
	os.Exit(code)
}
