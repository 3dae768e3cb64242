package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/tracing"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/orch/client"
)

func newOrchCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "orch",
		Short: "Run plans (DAGs of dispatches) with the orchestrator service",
		Long: `The orchestrator runs plans: DAGs of tasks, each task one dispatch per attempt, under
resource locks, with retries and failure cascades (plan format: docs/plan.md).

'agora orch serve' is the service and the only process that opens orch.db. Every other
orch command talks to it over AGORA_HOME/orch/orch.sock. cancel, answer, retry, seal and
schedule add and remove are privileged: they exist on this command line only, never over MCP.`,
	}
	cmd.AddCommand(
		newOrchServeCmd(f, nil),
		newOrchValidateCmd(f, nil),
		newOrchSubmitCmd(f, nil),
		newOrchRunsCmd(f, nil),
		newOrchStatusCmd(f, nil),
		newOrchWatchCmd(f, nil),
		newOrchActionCmd(f, nil, "cancel"),
		newOrchActionCmd(f, nil, "answer"),
		newOrchActionCmd(f, nil, "retry"),
		newOrchActionCmd(f, nil, "seal"),
		newOrchPatchesCmd(f, nil),
		newOrchAuditCmd(f, nil),
		newOrchScheduleCmd(f),
	)
	return cmd
}

// orchPaths returns AGORA_HOME/orch, creating it 0700.
func orchPaths(f *cmdutil.Factory) (dir string, err error) {
	h, err := f.HomeDir()
	if err != nil {
		return "", err
	}
	dir = filepath.Join(h, home.OrchDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	return dir, nil
}

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
