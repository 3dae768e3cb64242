package local

import (
	"math"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeOnExecAll marks every descriptor of this process from 3 up close-on-exec.
//
// os/exec passes a child only what it is given, but it closes nothing else: a descriptor
// this process inherited without FD_CLOEXEC (from a shell, a service manager, cgo code)
// would reach the sandbox through bwrap, which does not close descriptors either. The
// files a spec passes are unaffected: the child gets them by dup2, which clears the flag
// on the copy.
func closeOnExecAll() {
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return
	}
	// Kernels before 5.11 lack CLOSE_RANGE_CLOEXEC.
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
			_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC)
		}
	}
}
