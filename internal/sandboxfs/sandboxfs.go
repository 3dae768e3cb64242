// Package sandboxfs is the one way the host reads a file a sandbox could have written (a
// dispatch's out directory: result.json, patch.diff, outputs, the transcript). The sandbox
// shares those directories with the agent, and an agent can race the reader: replace a
// directory on the path with a symlink to the host's keys, plant a FIFO, grow a file, or swap
// a file for another after its hash was declared. So every read here:
//
//   - resolves the relative path beneath the directory with no symlink anywhere on it, no
//     magic link and no mount crossing (openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|
//     RESOLVE_NO_MAGICLINKS|RESOLVE_NO_XDEV; on kernels without openat2, a walk that opens
//     each component with O_NOFOLLOW relative to the previous one);
//   - opens non-blocking and accepts only a regular file with one link (a hard link could
//     name a file outside the sandbox's view when there is no mount namespace);
//   - reads at most limit bytes, to EOF rather than trusting the size;
//   - with [Dir.ReadVerified], returns the bytes only when their SHA-256 is the one the worker
//     declared, so the host stores exactly what the worker vouched for.
//
// A Dir is opened once with [Open]; the directory itself is named by the host.
// internal/sandboxreads_test.go forbids the host-side packages from reading such paths any
// other way.
//
// sandboxfs imports only the standard library and x/sys, so both sides of the sandbox use it.
package sandboxfs

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Errors a read can wrap; test with errors.Is.
var (
	// ErrSymlink: a component of the path is a symlink (or magic link).
	ErrSymlink = errors.New("a symlink is on the path")
	// ErrEscape: the path leaves the directory (.., absolute, or a mount crossing).
	ErrEscape = errors.New("the path leaves the directory")
	// ErrNotRegular: the file is a directory, FIFO, socket or device.
	ErrNotRegular = errors.New("not a regular file")
	// ErrHardLink: the file has more than one link.
	ErrHardLink = errors.New("a hard link")
	// ErrTooLarge: the file is over the caller's limit (or grew past it while read).
	ErrTooLarge = errors.New("over the size limit")
	// ErrIntegrity: the bytes read do not hash to the declared SHA-256.
	ErrIntegrity = errors.New("its SHA-256 is not the one declared")
)

// Dir is a directory a sandbox could have written, opened by the host.
type Dir struct {
	f    *os.File // O_PATH descriptor of the directory
	name string   // for messages
}

// Open opens the directory at path, which the host names (it is not resolved with the rules
// above: the host created it). Its last component must not be a symlink.
func Open(path string) (*Dir, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return &Dir{f: os.NewFile(uintptr(fd), path), name: path}, nil
}

// Close releases the directory.
func (d *Dir) Close() error { return d.f.Close() }

// ReadFile reads the regular file rel (slash-separated, relative to d) under the rules of the
// package, at most limit bytes.
func (d *Dir) ReadFile(rel string, limit int64) ([]byte, error) {
	b, _, err := d.read(rel, limit, false)
	return b, err
}

// ReadVerified reads rel like [Dir.ReadFile] and returns its bytes only when their SHA-256
// is wantHex (64 lowercase hex digits), else an error wrapping [ErrIntegrity].
func (d *Dir) ReadVerified(rel string, limit int64, wantHex string) ([]byte, error) {
	want, err := hex.DecodeString(wantHex)
	if err != nil || len(want) != sha256.Size {
		return nil, fmt.Errorf("read %s: the declared SHA-256 is malformed: %w", quote(rel), ErrIntegrity)
	}
	b, sum, err := d.read(rel, limit, true)
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare(sum, want) != 1 {
		return nil, fmt.Errorf("read %s: %w", quote(rel), ErrIntegrity)
	}
	return b, nil
}

func (d *Dir) read(rel string, limit int64, hash bool) ([]byte, []byte, error) {
	f, err := d.open(rel)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", quote(rel), err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", quote(rel), err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, nil, fmt.Errorf("read %s: %w", quote(rel), ErrNotRegular)
	case st.Nlink != 1:
		return nil, nil, fmt.Errorf("read %s: %w", quote(rel), ErrHardLink)
	case st.Size > limit:
		return nil, nil, fmt.Errorf("read %s: %d bytes, %w of %d", quote(rel), st.Size, ErrTooLarge, limit)
	}
	// Read to EOF rather than trusting the size: the file may have grown since Fstat.
	buf := make([]byte, 0, st.Size+1)
	b, err := readAll(f, buf, limit+1)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", quote(rel), err)
	}
	if int64(len(b)) > limit {
		return nil, nil, fmt.Errorf("read %s: %w of %d", quote(rel), ErrTooLarge, limit)
	}
	if !hash {
		return b, nil, nil
	}
	sum := sha256.Sum256(b)
	return b, sum[:], nil
}

