package detach

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/agora-dev/agora/internal/lease/fencefile"
)

// spawn starts `Bin dispatch supervise id` in its own session (setsid), so no terminal hang-up
// or signal to this process group reaches it, with stdin and stdout on /dev/null, stderr
// appended to the home's [LogFile] (what it can only say there, such as a fenced
// supervisor's leaving the end to the next leader) and this process's environment. The returned channel is
// closed when the supervisor exits: spawn owns its Wait, so an exited supervisor never stays a
// zombie while this process runs.
//
// A dispatch of a target that keeps warm slots goes to a ready standby supervisor instead
// (Standbys), when one is: the same supervisor, started ahead. This is the one place a
// serve's dispatch gets its supervisor. The second channel is a standby's word that the
// dispatch's end is committed (nil for a cold supervisor, whose end its exit follows closely).
func (s *Supervisors) spawn(target, id string) (exited, ended <-chan struct{}, err error) {
	if exited, ended, ok := s.Standbys.claim(target, id); ok {
		return exited, ended, nil
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, err
	}
	defer devnull.Close()
	// A log that cannot be opened leaves stderr on /dev/null, as before: no dispatch fails
	// for it, and Supervisors has no log of its own to say so.
	stderr, _ := supervisorStderr(s.StateDir)
	if stderr == nil {
		stderr = devnull
	} else {
		defer stderr.Close()
	}
	c := exec.Command(s.Bin, "dispatch", "supervise", id)
	c.Stdin, c.Stdout, c.Stderr = devnull, devnull, stderr
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// A leader's child keeps its fence (fencefile); no other inherits one by accident.
	c.Env = fencefile.ChildEnv(os.Environ())
	if err := c.Start(); err != nil {
		return nil, nil, fmt.Errorf("start detached supervisor: %w", err)
	}
	done := make(chan struct{})
	go func() {
		c.Wait() // its exit status says nothing the record does not
		close(done)
		// A cold dispatch of a warm target saved its shape: the target's standbys start
		// (once; later it only checks the shape).
		s.Standbys.prime(target)
	}()
	return done, nil, nil
}
