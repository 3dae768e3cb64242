// Package fdpass hands a secret that arrived on stdin to a program as file descriptor 3,
// for sandboxes that cannot inherit descriptors (a container: the engine passes none). It
// runs INSIDE the sandbox as agora-worker's `fdpass` command (cmd/agora-worker), the container's
// entrypoint: it reads stdin to its end (at most [MaxSize] bytes), puts the bytes in a
// sealed memfd at fd 3, points stdin at /dev/null and execs the program in its place, so the
// program keeps the container's PID 1 and reads fd 3 exactly as under bubblewrap.
//
// It must never write what it read anywhere but the memfd: not to argv, the environment,
// stdout, stderr or an error.
package fdpass

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// MaxSize caps what fdpass reads from stdin: the worker's own cap on its secrets.
const MaxSize = 1 << 20

// SecretsFD is the descriptor the program finds the bytes on.
const SecretsFD = 3

// ErrTooLarge means stdin held more than [MaxSize] bytes.
var ErrTooLarge = fmt.Errorf("stdin is over the %d byte limit", MaxSize)

// Exec reads stdin, places it at fd 3 and execs argv (argv[0] resolved on the PATH in env).
// It returns only on failure; nothing of the secret is in its errors.
//
// Raw system calls throughout: an *os.File for stdin could register it with the Go
// runtime's poller, and the poller's epoll descriptor must never be the one replaced at 3.
func Exec(argv, env []string) error {
	if len(argv) == 0 || argv[0] == "" {
		return errors.New("fdpass: no program to run")
	}
	if err := claimFD3(); err != nil {
		return err
	}
	path, err := lookPath(argv[0], env)
	if err != nil {
		return err
	}
	b, err := readAll(0, MaxSize)
	if err != nil {
		return err
	}
	mfd, err := sealedMemfd(b)
	clear(b)
	if err != nil {
		return err
	}
	// dup3 without O_CLOEXEC: fd 3 is the one descriptor the program inherits on purpose.
	if err := unix.Dup3(mfd, SecretsFD, 0); err != nil {
		return fmt.Errorf("fdpass: move the secret to fd %d: %w", SecretsFD, err)
	}
	unix.Close(mfd)
	null, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("fdpass: open /dev/null: %w", err)
	}
	if err := unix.Dup3(null, 0, 0); err != nil {
		return fmt.Errorf("fdpass: point stdin at /dev/null: %w", err)
	}
	err = unix.Exec(path, argv, env)
	return fmt.Errorf("fdpass: exec %q: %w", argv[0], err)
}

// claimFD3 makes sure replacing fd 3 harms nothing in this process. Free, it is taken at
// once (F_DUPFD hands out the lowest free descriptor >= 3, atomically), so nothing else
// can be given it. Taken, it may only be the Go runtime's cgroup CPU limit file: since Go
// 1.25 the runtime opens those before main (O_CLOEXEC) and only ever preads them for
// GOMAXPROCS, ignoring what it cannot parse. Anything else there, above all the poller's
// epoll descriptor, is refused: the runtime would fail on it.
func claimFD3() error {
	null, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("fdpass: open /dev/null: %w", err)
	}
	if null == SecretsFD {
		return nil // ours now, until the secret replaces it
	}
	held, err := unix.FcntlInt(uintptr(null), unix.F_DUPFD_CLOEXEC, SecretsFD)
	unix.Close(null)
	if err != nil {
		return fmt.Errorf("fdpass: reserve fd %d: %w", SecretsFD, err)
	}
	if held == SecretsFD {
		return nil
	}
	unix.Close(held)
	what, err := os.Readlink("/proc/self/fd/3")
	if err != nil {
		return fmt.Errorf("fdpass: fd %d is in use: %w", SecretsFD, err)
	}
	if !strings.HasPrefix(what, "/sys/fs/cgroup/") {
		return fmt.Errorf("fdpass: fd %d is in use by %q; refusing to replace it", SecretsFD, what)
	}
	return nil
}

// lookPath resolves name as execve's caller must: a name with a slash as is, else along
// env's PATH (the sandbox's, never the host's).
func lookPath(name string, env []string) (string, error) {
	pathEnv := ""
	for _, e := range env {
		if len(e) > 5 && e[:5] == "PATH=" {
			pathEnv = e[5:]
		}
	}
	old, had := os.LookupEnv("PATH")
	os.Setenv("PATH", pathEnv)
	p, err := exec.LookPath(name)
	if had {
		os.Setenv("PATH", old)
	}
	if err != nil {
		return "", fmt.Errorf("fdpass: find %q: %w", name, err)
	}
	return p, nil
}

// readAll reads fd to EOF, refusing more than max bytes.
func readAll(fd, max int) ([]byte, error) {
	// A descriptor the engine left non-blocking would answer EAGAIN: block instead.
	if err := unix.SetNonblock(fd, false); err != nil {
		return nil, fmt.Errorf("fdpass: stdin: %w", err)
	}
	b := make([]byte, 0, 4096)
	for {
		if len(b) == cap(b) {
			if len(b) > max {
				clear(b)
				return nil, ErrTooLarge
			}
			b = append(b, 0)[:len(b)]
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			clear(b)
			return nil, fmt.Errorf("fdpass: read stdin: %w", err)
		}
		if n == 0 {
			break
		}
		b = b[:len(b)+n]
		if len(b) > max {
			clear(b)
			return nil, ErrTooLarge
		}
	}
	return b, nil
}

// sealedMemfd returns a memfd holding b, sealed against any change, positioned at 0.
func sealedMemfd(b []byte) (int, error) {
	fd, err := unix.MemfdCreate("agora-secrets", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, fmt.Errorf("fdpass: memfd_create: %w", err)
	}
	for off := 0; off < len(b); {
		n, err := unix.Write(fd, b[off:])
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("fdpass: write memfd: %w", err)
		}
		off += n
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("fdpass: seal memfd: %w", err)
	}
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("fdpass: rewind memfd: %w", err)
	}
	return fd, nil
}