// readAll reads f to EOF into buf, at most max bytes.
func readAll(f *os.File, buf []byte, max int64) ([]byte, error) {
	r := io.LimitReader(f, max)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// resolveFlags are the openat2 rules: beneath d, no symlink, no magic link, no mount crossing.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// openFlags: read-only, never the last component a symlink, never block on a FIFO.
const openFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY

// noOpenat2 is set once openat2 answered ENOSYS (kernels before 5.6, some seccomp
// profiles); the component walk then does the same job with more system calls.
var noOpenat2 atomic.Bool

func (d *Dir) open(rel string) (*os.File, error) {
	parts, err := split(rel)
	if err != nil {
		return nil, err
	}
	if !noOpenat2.Load() {
		fd, err := unix.Openat2(int(d.f.Fd()), strings.Join(parts, "/"), &unix.OpenHow{Flags: openFlags, Resolve: resolveFlags})
		if err == nil {
			return os.NewFile(uintptr(fd), rel), nil
		}
		if !errors.Is(err, unix.ENOSYS) {
			return nil, classify(err)
		}
		noOpenat2.Store(true)
	}
	return d.walk(parts)
}

// walk opens parts one component at a time, each relative to the last and never following a
// symlink, refusing a mount crossing by comparing device numbers.
func (d *Dir) walk(parts []string) (*os.File, error) {
	var root unix.Stat_t
	if err := unix.Fstat(int(d.f.Fd()), &root); err != nil {
		return nil, err
	}
	dirfd := int(d.f.Fd())
	owned := -1
	defer func() {
		if owned >= 0 {
			unix.Close(owned)
		}
	}()
	for i, p := range parts {
		last := i == len(parts)-1
		flags := unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if last {
			flags = openFlags
		}
		fd, err := unix.Openat(dirfd, p, flags, 0)
		if err != nil {
			if !last && errors.Is(err, unix.ENOTDIR) {
				// O_PATH|O_NOFOLLOW|O_DIRECTORY on a symlink fails ENOTDIR: say which.
				var st unix.Stat_t
				if unix.Fstatat(dirfd, p, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
					return nil, ErrSymlink
				}
			}
			return nil, classify(err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, err
		}
		if st.Dev != root.Dev {
			unix.Close(fd)
			return nil, ErrEscape
		}
		if owned >= 0 {
			unix.Close(owned)
		}
		if last {
			owned = -1
			return os.NewFile(uintptr(fd), strings.Join(parts, "/")), nil
		}
		owned, dirfd = fd, fd
	}
	return nil, ErrEscape // unreachable: split returns at least one part
}

// split checks rel and returns its components: relative, slash-separated, no empty, "." or
// ".." component, no NUL.
func split(rel string) ([]string, error) {
	if rel == "" || strings.HasPrefix(rel, "/") || strings.IndexByte(rel, 0) >= 0 {
		return nil, ErrEscape
	}
	parts := strings.Split(rel, "/")
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return nil, ErrEscape
		}
	}
	return parts, nil
}

// classify maps the kernel's refusals to the package's errors.
func classify(err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return ErrSymlink
	case errors.Is(err, unix.EXDEV):
		return ErrEscape
	case errors.Is(err, unix.ENXIO), errors.Is(err, unix.EISDIR):
		return ErrNotRegular
	}
	return err
}

// quote keeps a sandbox-chosen name printable in a message.
func quote(s string) string {
	const max = 256
	s = s[:min(len(s), max)]
	return fmt.Sprintf("%q", s)
}

// Tail reads at most the last n bytes of the regular file rel under the rules of the package
// (a live log that a reader polls: reading it whole each time would cost its size), with the
// file's modification time.
func (d *Dir) Tail(rel string, n int64) ([]byte, time.Time, error) {
	f, err := d.open(rel)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read %s: %w", quote(rel), err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, time.Time{}, fmt.Errorf("read %s: %w", quote(rel), err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, time.Time{}, fmt.Errorf("read %s: %w", quote(rel), ErrNotRegular)
	case st.Nlink != 1:
		return nil, time.Time{}, fmt.Errorf("read %s: %w", quote(rel), ErrHardLink)
	}
	b, err := io.ReadAll(io.NewSectionReader(f, max(st.Size-n, 0), n))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read %s: %w", quote(rel), err)
	}
	return b, time.Unix(st.Mtim.Unix()), nil
}
