package service

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// A run's status is read in one read transaction of orch.db, a task at a time, and its bytes
// are written to a spool, not to the client: the transaction holds one of orch.db's few
// connections, the same pool the engine commits through, and a client that reads slowly (or
// not at all) must never hold it. Once read, the spool is copied to the client with no
// transaction open. The spool keeps its first spoolMemory bytes in memory and the rest in a
// file without a name, so a status of 100,000 tasks (tens of MB) costs serve a buffer, not
// its size, and nothing is left behind if serve dies.

// spoolMemory is how much of a status a spool keeps in memory: a run of a few thousand tasks.
const spoolMemory = 1 << 20

// spool holds what is written to it: in memory up to spoolMemory bytes, past that in an
// unnamed file in dir.
type spool struct {
	dir string
	mem bytes.Buffer
	f   *os.File
}

func (s *spool) Write(p []byte) (int, error) {
	if s.f == nil && s.mem.Len()+len(p) <= spoolMemory {
		return s.mem.Write(p)
	}
	if s.f == nil {
		f, err := unnamedFile(s.dir)
		if err != nil {
			return 0, err
		}
		s.f = f
		if _, err := s.mem.WriteTo(f); err != nil {
			return 0, fmt.Errorf("spool a run's status: %w", err)
		}
	}
	n, err := s.f.Write(p)
	if err != nil {
		err = fmt.Errorf("spool a run's status: %w", err)
	}
	return n, err
}

// WriteTo writes everything written to the spool to w.
func (s *spool) WriteTo(w io.Writer) (int64, error) {
	if s.f == nil {
		return s.mem.WriteTo(w)
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return 0, fmt.Errorf("spool a run's status: %w", err)
	}
	return io.Copy(w, s.f)
}

// Close drops what the spool holds.
func (s *spool) Close() error {
	s.mem = bytes.Buffer{}
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// unnamedFile opens a file in dir ("" for the temporary directory) that has no name: the
// kernel frees it when it is closed, whatever happens to serve. A file system without
// O_TMPFILE gets a named file, removed at once.
func unnamedFile(dir string) (*os.File, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err == nil {
		return os.NewFile(uintptr(fd), dir+"/(status spool)"), nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EINVAL) {
		return nil, fmt.Errorf("spool a run's status in %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".status-*")
	if err != nil {
		return nil, fmt.Errorf("spool a run's status in %s: %w", dir, err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("spool a run's status in %s: %w", dir, err)
	}
	return f, nil
}
