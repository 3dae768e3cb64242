package worker

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// TestWaitForClaim: a worker started ahead waits for one byte on its claim pipe; EOF (the
// slot discarded, its holder dead) is no claim and the worker goes no further; after the
// byte it is back in its working directory by path, no longer holds the pipe, and nothing it
// starts inherits the variable. A cold worker (no variable) does not wait.
func TestWaitForClaim(t *testing.T) {
	t.Run("cold", func(t *testing.T) {
		os.Unsetenv(wire.ClaimFDEnv)
		if err := waitForClaim(); err != nil {
			t.Fatal(err)
		}
	})
	for name, tc := range map[string]struct {
		write []byte
		want  error
	}{
		"claimed":   {write: []byte{0}, want: nil},
		"discarded": {write: nil, want: errNoClaim},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			// waitForClaim closes the descriptor it is given: a copy of its own, so no *os.File
			// here closes the number again later (another test's by then).
			fd, err := unix.Dup(int(r.Fd()))
			if err != nil {
				t.Fatal(err)
			}
			r.Close()
			t.Setenv(wire.ClaimFDEnv, strconv.Itoa(fd))
			// The claim's tree replaces the directory the worker started in.
			moved := dir + ".covered"
			if err := os.Rename(dir, moved); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(moved) })
			w.Write(tc.write)
			w.Close()
			// Getwd would name the covered directory; the worker takes the path PWD names.
			t.Setenv("PWD", dir)
			err = waitForClaim()
			if !errors.Is(err, tc.want) {
				t.Fatalf("waitForClaim: %v, want %v", err, tc.want)
			}
			if _, ok := os.LookupEnv(wire.ClaimFDEnv); ok {
				t.Fatalf("%s is still in the environment", wire.ClaimFDEnv)
			}
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
				t.Fatal("the claim pipe is still open")
			}
			if tc.want == nil {
				os.WriteFile("probe", nil, 0o644)
				if _, err := os.Stat(filepath.Join(dir, "probe")); err != nil {
					t.Fatalf("the worker is not in the new %s: %v", dir, err)
				}
			}
		})
	}
	t.Run("not a descriptor", func(t *testing.T) {
		for _, v := range []string{"", "x", "2", "-1", "99999"} {
			t.Setenv(wire.ClaimFDEnv, v)
			if err := waitForClaim(); err == nil {
				t.Errorf("%s=%q: no error", wire.ClaimFDEnv, v)
			}
		}
	})
}

// TestWarmUp_SampleIsValid: what the warm-up parses is accepted all the way through, so it
// warms every check a claim's manifest goes through, not only the decoder up to a refusal.
func TestWarmUp_SampleIsValid(t *testing.T) {
	b, err := warmUpManifest().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wire.ParseManifest(b); err != nil {
		t.Fatal(err)
	}
	doc, err := catalog.ParseSubagentDoc([]byte(warmUpDoc))
	if err != nil {
		t.Fatal(err)
	}
	if m := warmUpManifest(); doc.Runtime != m.Runtime || !slices.Equal(doc.Command, m.Command) {
		t.Fatalf("the warm-up's document (%s %q) is not the kind its manifest names", doc.Runtime, doc.Command)
	}
}

// warmUpChildEnv makes TestWarmUp_Child run: the strace test's child.
const warmUpChildEnv = "AGORA_TEST_WARMUP_CHILD"

// TestWarmUp_TouchesNothing (the attack: a warm-up that read or wrote a file, or started a
// program, before the claim would act in a sandbox whose /agora is not the dispatch's yet,
// or leave something the claimed run finds): the warm-up, traced with strace -f, makes no
// file, network or exec system call at all. Its only child is os/exec's pidfd probe.
func TestWarmUp_TouchesNothing(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("SKIP: strace not in PATH")
	}
	log := filepath.Join(t.TempDir(), "strace.log")
	// signal=none: a signal delivered to the child (Go's preemption SIGURG, above all under
	// -race) is not a call the warm-up made; strace would print it as a line of its own.
	cmd := exec.Command(strace, "-f", "-qq", "-o", log, "-e", "signal=none", "-e", "trace=%file,%network,%process,write",
		os.Args[0], "-test.run", "^TestWarmUp_Child$", "-test.count", "1")
	cmd.Env = append(os.Environ(), warmUpChildEnv+"=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		if strings.Contains(string(out), "PTRACE") || strings.Contains(string(out), "ptrace") {
			t.Skipf("SKIP: strace cannot trace here: %s", out)
		}
		t.Fatalf("%v: %s", err, out)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var in bool
	var seen, children int
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.Contains(line, "warm-up begins"):
			in = true
			continue
		case strings.Contains(line, "warm-up ends"):
			in = false
			continue
		case !in || line == "" || strings.Contains(line, "resumed>") || strings.Contains(line, "+++ exited"):
			continue
		}
		seen++
		name, _, _ := strings.Cut(strings.TrimLeft(line, "0123456789 "), "(")
		switch name {
		case "clone", "clone3":
			if !strings.Contains(line, "CLONE_THREAD") {
				children++
			}
		case "exit", "exit_group", "wait4", "waitid":
		case "tgkill":
			// The Go runtime preempts its own threads with SIGURG (often under -race): a
			// signal within the process, not something the warm-up does. strace ends the line
			// "<unfinished ...>" when another thread's call interleaves.
			if !strings.Contains(line, ", SIGURG)") && !strings.Contains(line, ", SIGURG <unfinished") {
				t.Errorf("the warm-up made %s", line)
			}
		case "pidfd_send_signal":
			if !strings.Contains(line, ", 0, NULL, 0)") { // the probe's signal 0 to itself
				t.Errorf("the warm-up made %s", line)
			}
		default:
			t.Errorf("the warm-up made %s", line)
		}
	}
	if !strings.Contains(string(b), "warm-up ends") {
		t.Fatalf("the child never ended its warm-up:\n%s", b)
	}
	if children != 1 {
		t.Errorf("the warm-up started %d children, want 1 (os/exec's pidfd probe)", children)
	}
	t.Logf("%d system calls traced in the warm-up", seen)
}

func TestWarmUp_Child(t *testing.T) {
	if os.Getenv(warmUpChildEnv) == "" {
		t.Skip("SKIP: the child of TestWarmUp_TouchesNothing")
	}
	os.Stderr.WriteString("warm-up begins\n")
	warmUp()
	os.Stderr.WriteString("warm-up ends\n")
}
