package detach

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute/warm"
	"github.com/agora-dev/agora/internal/strictjson"
)

// A serve that holds standbys says how many are ready in a status file of its own,
// AGORA_HOME/dispatches/.warm/holder-PID.json, which it keeps locked (flock) while it runs:
// `agora doctor`, another process, reads it and takes a file whose lock is free for a dead
// holder's (kill -9 leaves the file; the lock goes with the process).

// Holder is one serve's warm slots as its status file says.
type Holder struct {
	PID    int           `json:"pid"`
	Counts []warm.Counts `json:"counts"`
}

// statusEvery is how often a holder rewrites its status file (when its counts changed).
const statusEvery = time.Second

// maxStatus bounds a status file.
const maxStatus = 64 << 10

// Publish writes the standbys' counts to this process's status file until ctx ends, then
// removes it.
func (s *Standbys) Publish(ctx context.Context) error {
	if s == nil {
		return nil
	}
	dir := filepath.Join(s.stateDir, ".warm")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("warm slots status: %w", err)
	}
	path := filepath.Join(dir, "holder-"+strconv.Itoa(os.Getpid())+".json")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("warm slots status: %w", err)
	}
	defer f.Close()
	defer os.Remove(path)
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fmt.Errorf("warm slots status: %w", err)
	}
	tick := time.NewTicker(statusEvery)
	defer tick.Stop()
	var last []byte
	for {
		counts := s.Counts()
		sort.Slice(counts, func(i, j int) bool { return counts[i].Target < counts[j].Target })
		b, err := json.Marshal(Holder{PID: os.Getpid(), Counts: counts})
		if err == nil && !bytes.Equal(b, last) {
			if err := f.Truncate(0); err == nil {
				if _, err := f.WriteAt(b, 0); err == nil {
					last = b
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// ReadHolders returns the warm slots of every living serve of the home whose dispatch
// state directory is stateDir. A status file whose holder is gone is skipped.
func ReadHolders(stateDir string) ([]Holder, error) {
	paths, err := filepath.Glob(filepath.Join(stateDir, ".warm", "holder-*.json"))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(stateDir, ".warm")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read warm slots status: %w", err)
	}
	var out []Holder
	for _, p := range paths {
		h, alive, err := readHolder(p)
		if err != nil {
			return nil, err
		}
		if alive {
			out = append(out, h)
		}
	}
	return out, nil
}

func readHolder(path string) (Holder, bool, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		return Holder{}, false, nil // removed as its holder stopped
	}
	if err != nil {
		return Holder{}, false, fmt.Errorf("read warm slots status: %w", err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err == nil {
		return Holder{}, false, nil // nobody holds it: a dead holder's
	} else if !errors.Is(err, unix.EWOULDBLOCK) {
		return Holder{}, false, fmt.Errorf("read warm slots status: %w", err)
	}
	// The holder rewrites the file in place: a read between its truncate and its write sees
	// it empty or short, so a few tries.
	var h Holder
	for try := 0; ; try++ {
		b, err := io.ReadAll(io.NewSectionReader(f, 0, maxStatus+1))
		if err != nil {
			return Holder{}, false, fmt.Errorf("read warm slots status: %w", err)
		}
		err = strictjson.Decode(filepath.Base(path), b, maxStatus, &h)
		if err == nil {
			return h, true, nil
		}
		if try == 3 {
			return Holder{}, false, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}
