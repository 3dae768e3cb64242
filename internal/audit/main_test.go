package audit_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path) // never returns: the parent kills it
	}
	goleak.VerifyTestMain(m)
}
