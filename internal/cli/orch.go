package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/orch/client"
)

// Where `agora orch serve` keeps its state, under AGORA_HOME.
const (
	orchDir    = "orch"
	orchDB     = "orch.db"
	orchSocket = "orch.sock"
)

func newOrchCmd(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "orch",
		Short: "Run plans (DAGs of dispatches) with the orchestrator service",
		Long: `The orchestrator runs plans: DAGs of tasks, each task one dispatch per attempt, under
resource locks, with retries and failure cascades (plan format: docs/plan.md).

'agora orch serve' is the service and the only process that opens orch.db. Every other
orch command talks to it over AGORA_HOME/orch/orch.sock. cancel, answer, retry and seal
are privileged: they exist on this command line only, never over MCP.`,
	}
	cmd.AddCommand(
		newOrchServeCmd(f),
		newOrchValidateCmd(f),
		newOrchSubmitCmd(f),
		newOrchRunsCmd(f),
		newOrchStatusCmd(f),
		newOrchWatchCmd(f),
		newOrchActionCmd(f, "cancel"),
		newOrchActionCmd(f, "answer"),
		newOrchActionCmd(f, "retry"),
		newOrchActionCmd(f, "seal"),
		newOrchPatchesCmd(f),
		newOrchAuditCmd(f),
	)
	return cmd
}

// orchPaths returns AGORA_HOME/orch, creating it 0700.
func (f *Factory) orchPaths() (dir string, err error) {
	h, err := f.HomeDir()
	if err != nil {
		return "", err
	}
	dir = filepath.Join(h, orchDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	return dir, nil
}

// OrchClient connects to the orchestrator service of AGORA_HOME.
func (f *Factory) OrchClient(ctx context.Context) (*client.Client, error) {
	h, err := f.HomeDir()
	if err != nil {
		return nil, err
	}
	return client.New(filepath.Join(h, orchDir, orchSocket)), nil
}
