package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/agora-dev/agora/internal/cli"
)

// TestMain lets the test binary act as the agora binary: testscript runs it as a real
// process for every `exec agora` in the scripts.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"agora": func() { os.Exit(cli.Main()) },
	})
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
		Setup: func(e *testscript.Env) error {
			// EXAMPLES is the repository's examples directory: scripts run the documented
			// examples exactly as a reader would.
			e.Setenv("EXAMPLES", examples)
			e.Setenv("AGORA_HOME", e.WorkDir+"/.agora")
			e.Setenv("HOME", e.WorkDir+"/home")
			return os.MkdirAll(e.WorkDir+"/home", 0o700)
		},
	})
}
