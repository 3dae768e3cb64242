package dispatch

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// selfSupervisor names this process as "<pid>:<start time>", so another process can tell
// whether the supervisor of a live dispatch still runs, despite pid reuse.
func selfSupervisor() string {
	selfName.mu.Lock()
	defer selfName.mu.Unlock()
	if selfName.s == "" {
		pid := os.Getpid()
		start, err := processStart(pid)
		if err != nil {
			// Not kept: the next call reads /proc again.
			return strconv.Itoa(pid) + ":0"
		}
		selfName.s = fmt.Sprintf("%d:%d", pid, start)
	}
	return selfName.s
}

// selfName is selfSupervisor's answer, read from /proc once per process: a process's pid and
// start time never change, and every dispatch asked for it three times (accept, supervise,
// started; #28 noop).
var selfName struct {
	mu sync.Mutex
	s  string
}

// parentSupervisor names this process's parent the same way, or "" when it has none. Pid 1
// is named too: in a container, `agora orch serve` is the first process (deploy/kubernetes),
// and its supervisors' parent is pid 1; a supervisor whose parent died and which was adopted
// by a host's init names that init, which no record holds as a supervisor (#31: with
// pid 1 taken for "none", every supervisor serve spawned in a pod found the dispatch claimed
// by serve and exited).
func parentSupervisor() string {
	ppid := os.Getppid()
	if ppid < 1 {
		return ""
	}
	start, err := processStart(ppid)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%d:%d", ppid, start)
}

// supervisorAlive reports whether the process named by s still runs.
func supervisorAlive(s string) bool {
	pidStr, startStr, ok := strings.Cut(s, ":")
	if !ok {
		return false
	}
	pid, err1 := strconv.Atoi(pidStr)
	start, err2 := strconv.ParseUint(startStr, 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return false
	}
	got, state, err := processStat(pid)
	// A zombie (killed, not yet reaped by its parent) runs nothing: its sandbox died with it.
	return err == nil && state != "Z" && state != "X" && (start == 0 || got == start)
}

// processStart is field 22 of /proc/<pid>/stat: the start time in clock ticks since boot.
func processStart(pid int) (uint64, error) {
	start, _, err := processStat(pid)
	return start, err
}

// processStat is the start time (field 22) and the state (field 3: R, S, Z, ...) of
// /proc/<pid>/stat.
func processStat(pid int) (uint64, string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", err
	}
	// The command name (field 2) may hold spaces and parentheses: count from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, "", fmt.Errorf("bad /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, "", fmt.Errorf("bad /proc/%d/stat", pid)
	}
	// f[0] is field 3 (state), so field 22 is f[19].
	start, err := strconv.ParseUint(f[19], 10, 64)
	return start, f[0], err
}

// SelfSupervisor names this process the way records name supervisors.
func SelfSupervisor() string { return selfSupervisor() }
