package local

import (
	"os/exec"
	"runtime"
	"sync"
)

// Every task the provider starts carries a parent-death signal (Pdeathsig, SIGKILL), which
// Linux sends when the thread that forked it ends, not the process. The Go runtime ends a
// thread whose goroutine returns while locked to it: a run-as start's (onOwnThread), once its
// sandbox has ended, and an ordinary goroutine may have forked another task from that very
// thread before it was locked. So a run-as start forks bwrap from its own thread, which
// lives exactly as long as that sandbox (--die-with-parent is meant for it), and every other
// task is forked by spawnLoop, on a thread locked for the life of the process.

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

var spawner = sync.OnceValue(func() chan<- spawnReq {
	reqs := make(chan spawnReq)
	go spawnLoop(reqs)
	return reqs
})

// spawnLoop starts each command it is sent, from a thread it never lets go of.
func spawnLoop(reqs <-chan spawnReq) {
	runtime.LockOSThread() // never unlocked: this thread must outlive every task it forks
	for r := range reqs {
		r.done <- r.cmd.Start()
	}
}

// startOnSpawner starts cmd from spawnLoop's thread.
func startOnSpawner(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	spawner() <- spawnReq{cmd, done}
	return <-done
}
