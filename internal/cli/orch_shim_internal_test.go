package cli

import "github.com/agora-dev/agora/internal/cli/orch"

// taskVerdict is agora orch status's VERIFY column, which the dispatch verify test checks
// beside describe's verify lines.
var taskVerdict = orch.TaskVerdict
