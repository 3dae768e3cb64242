package dispatch

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/agora-dev/agora/internal/compute/host"
	"github.com/agora-dev/agora/internal/dispatch/supervisorname"
)

// selfSupervisor names this process as "<pid>:<start time>:<boot id>", so another process
// can tell whether the supervisor of a live dispatch still runs, despite pid reuse and
// reboots (see formatSupervisor).
func selfSupervisor() string {
	selfName.mu.Lock()
	defer selfName.mu.Unlock()
	if selfName.s == "" {
		pid := os.Getpid()
		start, err := processStart(pid)
		if err != nil {
			// Not kept: the next call reads /proc again.
			return formatSupervisor(pid, 0)
		}
		selfName.s = formatSupervisor(pid, start)
	}
	return selfName.s
}

// selfName is selfSupervisor's answer, read from /proc once per process: a process's pid and
// start time never change, and every dispatch asked for it three times (accept, supervise,
// started).
var selfName struct {
	mu sync.Mutex
	s  string
}

// parentSupervisor names this process's parent the same way, or "" when it has none. Pid 1
// is named too: in a container, `agora orch serve` is the first process (deploy/kubernetes),
// and its supervisors' parent is pid 1; a supervisor whose parent died and which was adopted
// by a host's init names that init, which no record holds as a supervisor (with
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
	return formatSupervisor(ppid, start)
}

// currentBoot is the running boot's id ([host.BootID]'s form), or "" when this process
// cannot read it; tests replace it to stand for a later boot.
var currentBoot = func() string {
	id, _ := host.BootID()
	return id
}

// formatSupervisor names the process pid that started at start (clock ticks since boot) in
// the running boot: "<pid>:<start>:<boot id>", the boot id 32 lowercase hex digits. Pids and
// start times both restart at boot, so a name persisted in a record across a reboot could
// otherwise name a process of the new boot with equal pid and start (a deterministic VM or
// container boot whose systemd starts `agora orch serve` at once makes it likely, serve
// itself then the match), and Reap would take the dead dispatch for supervised for ever.
// A process that cannot read the boot id names itself "<pid>:<start>", as before boot ids.
func formatSupervisor(pid int, start uint64) string {
	s := strconv.Itoa(pid) + ":" + strconv.FormatUint(start, 10)
	if boot := currentBoot(); boot != "" {
		s += ":" + boot
	}
	return s
}

// supervisorAlive reports whether the process named by s still runs. A name made in another
// boot is dead, whatever process of this boot has its pid and start time; so is every name
// with a boot when this process cannot read the running boot's id (it cannot tell, and its
// /proc is not the one the name was made in). A name from before boot ids is judged as it
// always was, by pid and start time: nothing in it tells its boot, and taking it for dead
// would end, and stop the sandboxes of, the live dispatches of an agora being upgraded.
func supervisorAlive(s string) bool {
	pid, start, boot, ok := supervisorname.Parse(s)
	if !ok {
		return false
	}
	if boot != "" {
		if cur := currentBoot(); cur == "" || cur != boot {
			return false
		}
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
