package local

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/agora-dev/agora/internal/compute/host"
)

// taskIDPrefix starts every task id this provider hands out.
const taskIDPrefix = "local:"

// ErrBadTaskID means a task id is not one this provider produced.
var ErrBadTaskID = errors.New("malformed local task id")

// taskID names one process for [Provider.Cancel]: its pid and its start time in clock
// ticks since boot (field 22 of /proc/<pid>/stat). The pair survives pid reuse: a reused
// pid has a later start time.
//
// A bubblewrap task names its sandbox's first process too (init, initStart): the process
// bwrap cloned into the sandbox's pid namespace, whose end takes every process in it. bwrap
// binds that process's life to bwrap's (--die-with-parent) only after it is released, so a
// supervisor killed in between leaves bwrap dead and the sandbox running; Cancel from
// another process (Reap) kills it by this name. Ids written before it was added have none.
//
// Pids and start times both restart at boot, so an id read back from the database after a
// reboot could name a process of the new boot with equal pid and start (a deterministic VM
// or container boot that starts agora at once makes it likely). An id therefore carries the
// boot it was made in (boot, [host.BootID]'s form), last; Cancel signals nothing for an id of
// another boot. Ids written before it was added (or by a process that could not read the
// boot id) have none and are checked as they always were: nothing in them tells their boot,
// and refusing them would leave a live task of this boot uncancellable after an upgrade.
type taskID struct {
	pid   int
	start uint64
	// init and initStart name the sandbox's first process; 0 when unknown.
	init      int
	initStart uint64
	// boot is the id of the boot the task started in; "" in ids that predate it.
	boot string
}

func (t taskID) String() string {
	s := fmt.Sprintf("%s%d:%d", taskIDPrefix, t.pid, t.start)
	if t.init != 0 {
		s += fmt.Sprintf(":%d:%d", t.init, t.initStart)
	}
	if t.boot != "" {
		s += ":" + t.boot
	}
	return s
}

// parseTaskID parses a task id in its one canonical form (decimal, no sign, no leading zeros;
// the boot as 32 lowercase hex digits):
//
//	local:<pid>:<start>:<boot>                          a plain task
//	local:<pid>:<start>:<init>:<initstart>:<boot>       a bubblewrap task
//	local:<pid>:<start>                                 either, from before boot ids
//	local:<pid>:<start>:<init>:<initstart>
//
// The field count tells the forms apart (2, 3, 4 or 5), and a boot id is never a decimal
// number's spelling (32 digits overflow a uint64).
func parseTaskID(s string) (taskID, error) {
	rest, ok := strings.CutPrefix(s, taskIDPrefix)
	if !ok {
		return taskID{}, fmt.Errorf("parse task id %q: %w", s, ErrBadTaskID)
	}
	f := strings.Split(rest, ":")
	var boot string
	if len(f) == 3 || len(f) == 5 {
		boot, f = f[len(f)-1], f[:len(f)-1]
		if !host.IsBootID(boot) {
			return taskID{}, fmt.Errorf("parse task id %q: %w", s, ErrBadTaskID)
		}
	}
	if len(f) != 2 && len(f) != 4 {
		return taskID{}, fmt.Errorf("parse task id %q: %w", s, ErrBadTaskID)
	}
	pid, err1 := parseCanonicalUint(f[0], 31)
	start, err2 := parseCanonicalUint(f[1], 64)
	// pid 1 is never a task's: a task's process is a child of the provider's. Named, Cancel's
	// kill of the task's process group would be kill(-1), every process it may signal.
	if err1 != nil || err2 != nil || pid < 2 {
		return taskID{}, fmt.Errorf("parse task id %q: %w", s, ErrBadTaskID)
	}
	t := taskID{pid: int(pid), start: start, boot: boot}
	if len(f) == 4 {
		init, err1 := parseCanonicalUint(f[2], 31)
		initStart, err2 := parseCanonicalUint(f[3], 64)
		if err1 != nil || err2 != nil || init < 2 {
			return taskID{}, fmt.Errorf("parse task id %q: %w", s, ErrBadTaskID)
		}
		t.init, t.initStart = int(init), initStart
	}
	return t, nil
}

// parseCanonicalUint accepts only the canonical decimal form of an unsigned integer.
func parseCanonicalUint(s string, bits int) (uint64, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, strconv.ErrSyntax
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, strconv.ErrSyntax
		}
	}
	return strconv.ParseUint(s, 10, bits)
}

// procStat is the part of /proc/<pid>/stat this package needs.
type procStat struct {
	ppid, pgrp, session int
	start               uint64
}

// readProcStat reads /proc/<pid>/stat.
func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(b)
}

// parseProcStat parses a /proc/<pid>/stat line. The command name (field 2) is in
// parentheses and may itself contain spaces and parentheses, so the fields are counted
// from the last ')'.
func parseProcStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, errors.New("parse proc stat: no command name")
	}
	// Fields after the name start at field 3 (state).
	f := strings.Fields(string(b[i+1:]))
	const (
		ppidField    = 4
		pgrpField    = 5
		sessionField = 6
		startField   = 22
	)
	if len(f) < startField-2 {
		return procStat{}, fmt.Errorf("parse proc stat: %d fields, want at least %d", len(f)+2, startField)
	}
	field := func(n int) string { return f[n-3] }
	var st procStat
	var err error
	var v uint64
	if v, err = strconv.ParseUint(field(ppidField), 10, 31); err != nil {
		return procStat{}, fmt.Errorf("parse proc stat: ppid: %w", err)
	}
	st.ppid = int(v)
	if v, err = strconv.ParseUint(field(pgrpField), 10, 31); err != nil {
		return procStat{}, fmt.Errorf("parse proc stat: pgrp: %w", err)
	}
	st.pgrp = int(v)
	if v, err = strconv.ParseUint(field(sessionField), 10, 31); err != nil {
		return procStat{}, fmt.Errorf("parse proc stat: session: %w", err)
	}
	st.session = int(v)
	if st.start, err = strconv.ParseUint(field(startField), 10, 64); err != nil {
		return procStat{}, fmt.Errorf("parse proc stat: start time: %w", err)
	}
	return st, nil
}
