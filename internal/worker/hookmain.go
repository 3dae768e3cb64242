package worker

import (
	"context"
	"fmt"
	"io"

	"github.com/agora-dev/agora/internal/runtime/runtimes/adapters"
)

// HookMain is `agora-worker worker hook ARGS...`: the tool hook of the runtime whose CLI runs
// one (an [agentrun.Hooker]; claude-code's judges and audits one tool event and returns the
// exit code the CLI reads). A build with no such runtime refuses every event (exit 2).
func HookMain(ctx context.Context, args []string, stdin io.Reader, stderr io.Writer) int {
	h := adapters.Hook()
	if h == nil {
		fmt.Fprintln(stderr, "agora: no runtime of this build has a tool hook; the call is refused")
		return 2
	}
	return h.HookMain(ctx, args, stdin, stderr)
}
