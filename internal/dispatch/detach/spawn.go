package detach

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// spawn starts `Bin dispatch supervise id` in its own session (setsid), so no terminal hang-up
// or signal to this process group reaches it, with stdin, stdout and stderr on /dev/null (the
// supervisor keeps its own log) and this process's environment. The returned channel is
// closed when the supervisor exits: spawn owns its Wait, so an exited supervisor never stays a
// zombie while this process runs.
//
// A dispatch of a target that keeps warm slots goes to a ready standby supervisor instead
// (Standbys), when one is: the same supervisor, started ahead. This is the one place a
// serve's dispatch gets its supervisor.
func (s *Supervisors) spawn(target, id string) (<-chan struct{}, error) {
	if exited, ok := s.Standbys.claim(target, id); ok {
		return exited, nil
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer devnull.Close()
	c := exec.Command(s.Bin, "dispatch", "supervise", id)
	c.Stdin, c.Stdout, c.Stderr = devnull, devnull, devnull
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	c.Env = os.Environ()
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("start detached supervisor: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		c.Wait() // its exit status says nothing the record does not
		close(exited)
		// A cold dispatch of a warm target saved its shape: the target's standbys start
		// (once; later it only checks the shape).
		s.Standbys.prime(target)
	}()
	return exited, nil
}
