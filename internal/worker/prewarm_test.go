package worker

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

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
