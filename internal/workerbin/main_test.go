package workerbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// workerBin is cmd/agora-worker, built once for the package's tests.
var workerBin string

func TestMain(m *testing.M) {
	if os.Getenv(rt28s3PinChildEnv) != "" {
		rt28s3PinChild() // redteam28s3_race_test.go; exits
	}
	dir, err := os.MkdirTemp("", "workerbin-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workerBin = filepath.Join(dir, Name)
	build := exec.Command("go", "build", "-trimpath", "-o", workerBin, "github.com/agora-dev/agora/cmd/agora-worker")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build agora-worker: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
