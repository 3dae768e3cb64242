package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/execrt"
	"github.com/agora-dev/agora/internal/toolreg"
)

const (
	// ReasonCommandNotGranted is the audit reason of an argv no granted pattern matches.
	ReasonCommandNotGranted = "command not granted"
	// defaultCommandTimeout is run_command's budget when the call names none.
	defaultCommandTimeout = 2 * time.Minute
	// maxCommandOutput caps the output (stdout and stderr together) returned to the model.
	maxCommandOutput = 256 << 10
	// maxHintLen caps the list of granted patterns or hosts shown in a refusal.
	maxHintLen = 1000
)

func runCommandTool(env Env) toolreg.Tool {
	return toolreg.Tool{
		Name: "run_command",
		Description: "Run a program in the workspace and return its output (stdout and stderr together, at most 256 KiB) " +
			"and exit code. argv is executed directly, without a shell; it must match one of the command patterns " +
			"granted to you. timeout_seconds defaults to 120.",
		Schema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"argv": {"type": "array", "items": {"type": "string", "maxLength": 32768}, "minItems": 1, "maxItems": 1024,
					"description": "The program and its arguments, e.g. [\"go\", \"test\", \"./...\"]."},
				"timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 3600, "description": "Wall-clock budget in seconds (default 120)."}
			},
			"required": ["argv"],
			"additionalProperties": false
		}`),
		Handler: func(ctx context.Context, c toolreg.Call) (toolreg.Result, error) {
			var a struct {
				Argv           []string `json:"argv"`
				TimeoutSeconds int      `json:"timeout_seconds"`
			}
			if err := decodeArgs(c.Args, &a); err != nil {
				return toolreg.Result{}, err
			}
			timeout := defaultCommandTimeout
			if a.TimeoutSeconds > 0 {
				timeout = time.Duration(a.TimeoutSeconds) * time.Second
			}
			// A learn view recorded an argv the grant refuses as would_deny before the call:
			// it runs (c.Learn).
			return runCommand(ctx, env, c.Grants.Commands, c.Learn, a.Argv, timeout)
		},
	}
}

func runCommand(ctx context.Context, env Env, patterns []string, learned bool, argv []string, timeout time.Duration) (toolreg.Result, error) {
	const tool = "run_command"
	if len(argv) == 0 || argv[0] == "" {
		return toolreg.Result{}, errors.New(tool + ": empty argv")
	}
	if !learned && !grant.CommandAllowed(patterns, argv) {
		hint := "no commands are granted"
		if len(patterns) > 0 {
			hint = "argv must match one of the granted patterns: " + quoteCapped(patterns)
		}
		return toolreg.Result{}, &toolreg.DeniedError{Tool: tool, Reason: ReasonCommandNotGranted, Hint: hint}
	}
	for _, arg := range argv {
		if strings.IndexByte(arg, 0) >= 0 {
			return toolreg.Result{}, errors.New(tool + ": an argument contains a NUL byte")
		}
	}
	spec := execrt.Spec{
		Argv:    append([]string(nil), argv...),
		Dir:     env.Workspace,
		Env:     env.CommandEnv,
		Timeout: timeout,
	}
	// A relative program path ("./build.sh") means one in the workspace, where the command
	// runs; execrt would resolve it against the worker's own directory.
	if p := spec.Argv[0]; strings.Contains(p, "/") && !filepath.IsAbs(p) {
		spec.Argv[0] = filepath.Join(env.Workspace, p)
	}
	out := &cappedBuffer{limit: maxCommandOutput}
	spec.Stdout, spec.Stderr = out, out
	res, err := execrt.Run(ctx, spec)
	switch {
	case errors.Is(err, execrt.ErrNotFound):
		return toolreg.Result{}, errors.New(tool + ": program not found in the command PATH")
	case errors.Is(err, fs.ErrPermission):
		return toolreg.Result{}, errors.New(tool + ": program is not executable")
	case errors.Is(err, fs.ErrNotExist):
		return toolreg.Result{}, errors.New(tool + ": program does not exist")
	case err != nil:
		return toolreg.Result{}, errors.New(tool + ": the program cannot be started")
	case res.Cancelled:
		return toolreg.Result{}, errors.New(tool + ": cancelled; the process group was killed")
	}
	var b strings.Builder
	b.WriteString(out.String())
	if out.dropped > 0 {
		b.WriteString("\n[output truncated: " + itoa(out.dropped) + " more bytes]")
	}
	if res.TimedOut {
		b.WriteString("\n[timed out after " + timeout.String() + "; the process group was killed]")
	}
	b.WriteString("\nexit code: " + strconv.Itoa(res.ExitCode))
	return toolreg.Result{Content: b.String()}, nil
}

// cappedBuffer keeps the first limit bytes written and counts the rest, never failing a
// write, so a chatty command is not stopped by a full pipe.
type cappedBuffer struct {
	mu      sync.Mutex
	limit   int
	buf     []byte
	dropped int64
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.limit - len(c.buf)
	if room > len(p) {
		room = len(p)
	}
	c.buf = append(c.buf, p[:room]...)
	c.dropped += int64(len(p) - room)
	return len(p), nil
}

func (c *cappedBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.buf)
}

// quoteCapped quotes items into a comma-separated list, cut at maxHintLen bytes.
func quoteCapped(items []string) string {
	var b strings.Builder
	for i, s := range items {
		q := strconv.Quote(s)
		if b.Len()+len(q) > maxHintLen {
			b.WriteString(", …")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(q)
	}
	return b.String()
}
