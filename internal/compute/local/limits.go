package local

import (
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
)

// Defaults for zero fields of [compute.Limits].
const (
	DefaultMaxProcs = 256
	DefaultFileSize = 1 << 30 // 1 GiB
	DefaultMemory   = 4 << 30 // 4 GiB
)

// MaxOpenFiles is every sandbox process's RLIMIT_NOFILE, soft and hard alike. A process
// otherwise inherits the host's hard limit (often a million) and may raise its soft limit to
// it, and every descriptor can be a connection to the dispatch's gateway, whose cost the
// host-side supervisor bears. 4096 is four times the usual soft default: git, a language
// server or node (claude) run well under it, and the worker's Go runtime raises its own soft
// limit to it.
const MaxOpenFiles = 4096

// limits are the resolved, positive values of [compute.Limits], and the open files limit.
type limits struct {
	nproc, fsize, as, nofile uint64
}

func resolveLimits(l compute.Limits) limits {
	r := limits{nproc: DefaultMaxProcs, fsize: DefaultFileSize, as: DefaultMemory, nofile: openFiles()}
	if l.MaxProcs > 0 {
		r.nproc = uint64(l.MaxProcs)
	}
	if l.FileSize > 0 {
		r.fsize = uint64(l.FileSize)
	}
	if l.Memory > 0 {
		r.as = uint64(l.Memory)
	}
	return r
}

// openFiles is MaxOpenFiles, or this process's hard RLIMIT_NOFILE when that is lower (the
// sandbox inherits it): only a privileged process may raise a hard limit, and prlimit would
// otherwise refuse to start the sandbox.
func openFiles() uint64 {
	var cur unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &cur); err == nil && cur.Max < MaxOpenFiles {
		return cur.Max
	}
	return MaxOpenFiles
}

// rlimitSet lists the rlimits applied to every sandbox, soft and hard alike, so the
// sandbox cannot raise them. RLIMIT_CORE is 0: a core dump could hold secrets read from
// the inherited files. RLIMIT_NOFILE is openFiles whatever the spec says.
func (l limits) rlimitSet() []struct {
	resource int
	name     string
	value    uint64
} {
	return []struct {
		resource int
		name     string
		value    uint64
	}{
		{unix.RLIMIT_NPROC, "nproc", l.nproc},
		{unix.RLIMIT_FSIZE, "fsize", l.fsize},
		{unix.RLIMIT_AS, "as", l.as},
		{unix.RLIMIT_CORE, "core", 0},
		{unix.RLIMIT_NOFILE, "nofile", l.nofile},
	}
}

// applyRlimits sets the limits on the process pid with prlimit(2). The caller MUST make
// sure pid cannot fork or exec anything that matters before this returns (bwrap's
// --block-fd holds the sandbox for exactly that).
func applyRlimits(pid int, l limits) error {
	for _, r := range l.rlimitSet() {
		lim := unix.Rlimit{Cur: r.value, Max: r.value}
		if err := unix.Prlimit(pid, r.resource, &lim, nil); err != nil {
			return fmt.Errorf("set rlimit %s on pid %d: %w", r.name, pid, err)
		}
	}
	return nil
}

// prlimitArgv wraps argv in prlimit(1), which sets the limits on itself and then execs
// argv, so the command never runs without them.
func prlimitArgv(prlimit string, l limits, argv []string) []string {
	out := []string{prlimit}
	for _, r := range l.rlimitSet() {
		out = append(out, "--"+r.name+"="+strconv.FormatUint(r.value, 10))
	}
	out = append(out, "--")
	return append(out, argv...)
}
