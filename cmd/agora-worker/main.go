// Command agora-worker is what runs inside a dispatch's sandbox: the worker, its runtimes,
// the tool registry, Claude Code's tool hook, a pod's fetch step and a container's fdpass
// entrypoint. The host (cmd/agora) binds it read-only at /agora/bin/agora-worker
// (wire.BinPath) and never binds itself.
//
// It links nothing host-only: no Kubernetes client, no OpenTelemetry SDK, no Prometheus, no
// SQLite, no container engine client, no cobra (internal/deps_test.go and
// internal/testdata/closure-agora-worker.txt pin its whole closure; TestWorkerBinary checks
// the built binary). Its command line is the sandbox contract the host writes, not a tool for
// people, so it parses its few words by hand:
//
//	agora-worker worker                  run the dispatch's worker (the sandbox's init)
//	agora-worker worker hook ARGS...     audit one Claude Code tool event
//	agora-worker worker fetch            a pod's init step: fetch the mounts from the gateway
//	agora-worker worker fill             a Kubernetes warm slot's filler of its read-only places
//	agora-worker fdpass -- PROGRAM ARGS  a container's entrypoint: stdin to fd 3, then exec
//
// The words are those of the hidden `agora worker` commands it replaces, so the argv the host
// and claude's settings carry reads the same with either binary.
//
// Built with -tags agora_worker_exec it is agora-worker-exec, the worker of a local exec
// dispatch: exec's adapter alone, without the model runtimes, the gateway's client or a pod's
// steps, so it starts sooner; it refuses the words it cannot serve
// (docs/adr/0035-an-exec-dispatch-runs-an-exec-only-worker.md).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/agora-dev/agora/internal/compute/fdpass"
	"github.com/agora-dev/agora/internal/worker"
)

// exitUsage is the exit code of a command line this program does not know.
const exitUsage = 2

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 1 && args[0] == "worker":
		// The worker ignores every signal it may (the sandbox's init); no handler here.
		return worker.Main(context.Background(), stdout, stderr)
	case len(args) >= 2 && args[0] == "worker" && args[1] == "hook":
		// Its exit code is claude's: 2 refuses the call, so the hook parses its own arguments.
		return worker.HookMain(context.Background(), args[2:], stdin, stderr)
	case len(args) == 2 && args[0] == "worker" && (args[1] == "fetch" || args[1] == "fill"):
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return podStep(ctx, args[1], stderr)
	case len(args) >= 3 && args[0] == "fdpass" && args[1] == "--":
		// Exec returns only on failure; the program's environment is this process's.
		fmt.Fprintf(stderr, "agora-worker fdpass: %v\n", fdpass.Exec(args[2:], os.Environ()))
		return 1
	}
	fmt.Fprintf(stderr, "agora-worker: unknown command line %q\n"+
		"agora-worker runs inside agora's sandboxes, started by agora, not by people; want one of:\n"+
		"  agora-worker worker\n  agora-worker worker hook ARGS...\n  agora-worker worker fetch\n  agora-worker worker fill\n"+
		"  agora-worker fdpass -- PROGRAM [ARG]...\n", args)
	return exitUsage
}
