// Package agoratest holds helpers for tests that drive the real agora binary. It is imported by
// tests only.
package agoratest

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildBinary builds cmd/agora (the front), cmd/agora-full (the whole program the front execs),
// the worker program cmd/agora-worker and its exec-only build agora-worker-exec (static, as
// shipped) side by side into a new
// temporary directory, as `make install` installs them, and returns agora's path and a func
// that removes the directory. TestMain functions call it once. Built from a checkout, they
// carry the commit (go build's -buildvcs=auto). When [BuiltEnv] names a directory (make unit
// sets it to the bin/ it has just built, with the same flags), the three are copied from it
// instead: a dozen packages each linking the same 80 MB of programs costs a minute of CPU.
func BuildBinary() (bin string, cleanup func(), err error) {
	if built := os.Getenv(BuiltEnv); built != "" {
		return copyBuilt(built)
	}
	return BuildBinaryFlags()
}

// BuiltEnv names a directory holding agora, agora-full, agora-worker and agora-worker-exec as `make build` makes
// them (-trimpath, CGO_ENABLED=0) from the checkout under test. Only make sets it, right after
// building them, so they are never older than the code the tests run.
const BuiltEnv = "AGORA_TEST_BUILT"

// programs are what BuildBinary makes, by file name.
var programs = []string{"agora", "agora-full", "agora-worker", "agora-worker-exec"}

// copyBuilt copies the programs from dir into a new temporary directory of the test's own, as
// a build would have put them there: a test may replace or remove one beside agora without
// touching another package's.
func copyBuilt(dir string) (bin string, cleanup func(), err error) {
	out, err := os.MkdirTemp("", "agora-bin")
	if err != nil {
		return "", nil, err
	}
	for _, name := range programs {
		if err := copyProgram(filepath.Join(dir, name), filepath.Join(out, name)); err != nil {
			os.RemoveAll(out)
			return "", nil, fmt.Errorf("%s=%s: %w (unset it to build the programs instead)", BuiltEnv, dir, err)
		}
	}
	return filepath.Join(out, "agora"), func() { os.RemoveAll(out) }, nil
}

func copyProgram(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Close()
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
	// The exec-only worker is the same program with one tag more: a build of its own.
	execArgs := append(append([]string{"build", "-trimpath"}, withTag(flags, "agora_worker_exec")...), "-o", filepath.Join(dir, "agora-worker-exec"),
		"github.com/agora-dev/agora/cmd/agora-worker")
	for _, a := range [][]string{args, execArgs} {
		build := exec.Command("go", a...)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return "", nil, fmt.Errorf("build agora and agora-worker: %v\n%s", err, out)
		}
	}
	return filepath.Join(dir, "agora"), func() { os.RemoveAll(dir) }, nil
}

// withTag is flags with tag added to their -tags (go build takes the last -tags only).
func withTag(flags []string, tag string) []string {
	out := []string{"-tags=" + tag}
	for _, f := range flags {
		if t, ok := strings.CutPrefix(f, "-tags="); ok {
			out[0] += "," + t
			continue
		}
		out = append(out, f)
	}
	return out
}

// Worker is the worker program BuildBinary built beside the agora binary bin.
func Worker(bin string) string { return filepath.Join(filepath.Dir(bin), "agora-worker") }

// ExecWorker is the exec-only worker BuildBinary built beside the agora binary bin.
func ExecWorker(bin string) string { return filepath.Join(filepath.Dir(bin), "agora-worker-exec") }

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
// while the test's TempDir is removed ("directory not empty"). The resident's
// own tests drop it from their commands' environment.
func noResident() { os.Setenv("AGORA_NO_RESIDENT", "1") }
