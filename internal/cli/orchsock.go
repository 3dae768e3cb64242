package cli

import (
	"context"
	"path/filepath"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/orch/client"
	"github.com/agora-dev/agora/internal/tracing"
)

// orchClient connects to the orchestrator service of AGORA_HOME.
func orchClient(ctx context.Context, f *cmdutil.Factory) (*client.Client, error) {
	h, err := f.HomeDir()
	if err != nil {
		return nil, err
	}
	c := client.New(filepath.Join(h, home.OrchDir, home.OrchSocket))
	// A run submitted from inside a trace (TRACEPARENT, an MCP request's) joins it.
	c.Traceparent = tracing.Traceparent
	return c, nil
}
