package cli_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/cli"
	"github.com/agora-dev/agora/internal/k8stest"
)

// TestMain lets the test binary act as the agora binary: testscript runs it as a real
// process for every `exec agora` in the scripts.
func TestMain(m *testing.M) {
	testscript.Main(removeWorker{m}, map[string]func(){
		"agora": func() { os.Exit(cli.Main()) },
	})
}

// workerDir holds the worker program scriptWorker builds, removed after the tests.
var workerDir string

// removeWorker runs the tests, then removes workerDir, and fails the package when a
// goroutine a test started outlives the tests (the processes testscript runs end with
// os.Exit, unchecked).
type removeWorker struct{ m *testing.M }

func (r removeWorker) Run() int {
	code := k8stest.Run(r.m) // and stop the shared control plane (the leader tests')
	s3test.StopShared()
	if workerDir != "" {
		os.RemoveAll(workerDir)
	}
	return agoratest.NoLeaks(code)
}

// scriptWorker builds cmd/agora-worker once, for the scripts that dispatch.
var scriptWorker = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "agora-cli-worker")
	if err != nil {
		return "", err
	}
	workerDir = dir
	bin := filepath.Join(dir, "agora-worker")
	build := exec.Command("go", "build", "-o", bin, "github.com/agora-dev/agora/cmd/agora-worker")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build agora-worker: %v\n%s", err, out)
	}
	return bin, nil
})

// TestScripts drives the real command line end to end: every script in testdata/script gets
// its own AGORA_HOME and HOME.
func TestScripts(t *testing.T) {
	examples, err := filepath.Abs("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// setenv-stdout NAME sets NAME to the last command's stdout, trimmed: scripts
			// use it to carry a dispatch id to the next command.
			"setenv-stdout": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: setenv-stdout NAME")
				}
				ts.Setenv(args[0], strings.TrimSpace(ts.ReadFile("stdout")))
			},
		},
		// [container] holds when the developer set up a container engine and its toolchain
		// image and exported its reference (scripts/podman.sh, scripts/images.sh).
		Condition: func(cond string) (bool, error) {
			if cond == "container" {
				return os.Getenv("AGORA_TOOLCHAIN_IMAGE") != "", nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Setup: func(e *testscript.Env) error {
			// EXAMPLES is the repository's examples directory: scripts run the documented
			// examples exactly as a reader would.
			e.Setenv("EXAMPLES", examples)
			e.Setenv("AGORA_HOME", e.WorkDir+"/.agora")
			// The scripts' agora is this test binary; the worker it binds is the real one.
			w, err := scriptWorker()
			if err != nil {
				return err
			}
			e.Setenv("AGORA_WORKER_BINARY", w)
			// The container scripts reach the engine and image the developer set up
			// (scripts/podman.sh, scripts/images.sh); unset, they skip saying so.
			for _, k := range []string{"DOCKER_HOST", "AGORA_TOOLCHAIN_IMAGE"} {
				if v := os.Getenv(k); v != "" {
					e.Setenv(k, v)
				}
			}
			e.Setenv("HOME", e.WorkDir+"/home")
			return os.MkdirAll(e.WorkDir+"/home", 0o700)
		},
	})
}
