package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/k8stest"
)

// TestMain runs the tests, then removes the programs builtAgora made (or copied), and fails
// the package when a goroutine a test started outlives the tests.
func TestMain(m *testing.M) {
	code := k8stest.Run(m) // and stop the shared control plane (the leader tests')
	s3test.StopShared()
	if realBinCleanup != nil {
		realBinCleanup()
	}
	os.Exit(agoratest.NoLeaks(code))
}

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
			// The scripts' agora is the real one (the front, agora-full and agora-worker
			// beside it, as installed), first on PATH: not this race-instrumented test
			// binary under that name, which cost some 50 ms of CPU a command, about half
			// of this package's CPU. The CLI's code still runs under the race detector in
			// this package's in-process tests.
			bin, err := builtAgoraErr()
			if err != nil {
				return err
			}
			e.Setenv("PATH", filepath.Dir(bin)+string(filepath.ListSeparator)+e.Getenv("PATH"))
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
