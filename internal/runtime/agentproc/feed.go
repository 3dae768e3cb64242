package agentproc

import "io"

// stderrTail is how much of a CLI's stderr [Stderr] keeps for an [ExitError].
const stderrTail = 4 << 10

// Stderr returns where a CLI's stderr goes: to also (when not nil) and to the returned tail,
// which keeps the last few KiB for the error the runtime reports if the CLI fails.
func Stderr(also io.Writer) (io.Writer, *Writer) {
	tail := &Writer{Max: stderrTail}
	if also == nil {
		return tail, tail
	}
	return io.MultiWriter(also, tail), tail
}

// stdinScript feeds the prompt file to the CLI's stdin: the runtimes' process runner gives
// the process no stdin, so /bin/sh opens the file and execs the CLI in its own place (same
// pid, same group, argv exactly the CLI's). It runs no input: the file and the program are
// positional parameters.
const (
	shell       = "/bin/sh"
	stdinScript = `f=$1; shift; exec "$@" <"$f"`
)

// StdinArgv is the argv that runs prog with args, reading promptFile on its stdin; tag names
// the shell in process listings ($0).
func StdinArgv(tag, promptFile, prog string, args ...string) []string {
	return append([]string{shell, "-c", stdinScript, tag, promptFile, prog}, args...)
}
