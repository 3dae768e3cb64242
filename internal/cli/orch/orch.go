// Package orch is agora orch: the orchestrator service (serve) and the commands that talk to
// it over AGORA_HOME/orch/orch.sock (submit, status, watch, patches, schedule ...). What serve
// needs that only the composition root can build (the hand-off runner, replication, the
// anchored checkpointer of orch.db) comes through the factory.
package orch

import (
	"github.com/spf13/cobra"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// NewCmd returns agora orch and its verbs.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
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
