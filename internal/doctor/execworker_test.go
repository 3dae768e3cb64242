package doctor

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/workerbin"
)

// The system's check of the exec-only worker looks as the dispatcher does: nothing at the name
// is "not installed" (every dispatch binds the worker), a link to nothing is not, since the
// dispatcher would fail every exec dispatch on it.
func TestSystem_ExecWorkerBinaryLooksAsTheDispatcherDoes(t *testing.T) {
	dir := t.TempDir()
	worker := filepath.Join(dir, workerbin.Name)
	if err := os.WriteFile(worker, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	check := System().ExecWorkerBinary
	if _, err := check(workerbin.Binary{Source: worker}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no exec-only worker: %v, want not installed (fs.ErrNotExist)", err)
	}
	if err := os.Symlink(filepath.Join(dir, "gone"), workerbin.ExecBeside(worker)); err != nil {
		t.Fatal(err)
	}
	_, err := check(workerbin.Binary{Source: worker})
	if err == nil || errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "link to nothing") {
		t.Errorf("a link to nothing at the name: %v, want a failure that is not \"not installed\"", err)
	}
}
