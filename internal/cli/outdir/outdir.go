// Package outdir writes files where the user asked (--to DIR, --out FILE) without following
// a link or overwriting a file planted there. It is a leaf (the standard library and
// x/sys/unix) so its fuzz target links little.
package outdir

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Files agora writes where the user asked (--to DIR, --out FILE) hold what agora.db holds:
// patches, outputs and audit bundles that may carry private code or data. The directory they
// land in may be shared or planted (a review directory in /tmp, a checkout an agent wrote), so
// nothing already in it is trusted:
//
//   - no symbolic link is followed below the named directory, not in a parent directory nor
//     as the file itself, so a planted link (to /etc/x, to ~/.bashrc, dangling) makes an
//     error and nothing is written through it. Each step is an openat with O_NOFOLLOW on the
//     directory opened before it, so a link swapped in mid-walk is refused too;
//   - files are created, never opened for writing if they exist (O_CREAT|O_EXCL): an existing
//     file with exactly the bytes to write is left as it is, so a rerun succeeds, and any
//     other existing file is an error;
//   - files are 0600 and new directories 0700 (a umask can only take bits off those): they are
//     copies out of a 0700 AGORA_HOME, and widening that is the user's decision, not agora's.
//
// The named directory itself is the user's choice and is followed like any path they type.

const (
	outFileMode = 0o600
	outDirMode  = 0o700
)

// Error is a file agora refused to write in a user-named place.
type Error struct {
	path   string
	reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("refusing to write %s: %s", e.path, e.reason)
}

func (e *Error) Hint() string {
	return fmt.Sprintf("remove %s, or write into a new directory", e.path)
}

// Dir is a user-named directory agora creates files beneath. Close it when done.
type Dir struct {
	Path string
	f    *os.File
}

// Open opens dir, creating it (and missing parents) 0700 if it does not exist.
func Open(dir string) (*Dir, error) {
	if err := os.MkdirAll(dir, outDirMode); err != nil {
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open output directory: %w", err)
	}
	return &Dir{Path: dir, f: f}, nil
}

func (d *Dir) Close() error { return d.f.Close() }

// WriteFile creates rel (a relative, local path: no "..", not absolute) beneath d holding
// data, creating missing parent directories 0700, and returns the path written. It follows no
// symbolic link and overwrites nothing (see the rules above).
func (d *Dir) WriteFile(rel string, data []byte) (string, error) {
	clean := filepath.Clean(rel)
	if rel == "" || !filepath.IsLocal(clean) || strings.ContainsRune(clean, 0) {
		return "", fmt.Errorf("refusing to write %q: the path leaves the directory", rel)
	}
	parts := strings.Split(clean, string(filepath.Separator))
	dirfd, err := unix.Dup(int(d.f.Fd()))
	if err != nil {
		return "", fmt.Errorf("open output directory: %w", err)
	}
	defer func() { unix.Close(dirfd) }()
	shown := d.Path
	for _, name := range parts[:len(parts)-1] {
		shown = filepath.Join(shown, name)
		fd, err := openSubdir(dirfd, name, shown)
		if err != nil {
			return "", err
		}
		unix.Close(dirfd)
		dirfd = fd
	}
	shown = filepath.Join(shown, parts[len(parts)-1])
	return shown, createAt(dirfd, parts[len(parts)-1], shown, data)
}

// openSubdir opens directory name in dirfd without following a link, creating it 0700 if it
// is missing. shown is its path for messages.
func openSubdir(dirfd int, name, shown string) (int, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dirfd, name, flags, 0)
	if err == unix.ENOENT {
		// Mkdirat creates no link and follows none: a link planted between the two calls
		// makes EEXIST here or ELOOP below, never a write through it. The umask can only
		// take bits off 0700.
		if err := unix.Mkdirat(dirfd, name, outDirMode); err != nil && err != unix.EEXIST {
			return -1, fmt.Errorf("create %s: %w", shown, err)
		}
		fd, err = unix.Openat(dirfd, name, flags, 0)
	}
	if err != nil {
		return -1, notWritable(dirfd, name, shown, err)
	}
	return fd, nil
}

// createAt creates name in dirfd holding data, 0600. An existing file with the same bytes is
// success; anything else there is an [Error].
func createAt(dirfd int, name, shown string, data []byte) error {
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, outFileMode)
	if err == unix.EEXIST {
		if sameFile(dirfd, name, data) {
			return nil
		}
		return notWritable(dirfd, name, shown, err)
	}
	if err != nil {
		return notWritable(dirfd, name, shown, err)
	}
	f := os.NewFile(uintptr(fd), shown)
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		unix.Unlinkat(dirfd, name, 0) // never leave half a file that a rerun would refuse
		return fmt.Errorf("write %s: %w", shown, err)
	}
	return nil
}

// sameFile reports whether name in dirfd is what an earlier run of agora wrote: a regular
// file (not a link) with one link, owned by us, no wider than outFileMode, holding exactly
// data. Anything else may be another user's file planted in a shared directory with the
// bytes agora is about to write, which its owner could rewrite after agora said "wrote".
func sameFile(dirfd int, name string, data []byte) bool {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG ||
		st.Uid != uint32(os.Geteuid()) || st.Nlink != 1 || os.FileMode(st.Mode&0o777)&^outFileMode != 0 ||
		st.Size != int64(len(data)) {
		return false
	}
	got, err := io.ReadAll(io.LimitReader(f, int64(len(data))+1))
	return err == nil && bytes.Equal(got, data)
}

// notWritable words why name in dirfd could not be opened: a link, something else in the
// way, or the system's own error.
func notWritable(dirfd int, name, shown string, err error) error {
	var st unix.Stat_t
	if serr := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); serr == nil {
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			return &Error{path: shown, reason: "it is a symbolic link, and agora never writes through one"}
		case err == unix.EEXIST:
			return &Error{path: shown, reason: "it exists with other content"}
		case err == unix.ENOTDIR:
			return &Error{path: shown, reason: "it is not a directory"}
		}
	}
	return fmt.Errorf("write %s: %w", shown, err)
}

// WriteFile writes the file the user named (--out FILE) through write. Without overwrite
// it is created (O_CREAT|O_EXCL|O_NOFOLLOW, 0600): any existing file, or link, is an
// [Error]. With overwrite the content goes to a new 0600 file beside it, renamed over
// path: a link at path is replaced, never written through.
func WriteFile(path string, overwrite bool, write func(io.Writer) error) error {
	if !overwrite {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, outFileMode)
		if errors.Is(err, os.ErrExist) {
			if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
				return &Error{path: path, reason: "it is a symbolic link, and agora never writes through one"}
			}
			return &Error{path: path, reason: "it exists"}
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", path, err)
		}
		return finish(f, path, write, func() { os.Remove(path) })
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	tmp := f.Name()
	if err := finish(f, path, write, func() { os.Remove(tmp) }); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// finish writes f through write, syncs and closes it, calling undo on failure.
func finish(f *os.File, path string, write func(io.Writer) error, undo func()) error {
	err := write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		undo()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
