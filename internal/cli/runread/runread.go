// Package runread is how the CLI reads an orchestrator run: from agora orch serve over its
// socket, or, when serve is not running, from a read-only snapshot of orch.db. The orch
// commands and agora capability suggest --run read runs through it.
package runread

import (
	"context"
	"fmt"
	"time"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/orch/client"
)

// Status connects to the orchestrator service and reads run ref (an id or a plan name).
func Status(ctx context.Context, f *cmdutil.Factory, ref string) (*client.Client, api.Run, error) {
	c, err := f.OrchClient(ctx)
	if err != nil {
		return nil, api.Run{}, err
	}
	run, err := c.Status(ctx, ref)
	if err == nil {
		NoteShared(f, run)
	}
	return c, run, err
}

// NoteShared says on stderr which run a name shared by several runs stands for: the newest.
func NoteShared(f *cmdutil.Factory, r api.Run) {
	if r.NameRuns > 1 {
		fmt.Fprintf(f.IO.ErrOut, "agora: %d runs are named %s; this is the newest, %s (created %s); name another by its id (agora orch runs)\n",
			r.NameRuns, r.Name, r.ID, r.CreatedAt.UTC().Format(time.RFC3339))
	}
}
