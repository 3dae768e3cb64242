package worker

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/agora-dev/agora/internal/worker/wire"
)

// errNoClaim means a prestarted worker's slot was discarded (or its holder died) before any
// dispatch claimed it: the worker exits having read nothing.
var errNoClaim = errors.New("the warm slot was discarded before a dispatch claimed it")

// waitForClaim holds a worker started ahead in a warm slot (#28/#30 prewarm: the host named
// its claim pipe in [wire.ClaimFDEnv]) until its dispatch's files are attached: one byte on
// the pipe. Until then the worker has touched nothing under its layout root and no process
// but it exists in the sandbox. It then re-enters its working directory by path (the one it
// started in belongs to the tree the claim covered) and drops the variable, so nothing it
// starts inherits it. A worker started cold has no such variable and returns at once.
func waitForClaim() error {
	v, ok := os.LookupEnv(wire.ClaimFDEnv)
	if !ok {
		return nil
	}
	if err := os.Unsetenv(wire.ClaimFDEnv); err != nil {
		return err
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 || fd > 64 {
		return fmt.Errorf("%s=%q: want a descriptor from 3 to 64", wire.ClaimFDEnv, v)
	}
	f := os.NewFile(uintptr(fd), "claim")
	if f == nil {
		return fmt.Errorf("%s=%q: not a descriptor", wire.ClaimFDEnv, v)
	}
	defer f.Close()
	// bwrap sets PWD to the directory it entered (the host's spec.Dir); the kernel's name for
	// the working directory would do as well before the claim, but not after it.
	wd := os.Getenv("PWD")
	if !filepath.IsAbs(wd) {
		var err error
		if wd, err = os.Getwd(); err != nil {
			return fmt.Errorf("working directory: %w", err)
		}
	}
	var b [1]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return errNoClaim
		}
		return fmt.Errorf("wait for the claim: %w", err)
	}
	if err := os.Chdir(wd); err != nil {
		return fmt.Errorf("re-enter %s after the claim: %w", wd, err)
	}
	return nil
}
