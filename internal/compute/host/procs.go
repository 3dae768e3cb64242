package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ProcStatus is the part of /proc/<pid>/status this package reads to tell a sandbox's
// first process from any other.
type ProcStatus struct {
	name, state string
	ppid        string
	uids        []string // real, effective, saved, filesystem
	nspid       []string // the pid in each pid namespace, from the reader's down to its own
}

// ReadProcStatus reads the status of process pid from /proc.
func ReadProcStatus(pid string) (ProcStatus, error) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return ProcStatus{}, err
	}
	var st ProcStatus
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "Name":
			st.name = strings.TrimSpace(v)
		case "State":
			st.state = strings.TrimSpace(v)
		case "PPid":
			st.ppid = strings.TrimSpace(v)
		case "Uid":
			st.uids = strings.Fields(v)
		case "NSpid":
			st.nspid = strings.Fields(v)
		}
	}
	if st.nspid == nil {
		return ProcStatus{}, fmt.Errorf("the status of process %s has no NSpid line", pid)
	}
	return st, nil
}

// NestedInit reports whether the process is the first of a pid namespace below the reader's.
func (st ProcStatus) NestedInit() bool {
	return len(st.nspid) > 1 && st.nspid[len(st.nspid)-1] == "1"
}

// RunsAs reports whether the process is no zombie and has uid as its real, effective or
// saved uid.
func (st ProcStatus) RunsAs(uid string) bool {
	if strings.HasPrefix(st.state, "Z") || strings.HasPrefix(st.state, "X") {
		return false
	}
	for i, v := range st.uids {
		if i < 3 && v == uid {
			return true
		}
	}
	return false
}

// UIDProcesses lists the processes of this host that run as uid (its real, effective or
// saved uid; zombies run nothing and are left out).
func UIDProcesses(uid string) ([]string, error) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list the processes of uid %s: %w", uid, err)
	}
	var pids []string
	for _, e := range procs {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if st, err := ReadProcStatus(e.Name()); err == nil && st.RunsAs(uid) {
			pids = append(pids, e.Name())
		}
	}
	return pids, nil
}

// orphanWait bounds how long EndOrphanedSandboxes waits for what it killed to exit.
const orphanWait = 5 * time.Second

// EndOrphanedSandboxes kills, of pids (processes running as uid), every first process of a
// sandbox whose bwrap is gone, and reports whether it killed one (once it has exited, or
// after orphanWait); the kernel takes the rest of each sandbox with it. The caller MUST
// know that nothing supervises a sandbox of uid any more (its supervisor or slot holder is
// gone). Such a process is nobody's: bwrap's launcher, dead before the sandbox bound its
// life to it (--die-with-parent takes effect at the release), left it waiting for ever for
// its uid map, or running its command (a verify gate's has no worker lifeline). It is known
// by all of: the first process of a pid namespace below this one, whose parent is no bwrap
// and does not run as uid (the parent of a namespace an agent made, or of a live sandbox,
// does). A pidfd opened first pins the process the checks read, so the kill never reaches
// another process that took its pid over.
func EndOrphanedSandboxes(uid string, pids []string) bool {
	killed := false
	for _, p := range pids {
		pid, err := strconv.Atoi(p)
		if err != nil {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		if orphanedSandbox(uid, p) && unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			_, _ = unix.Poll(fds, int(orphanWait/time.Millisecond))
			killed = true
		}
		unix.Close(fd)
	}
	return killed
}

// orphanedSandbox reports whether pid is the first process of a pid namespace below this one
// whose parent is neither a bwrap nor a process running as uid (EndOrphanedSandboxes).
func orphanedSandbox(uid, pid string) bool {
	st, err := ReadProcStatus(pid)
	if err != nil || !st.NestedInit() {
		return false
	}
	parent, err := ReadProcStatus(st.ppid)
	if err != nil {
		return true // reaped meanwhile: no bwrap waits on it
	}
	return parent.name != "bwrap" && !parent.RunsAs(uid)
}
