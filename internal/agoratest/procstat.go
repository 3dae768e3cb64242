package agoratest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcStat is what tests read of a process from /proc/PID/stat (proc(5)).
type ProcStat struct {
	Comm    string // the command name, without its parentheses
	State   string // one letter: R, S, D, Z, T, ...
	PPID    int    // its parent
	Session int    // its session id
	Threads int    // its threads that have not exited, the first one's included until it is reaped
	// Start is when it started, in clock ticks since boot: it tells the process from a later
	// one given the same pid.
	Start string
}

// ReadProcStat reads pid's /proc/PID/stat. The command name may hold spaces and parentheses,
// so the fields are counted from the last ')'.
func ReadProcStat(pid int) (ProcStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ProcStat{}, err
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return ProcStat{}, fmt.Errorf("/proc/%d/stat: no command name in %.80q", pid, s)
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 20 {
		return ProcStat{}, fmt.Errorf("/proc/%d/stat: %d fields after the command, want at least 20", pid, len(f))
	}
	st := ProcStat{Comm: s[open+1 : end], State: f[0], Start: f[19]}
	if st.PPID, err = strconv.Atoi(f[1]); err != nil {
		return ProcStat{}, fmt.Errorf("/proc/%d/stat: parent %q: %w", pid, f[1], err)
	}
	if st.Session, err = strconv.Atoi(f[3]); err != nil {
		return ProcStat{}, fmt.Errorf("/proc/%d/stat: session %q: %w", pid, f[3], err)
	}
	if st.Threads, err = strconv.Atoi(f[17]); err != nil {
		return ProcStat{}, fmt.Errorf("/proc/%d/stat: threads %q: %w", pid, f[17], err)
	}
	return st, nil
}

// Running reports whether process pid exists and has not ended (a zombie its parent has not
// reaped has). /proc shows the state of the process's first thread, which is a zombie too
// when that thread alone has exited and others run on: a program whose main thread ended, or
// for a moment a Go program (agora's front) that execs from a thread other than its first.
// Such a process still runs: a zombie counts as ended only when it is its last thread.
func Running(pid int) bool {
	st, err := ReadProcStat(pid)
	if err != nil || st.State == "X" {
		return false
	}
	return st.State != "Z" || st.Threads > 1
}

// ProcsOfUID lists the pids of the processes whose real uid is uid, zombies aside: what still
// runs as a sandbox's uid.
func ProcsOfUID(uid string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, ent := range ents {
		b, err := os.ReadFile("/proc/" + ent.Name() + "/status")
		if err != nil {
			continue
		}
		var state, real string
		for l := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(l, "State:"); ok {
				state = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(l, "Uid:"); ok {
				if f := strings.Fields(v); len(f) > 0 {
					real = f[0]
				}
			}
		}
		if real == uid && !strings.HasPrefix(state, "Z") {
			out = append(out, ent.Name())
		}
	}
	return out
}
