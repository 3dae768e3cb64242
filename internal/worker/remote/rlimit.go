package remote

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// ApplyRlimits sets, on the worker itself, the limits the pod's [remote.RlimitsEnv] names
// (the defaults when it is unset), soft and hard alike, and RLIMIT_CORE 0, then takes the
// variable out of the environment. Every process of the agent inherits them and cannot raise
// a hard limit back. It MUST run before anything of the agent starts; the worker itself is
// counted too, as under the local provider's prlimit.
//
// A limit is only ever lowered: a hard limit already below the one asked for is kept, since
// raising it needs CAP_SYS_RESOURCE. A malformed variable fails: a limit misread would be a
// limit not applied.
func ApplyRlimits() error {
	r := remote.Rlimits{}
	if v, ok := os.LookupEnv(remote.RlimitsEnv); ok {
		var err error
		if r, err = remote.ParseRlimits(v); err != nil {
			return err
		}
	}
	r = r.WithDefaults()
	for _, l := range []struct {
		resource int
		name     string
		value    uint64
	}{
		{unix.RLIMIT_NPROC, "nproc", r.Nproc},
		{unix.RLIMIT_FSIZE, "fsize", r.Fsize},
		{unix.RLIMIT_NOFILE, "nofile", r.Nofile},
		{unix.RLIMIT_CORE, "core", 0},
	} {
		if err := lowerRlimit(l.resource, l.value); err != nil {
			return fmt.Errorf("set rlimit %s to %d: %w", l.name, l.value, err)
		}
	}
	return os.Unsetenv(remote.RlimitsEnv)
}

// lowerRlimit sets resource's soft and hard limits to v, or to the current hard limit when
// that is lower. It goes through package syscall, whose Setrlimit also stops os/exec from
// restoring the soft RLIMIT_NOFILE the process started with in its children.
func lowerRlimit(resource int, v uint64) error {
	var cur syscall.Rlimit
	if err := syscall.Getrlimit(resource, &cur); err != nil {
		return err
	}
	v = min(v, cur.Max)
	return syscall.Setrlimit(resource, &syscall.Rlimit{Cur: v, Max: v})
}
