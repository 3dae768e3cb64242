package worker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/runtime/execrt"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// overlay writes the files each capability's overlay: patterns name into the workspace, in
// the subagent's order; the rest of a capability stays where the host mounted it, read-only
// at /agora/capabilities/NAME. The host refused, before the record was written, an overlay
// that would replace a file of the checkout or another capability's, so nothing here
// replaces anything. The paths are kept: capture leaves them out of the patch.
//
// The checkout may hold symlinks; [catalog.Place] writes through none.
func (r *runner) overlay(ctx context.Context) *failure {
	root, err := os.OpenRoot(r.workspace)
	if err != nil {
		return fail(lifecycle.ReasonWorkerFailed, "overlay: open workspace: %v", err)
	}
	defer root.Close()
	for _, c := range r.caps {
		for _, p := range catalog.OverlayFiles(c.grants, c.files) {
			f, _ := findFile(c.files, p)
			if _, err := root.Lstat(p); err == nil {
				// Accept refuses this; a stage that disagrees fails rather than clobber.
				return fail(lifecycle.ReasonIntegrityFailed, "overlay capability %q: %s is already in the workspace", c.name, p)
			}
			if err := catalog.Place(root, f, 0o755, 0o777); err != nil {
				return fail(lifecycle.ReasonIntegrityFailed, "overlay capability %q: %v", c.name, err)
			}
			r.overlaid = append(r.overlaid, p)
		}
	}
	return nil
}

// setup runs each capability's setup script, in order, with the agent's environment and the
// workspace as working directory, all of them within Manifest.SetupTimeoutSeconds. Output
// goes to the worker's stderr. The script run is the file at the declared path in the
// capability's mounted directory, which must hold exactly the archive's bytes: the mount is
// the host's and read-only, and a layout that disagrees with the verified archive fails
// the run rather than run anything else.
func (r *runner) setup(ctx context.Context) *failure {
	// Before the first process that is not the worker's: a setup script is the first.
	if fl := r.claimGateway(ctx); fl != nil {
		return fl
	}
	r.env = agentEnv(r.man, r.secrets, r.opts.Root, r.opts.TempDir, r.proxy)
	deadline := time.Now().Add(time.Duration(r.man.SetupTimeoutSeconds) * time.Second)
	for _, c := range r.caps {
		if c.grants.Setup == "" {
			continue
		}
		want, _ := findFile(c.files, c.grants.Setup)
		dir := filepath.Join(r.opts.Root, wire.CapabilityFilesDir, c.name)
		script := filepath.Join(dir, filepath.FromSlash(c.grants.Setup))
		if err := sameFile(dir, c.grants.Setup, want.Data); err != nil {
			return fail(lifecycle.ReasonIntegrityFailed, "setup capability %q: %v", c.name, err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fail(lifecycle.ReasonWorkerFailed, "setup capability %q: no time left of the %ds setup budget", c.name, r.man.SetupTimeoutSeconds)
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
			return fail(lifecycle.ReasonWorkerFailed, "setup capability %q: %v", c.name, err)
		case res.TimedOut:
			return fail(lifecycle.ReasonWorkerFailed, "setup capability %q: script %s timed out (setup budget %ds)", c.name, c.grants.Setup, r.man.SetupTimeoutSeconds)
		case res.Cancelled:
			return fail(lifecycle.ReasonWorkerFailed, "setup capability %q: cancelled", c.name)
		case res.ExitCode != 0:
			return fail(lifecycle.ReasonWorkerFailed, "setup capability %q: script %s exited with code %d", c.name, c.grants.Setup, res.ExitCode)
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
		return fmt.Errorf("setup script %s does not hold the capability's bytes", rel)
	}
	return nil
}
