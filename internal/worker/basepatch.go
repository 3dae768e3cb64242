package worker

import (
	"context"
	"os"
	"path/filepath"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// applyBase applies the manifest's base patch (a fix loop's rejected work, staged read-only
// among the inputs) to the workspace right after the baseline was recorded, so the agent
// starts from that work and the patch it leaves is taken against the baseline: it holds the
// base patch and the agent's changes together. A base patch that does not apply fails the
// run before the agent starts. It runs in the sandbox, with the worker's own git settings
// (no hooks, no filters, no attributes the workspace sets).
func (r *runner) applyBase(ctx context.Context) *failure {
	if r.man.BasePatch == "" {
		return nil
	}
	p := filepath.Join(r.opts.Root, wire.InputsDir, filepath.FromSlash(r.man.BasePatch))
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return fail(lifecycle.ReasonWorkerFailed, "base patch %s: not a regular file among the inputs (%v)", r.man.BasePatch, err)
	}
	if fi.Size() == 0 {
		return nil // the rejected work changed nothing
	}
	if r.git == nil {
		// The baseline was the empty workspace: the patch is taken against the empty tree.
		g, err := newGitDir(r.opts.TempDir, r.workspace)
		if err != nil {
			return fail(lifecycle.ReasonWorkerFailed, "base patch: %v", err)
		}
		g.tree = emptyTree
		r.git = g
	}
	if err := r.git.run(ctx, nil, "apply", "--whitespace=nowarn", "--", p); err != nil {
		return fail(lifecycle.ReasonWorkerFailed, "base patch %s does not apply to the workspace: %v", r.man.BasePatch, err)
	}
	return nil
}

// baselineAndBase records the baseline, then applies the base patch on top of it.
func (r *runner) baselineAndBase(ctx context.Context) *failure {
	if fl := r.baseline(ctx); fl != nil {
		return fl
	}
	return r.applyBase(ctx)
}
