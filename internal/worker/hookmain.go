package worker

import (
	"context"
	"io"

	"github.com/agora-dev/agora/internal/runtime/claudert/claudeadapter"
)

// HookMain is `agora-worker worker hook ARGS...`: the tool hook of the runtime whose CLI runs
// one (claude-code's; its adapter judges and audits one tool event and returns the exit code
// the CLI reads).
func HookMain(ctx context.Context, args []string, stdin io.Reader, stderr io.Writer) int {
	return claudeadapter.Adapter{}.HookMain(ctx, args, stdin, stderr)
}
