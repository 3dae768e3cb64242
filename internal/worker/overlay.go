package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/runtime/execrt"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// overlay writes every capability's files into the workspace, in the subagent's order, so a
// later capability's file replaces an earlier one's (and the checkout's). capability.yaml at
// an archive's root is a declaration, not content, and is not copied.
//
// The checkout may hold symlinks (a hostile repository can plant workspace/evil -> /etc).
// Every write goes through an [os.Root] on the workspace, which refuses any path that leaves
// it, and every directory on the way is checked with Lstat first: a symlink there is refused
// even when it points inside, so a file lands exactly at its own path or not at all. The last
// component is unlinked before it is created with O_EXCL, so an existing symlink there is
// replaced, never written through.
func (r *runner) overlay(ctx context.Context) *failure {
	root, err := os.OpenRoot(r.workspace)
	if err != nil {
		return fail(wire.ReasonWorkerFailed, "overlay: open workspace: %v", err)
	}
	defer root.Close()
	for _, c := range r.caps {
		for _, f := range c.files {
			if f.Path == catalog.CapabilityFile {
				continue
			}
			if err := placeFile(root, f); err != nil {
				return fail(wire.ReasonIntegrityFailed, "overlay capability %q: %v", c.name, err)
			}
		}
	}
	return nil
}

// placeFile writes one archive entry at its path under root.
func placeFile(root *os.Root, f catalog.File) error {
	// catalog.ReadArchive checked the path already; the overlay does not depend on it.
	if f.Path == "" || path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == ".." || strings.HasPrefix(f.Path, "../") {
		return fmt.Errorf("invalid path %q", f.Path)
	}
	parts := strings.Split(f.Path, "/")
	for i := 1; i < len(parts); i++ {
		dir := path.Join(parts[:i]...)
		fi, err := root.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := root.Mkdir(dir, 0o755); err != nil {
				return fmt.Errorf("create directory %s: %w", dir, err)
			}
		case err != nil:
			return fmt.Errorf("%s: %w", dir, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%s: refusing to write %s through a symlink in the workspace", dir, f.Path)
		case !fi.IsDir():
			return fmt.Errorf("%s: is a file in the workspace, the capability needs a directory there for %s", dir, f.Path)
		}
	}
	fi, err := root.Lstat(f.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("%s: %w", f.Path, err)
	case fi.IsDir():
		return fmt.Errorf("%s: is a directory in the workspace, the capability has a file there", f.Path)
	default:
		if err := root.Remove(f.Path); err != nil {
			return fmt.Errorf("replace %s: %w", f.Path, err)
		}
	}
	if f.LinkTarget != "" {
		if err := root.Symlink(f.LinkTarget, f.Path); err != nil {
			return fmt.Errorf("create symlink %s: %w", f.Path, err)
		}
		return nil
	}
	w, err := root.OpenFile(f.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fs.FileMode(f.Mode))
	if err != nil {
		return fmt.Errorf("create %s: %w", f.Path, err)
	}
	_, werr := w.Write(f.Data)
	cerr := w.Chmod(fs.FileMode(f.Mode)) // the umask does not decide
	if err := errors.Join(werr, cerr, w.Close()); err != nil {
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	return nil
}

// setup runs each capability's setup script, in order, with the agent's environment and the
// workspace as working directory, all of them within Manifest.SetupTimeoutSeconds. Output
// goes to the worker's stderr. The script run is the workspace file at the declared path,
// which must still hold exactly the capability's bytes: a later capability (or an earlier
// setup script) that replaced it makes the run fail rather than run someone else's script.
func (r *runner) setup(ctx context.Context) *failure {
	r.env = agentEnv(r.man, r.secrets, r.opts.Root, r.opts.TempDir)
	deadline := time.Now().Add(time.Duration(r.man.SetupTimeoutSeconds) * time.Second)
	for _, c := range r.caps {
		if c.grants.Setup == "" {
			continue
		}
		want, _ := findFile(c.files, c.grants.Setup)
		script := filepath.Join(r.workspace, filepath.FromSlash(c.grants.Setup))
		if err := sameFile(r.workspace, c.grants.Setup, want.Data); err != nil {
			return fail(wire.ReasonIntegrityFailed, "setup capability %q: %v", c.name, err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fail(wire.ReasonWorkerFailed, "setup capability %q: no time left of the %ds setup budget", c.name, r.man.SetupTimeoutSeconds)
		}
		res, err := execrt.Run(ctx, execrt.Spec{
			Argv:    []string{"/bin/sh", script},
			Dir:     r.workspace,
			Env:     r.env,
			Stdout:  r.opts.Stderr,
			Stderr:  r.opts.Stderr,
			Timeout: left,
		})
		switch {
		case err != nil:
			return fail(wire.ReasonWorkerFailed, "setup capability %q: %v", c.name, err)
		case res.TimedOut:
			return fail(wire.ReasonWorkerFailed, "setup capability %q: script %s timed out (setup budget %ds)", c.name, c.grants.Setup, r.man.SetupTimeoutSeconds)
		case res.Cancelled:
			return fail(wire.ReasonWorkerFailed, "setup capability %q: cancelled", c.name)
		case res.ExitCode != 0:
			return fail(wire.ReasonWorkerFailed, "setup capability %q: script %s exited with code %d", c.name, c.grants.Setup, res.ExitCode)
		}
	}
	return nil
}

// sameFile checks that rel under dir is a regular file (not a symlink) holding want.
func sameFile(dir, rel string, want []byte) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	fi, err := root.Lstat(rel)
	if err != nil {
		return fmt.Errorf("setup script %s: %w", rel, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("setup script %s is no longer a regular file", rel)
	}
	got, err := root.ReadFile(rel)
	if err != nil {
		return fmt.Errorf("setup script %s: %w", rel, err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("setup script %s was replaced after the overlay (by a later capability or setup script)", rel)
	}
	return nil
}
