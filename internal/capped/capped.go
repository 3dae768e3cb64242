// Package capped reads whole files under a size limit, refusing anything that is not a regular
// file. Its NoFollow variant is for files another party could have planted (a worker's out
// directory, the bundle a sandbox sees): it never follows a symlink. Neither blocks on a FIFO.
//
// capped imports only the standard library, so both sides of the sandbox use it.
package capped

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// ErrSymlink means NoFollow met a symlink where a file was expected.
var ErrSymlink = errors.New("is a symlink")

// TooLargeError reports a file over its limit (or one that grew past it while being read).
type TooLargeError struct {
	Name  string
	Size  int64 // bytes seen, at least Limit+1
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is over the %d-byte limit", e.Name, e.Limit)
}

// ReadFile reads the regular file at path (following symlinks, as a person naming a file
// expects), refusing directories, devices and pipes, and more than limit bytes. It opens
// non-blocking, so a FIFO is refused at once rather than waited on (for a writer that may
// never come).
func ReadFile(path string, limit int64) ([]byte, error) {
	return read(path, os.O_RDONLY|syscall.O_NONBLOCK, limit)
}

// NoFollow reads path like [ReadFile] but refuses a final symlink with [ErrSymlink] and opens
// non-blocking, so a FIFO planted in its place is refused rather than waited on.
func NoFollow(path string, limit int64) ([]byte, error) {
	return read(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, limit)
}

func read(path string, flags int, limit int64) ([]byte, error) {
	name := filepath.Base(path)
	f, err := os.OpenFile(path, flags, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s %w", name, ErrSymlink)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	if fi.Size() > limit {
		return nil, &TooLargeError{Name: name, Size: fi.Size(), Limit: limit}
	}
	// Read to EOF rather than trusting the size: the file may have grown since Stat.
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &TooLargeError{Name: name, Size: int64(len(b)), Limit: limit}
	}
	return b, nil
}
