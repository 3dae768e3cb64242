// Package execrt is the exec agent runtime: it runs one command as the leader of its own
// process group, with a complete environment given by the caller, a working directory and
// a wall-clock budget, and kills the whole group when the budget is spent, when the context
// is cancelled, and after the leader exits (so no background process the command started
// outlives it and races with patch capture).
//
// execrt runs INSIDE the sandbox, called by package worker for the agent command and for
// capability setup scripts. It never inherits the caller's environment (Spec.Env is the
// whole environment), never resolves the program with the worker's own PATH (only with
// the PATH in Spec.Env), and never interprets its output: stdout and stderr are passed
// through to the caller's writers as they are written. It knows nothing about catalogs,
// secrets or the sandbox layout.
//
// A process that leaves the group on purpose (setsid) is out of reach here; inside the
// sandbox it dies with the sandbox's pid namespace when the worker exits.
package execrt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agora-dev/agora/internal/runtime/execrt/execdef"
)

// Name is the runtime name a subagent document uses for this runtime.
const Name = execdef.Name

// drainTimeout bounds how long Run waits for output still buffered in its pipes after the
// process group was killed. Only a process that left the group can hold a pipe open that
// long.
const drainTimeout = 2 * time.Second

// Spec describes one command to run.
type Spec struct {
	// Argv is the program and its arguments. A program name without a slash is looked up
	// in the PATH of Env (never the caller's).
	Argv []string
	// Dir is the working directory. It MUST be set.
	Dir string
	// Env is the complete environment, as KEY=VALUE strings. Nothing is inherited.
	Env []string
	// Stdout and Stderr receive the output as it is written; nil discards it. When a
	// writer is an *os.File it is handed to the process directly.
	Stdout, Stderr io.Writer
	// Timeout is the wall-clock budget from the start; when it is spent the process group
	// is killed with SIGKILL and Result.TimedOut is set. 0 means no budget.
	Timeout time.Duration
}

// Result reports how the command ended.
type Result struct {
	// ExitCode is the exit status, or -1 when the process was killed by a signal.
	ExitCode int
	// TimedOut is set when Run killed the group because Spec.Timeout was spent.
	TimedOut bool
	// Cancelled is set when Run killed the group because ctx was done.
	Cancelled bool
	// Duration is the time from start to exit.
	Duration time.Duration
}

// Run starts the command and waits for it. It returns an error only when the command could
// not be started (bad Spec, program not found, exec failure); a command that ran and failed
// is reported in Result.
func Run(ctx context.Context, s Spec) (Result, error) {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return Result{}, errors.New("run command: empty argv")
	}
	if s.Dir == "" {
		return Result{}, errors.New("run command: no working directory")
	}
	prog, err := LookPath(s.Argv[0], EnvValue(s.Env, "PATH"))
	if err != nil {
		return Result{}, fmt.Errorf("run command %q: %w", s.Argv[0], err)
	}
	cmd := &exec.Cmd{
		Path:        prog,
		Args:        s.Argv,
		Dir:         s.Dir,
		Env:         append([]string{}, s.Env...),
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	// One lock for both streams: callers often pass the same writer twice.
	mu := new(sync.Mutex)
	stdout, err := newSink(s.Stdout, mu)
	if err != nil {
		return Result{}, fmt.Errorf("run command %q: %w", s.Argv[0], err)
	}
	defer stdout.abandon()
	stderr, err := newSink(s.Stderr, mu)
	if err != nil {
		return Result{}, fmt.Errorf("run command %q: %w", s.Argv[0], err)
	}
	defer stderr.abandon()
	cmd.Stdout, cmd.Stderr = stdout.w, stderr.w

	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("run command %q: %w", s.Argv[0], err)
	}
	pgid := cmd.Process.Pid
	stdout.started()
	stderr.started()

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	var budget <-chan time.Time
	if s.Timeout > 0 {
		t := time.NewTimer(s.Timeout)
		defer t.Stop()
		budget = t.C
	}
	var res Result
	var werr error
	select {
	case werr = <-waited:
	case <-budget:
		res.TimedOut = true
		killGroup(pgid)
		werr = <-waited
	case <-ctx.Done():
		res.Cancelled = true
		killGroup(pgid)
		werr = <-waited
	}
	res.Duration = time.Since(start)
	// Whatever the leader did, nothing it started may keep running.
	killGroup(pgid)
	stdout.finish()
	stderr.finish()

	res.ExitCode = 0
	if werr != nil {
		var ee *exec.ExitError
		if !errors.As(werr, &ee) {
			return res, fmt.Errorf("wait for command %q: %w", s.Argv[0], werr)
		}
		res.ExitCode = ee.ExitCode() // -1 when killed by a signal
	}
	return res, nil
}

// killGroup sends SIGKILL to the process group pgid. ESRCH (already gone) is fine.
func killGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// EnvValue returns the value of key in env (the last one wins, as in execve).
func EnvValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// sink connects one output stream. An *os.File is passed to the process as is; any other
// writer is fed from a pipe by a goroutine that Run owns and waits for.
type sink struct {
	w     io.Writer // what the process gets
	r, wr *os.File  // the pipe, when dst is not a file
	dst   io.Writer
	done  chan struct{}
}

func newSink(dst io.Writer, mu *sync.Mutex) (*sink, error) {
	if dst == nil {
		return &sink{}, nil // exec.Cmd connects nil to /dev/null
	}
	if f, ok := dst.(*os.File); ok {
		return &sink{w: f}, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	return &sink{w: w, r: r, wr: w, dst: lockedWriter{mu: mu, w: dst}}, nil
}

// lockedWriter serialises writes to w. It has only Write, so io.Copy never calls a ReadFrom
// of w (which a bytes.Buffer implements, and which is not safe beside another writer).
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// started closes the parent's copy of the write end and starts copying.
func (s *sink) started() {
	if s.r == nil {
		return
	}
	s.wr.Close()
	s.wr = nil
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		_, _ = io.Copy(s.dst, s.r)
	}()
}

// finish waits for the copy to reach end of file (every writer is dead), at most
// drainTimeout, then closes the read end.
func (s *sink) finish() {
	if s.done == nil {
		return
	}
	t := time.NewTimer(drainTimeout)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
		s.r.Close() // unblocks the copy
		<-s.done
	}
}

// abandon releases the pipe when Run returns early.
func (s *sink) abandon() {
	if s.wr != nil {
		s.wr.Close()
	}
	if s.r != nil {
		s.r.Close()
	}
}
