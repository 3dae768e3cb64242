package anchor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/audit/verify"
)

const (
	// commandTimeout bounds one run of an anchor command.
	commandTimeout = 2 * time.Minute
	// maxReceipt caps the standard output kept as the receipt.
	maxReceipt = 16 << 10
	// maxCommandStderr caps the standard error repeated in an error.
	maxCommandStderr = 1 << 10
)

// Command pipes each checkpoint to an operator's program on standard input, e.g. a script
// that uploads it to object-lock storage. The program's standard output (at most 16 KiB) is
// kept as the receipt; a non-zero exit, a timeout (2 minutes) or a larger output is a failed
// anchor. The program runs with agora's environment and working directory, so it can use the
// operator's own credentials; agora passes it nothing else.
type Command struct {
	argv []string
	now  func() time.Time
}

// NewCommand returns a command anchor running argv. argv[0] MUST be an absolute path: agora
// does not search PATH for the program that vouches for its log.
func NewCommand(argv []string, now func() time.Time) (*Command, error) {
	if len(argv) == 0 || !filepath.IsAbs(argv[0]) {
		return nil, errors.New("command anchor: argv[0] must be an absolute path")
	}
	if now == nil {
		now = time.Now
	}
	return &Command{argv: append([]string(nil), argv...), now: now}, nil
}

// Name is "command:" and the program's path.
func (c *Command) Name() string { return "command:" + c.argv[0] }

// Anchor runs the program with checkpoint on its standard input. It keeps no history, so it
// does not call checkPrevious.
func (c *Command) Anchor(ctx context.Context, checkpoint []byte, _ func(context.Context, []byte) error) (verify.Evidence, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.argv[0], c.argv[1:]...)
	cmd.Stdin = bytes.NewReader(checkpoint)
	stdout := &capped{max: maxReceipt}
	stderr := &capped{max: maxCommandStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return verify.Evidence{}, fmt.Errorf("run anchor command %s: %w", c.argv[0], ctx.Err())
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.buf.String())
		if msg != "" {
			msg = ": " + strings.Join(strings.Fields(msg), " ")
		}
		return verify.Evidence{}, fmt.Errorf("run anchor command %s: %v%s", c.argv[0], err, msg)
	}
	if stdout.over {
		return verify.Evidence{}, fmt.Errorf("run anchor command %s: receipt larger than %d bytes", c.argv[0], maxReceipt)
	}
	sum := sha256.Sum256(checkpoint)
	return verify.Evidence{
		Type:             verify.AnchorCommand,
		Name:             c.Name(),
		At:               c.now().UTC(),
		CheckpointSHA256: sum[:],
		Receipt:          bytes.TrimSpace(stdout.buf.Bytes()),
	}, nil
}

// capped keeps the first max bytes written to it and notes whether there were more.
type capped struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (w *capped) Write(p []byte) (int, error) {
	room := w.max - w.buf.Len()
	if len(p) > room {
		w.over = true
		w.buf.Write(p[:max(0, room)])
		return len(p), nil
	}
	return w.buf.Write(p)
}
