package k8stest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// proc is one component of the cluster: a child process whose output goes to a log file in
// the cluster's directory, so a failure can quote it.
type proc struct {
	name string
	argv []string
	env  []string
	log  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
	err  error         // cmd.Wait's result, once done is closed
}

func newProc(dir, name string, argv []string, env ...string) *proc {
	return &proc{name: name, argv: argv, env: env, log: filepath.Join(dir, name+".log")}
}

// start runs the process (again, after a kill: the same argv and the same log, appended).
func (p *proc) start() error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open %s log: %w", p.name, err)
	}
	defer f.Close() // the child has its own copy
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Pdeathsig: the kernel kills the child when the thread that forked it dies, so a test
	// binary killed with SIGKILL (a go test timeout, a CI cancel) leaves no apiserver behind.
	// Setpgid keeps a terminal's ^C from reaching the children before Stop does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := spawn(cmd); err != nil {
		return fmt.Errorf("start %s (%s): %w", p.name, p.argv[0], err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// exited reports whether the process has ended, and how.
func (p *proc) exited() (bool, error) {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return true, errors.New("never started")
	}
	select {
	case <-done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.err
	default:
		return false, nil
	}
}

// kill ends the process with SIGKILL and waits for it. Everything a component keeps is in the
// cluster's throwaway directory, so there is nothing a graceful stop would save.
func (p *proc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// tail returns the end of the process's log, for an error message.
func (p *proc) tail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	const max = 3000
	if len(b) > max {
		b = b[len(b)-max:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// spawner starts every child from one goroutine locked to its OS thread for the life of the
// test binary. Pdeathsig fires when the forking *thread* exits, and the Go runtime may retire
// the thread an ordinary goroutine ran on, which would kill a healthy apiserver mid-test.
var spawner = sync.OnceValue(func() chan<- spawnReq {
	reqs := make(chan spawnReq)
	go func() {
		runtime.LockOSThread() // never unlocked: this thread must outlive every child
		for r := range reqs {
			r.done <- r.cmd.Start()
		}
	}()
	return reqs
})

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

func spawn(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	spawner() <- spawnReq{cmd, done}
	return <-done
}

// freePorts reserves n distinct loopback ports by listening on each at once, then releases
// them for the components to bind. Another process could take one in between; start retries
// a cluster whose component failed on "address already in use".
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("reserve a loopback port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// waitFor polls cond every interval until it reports done, returns an error, or timeout
// passes; check, when not nil, is consulted first each round (a component that died).
func waitFor(timeout, interval time.Duration, what string, check func() error, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if check != nil {
			if err := check(); err != nil {
				return fmt.Errorf("waiting for %s: %w", what, err)
			}
		}
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			if last != nil {
				return fmt.Errorf("%s not within %s: %w", what, timeout, last)
			}
			return fmt.Errorf("%s not within %s", what, timeout)
		}
		time.Sleep(interval)
	}
}
