// Package agoratest holds helpers for tests that drive the real agora binary. It is imported by
// tests only.
package agoratest

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildBinary builds cmd/agora (the front), cmd/agora-full (the whole program the front execs)
// and the worker program cmd/agora-worker (static, as shipped) side by side into a new temporary directory, as `make install` installs them, and returns
// agora's path and a func that removes the directory. TestMain functions call it once. Built
// from a checkout, they carry the commit (go build's -buildvcs=auto).
func BuildBinary() (bin string, cleanup func(), err error) {
	return BuildBinaryFlags()
}

// BuildBinaryFlags is BuildBinary with extra go build flags (-buildvcs=false), given to both.
func BuildBinaryFlags(flags ...string) (bin string, cleanup func(), err error) {
	noResident()
	dir, err := os.MkdirTemp("", "agora-bin")
	if err != nil {
		return "", nil, err
	}
	// One go build: both programs in one invocation share its work and its VCS stamp.
	// -trimpath as make build and scripts/images.sh build them: the same flags share Go's
	// build cache, so this only links.
	args := append(append([]string{"build", "-trimpath"}, flags...), "-o", dir+"/",
		"github.com/agora-dev/agora/cmd/agora", "github.com/agora-dev/agora/cmd/agora-full", "github.com/agora-dev/agora/cmd/agora-worker")
	build := exec.Command("go", args...)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build agora and agora-worker: %v\n%s", err, out)
	}
	return filepath.Join(dir, "agora"), func() { os.RemoveAll(dir) }, nil
}

// Worker is the worker program BuildBinary built beside the agora binary bin.
func Worker(bin string) string { return filepath.Join(filepath.Dir(bin), "agora-worker") }

// ParentBinaryEnv names the agora binary a test that runs its own test binary again as a child
// (under strace, say) already built: the child's RunWithBinary uses it rather than building the
// same binary again (tens of seconds under strace -f).
const ParentBinaryEnv = "AGORA_TEST_PARENT_BINARY"

// RunWithBinary builds the binary into *bin, runs the package's tests and removes the binary;
// it returns the exit code for os.Exit. A build failure fails the whole package. A run that can
// start no test (see RunsNoTest) builds nothing and leaves *bin naming a path that is not there,
// so a fuzz target that did reach for the binary would fail, saying which.
func RunWithBinary(m interface{ Run() int }, bin *string) int {
	LandlockExec()
	noResident()
	if RunsNoTest() {
		*bin = "/nonexistent/agora-not-built-for-a-run-of-no-test"
		return m.Run()
	}
	if b := os.Getenv(ParentBinaryEnv); b != "" {
		*bin = b // the parent test's build, which it removes
		return m.Run()
	}
	b, cleanup, err := BuildBinary()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	*bin = b
	return m.Run()
}

// RunsNoTest tells whether this test binary was started to list its tests (-test.list) or to
// fuzz with no test selected (-test.run '^$' -test.fuzz X, how scripts/fuzz-short.sh runs every
// target and how Go starts each fuzz worker): no test or benchmark then runs, only fuzz targets,
// which never need the agora binary, and building it (seconds of go build and link) for each
// target and each of its workers was most of fuzz-short's start-up in a package with a TestMain.
func RunsNoTest() bool {
	if !flag.Parsed() {
		flag.Parse() // testing's flags are registered before TestMain; m.Run parses only once
	}
	value := func(name string) string {
		if f := flag.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	if value("test.list") != "" {
		return true
	}
	return value("test.fuzz") != "" && value("test.run") == "^$" && value("test.bench") == ""
}

// noResident sets AGORA_NO_RESIDENT for this test process and every agora it starts: a
// resident dispatcher an `agora dispatch run` starts after its dispatch would open the home
// while the test's TempDir is removed ("directory not empty", CI session 45). The resident's
// own tests drop it from their commands' environment.
func noResident() { os.Setenv("AGORA_NO_RESIDENT", "1") }
