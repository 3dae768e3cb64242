package agoratest

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// LandlockEnv, in a test binary's environment, makes [LandlockExec] (called first thing by
// RunWithBinary) confine the process with Landlock and exec its arguments: the program then
// reads files only beneath the directories the variable lists (colon-separated), as an
// agent CLI's tool command confined by Landlock does. Writes are not restricted.
const LandlockEnv = "AGORATEST_LANDLOCK_READ"

// LandlockCommand is a command that runs name with args in environment env, confined by
// Landlock to reading beneath dirs: this test binary again, as the launcher (its TestMain
// calls RunWithBinary or LandlockExec first).
func LandlockCommand(dirs, env []string, name string, args ...string) *exec.Cmd {
	self, err := os.Executable()
	if err != nil {
		panic(err)
	}
	cmd := exec.Command(self, append([]string{name}, args...)...)
	cmd.Env = append(slices.Clone(env), LandlockEnv+"="+strings.Join(dirs, ":"))
	return cmd
}

// LandlockAvailable says why Landlock cannot confine a process here, or "".
func LandlockAvailable() string {
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return fmt.Sprintf("Landlock is not available in this kernel: %v", errno)
	}
	if abi < 1 {
		return "Landlock reports no ABI version"
	}
	return ""
}

// LandlockExec is the launcher's side of [LandlockCommand]: with LandlockEnv set it confines
// this process and execs os.Args[1:] (the variable removed), and never returns; it exits 125
// with the reason when it cannot. Without the variable it returns at once.
func LandlockExec() {
	dirs, ok := os.LookupEnv(LandlockEnv)
	if !ok {
		return
	}
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "landlock launcher: "+format+"\n", args...)
		os.Exit(125)
	}
	if len(os.Args) < 2 {
		fail("no program to run")
	}
	path, err := exec.LookPath(os.Args[1])
	if err != nil {
		fail("%v", err)
	}
	// The domain is the calling thread's: the exec below is made from it.
	runtime.LockOSThread()
	const read = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	attr := unix.LandlockRulesetAttr{Access_fs: read}
	rfd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), 8, 0)
	if errno != 0 {
		fail("landlock_create_ruleset: %v", errno)
	}
	for _, d := range strings.Split(dirs, ":") {
		if d == "" {
			continue
		}
		fd, err := unix.Open(d, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			fail("open %s: %v", d, err)
		}
		rule := unix.LandlockPathBeneathAttr{Allowed_access: read, Parent_fd: int32(fd)}
		if _, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, rfd, unix.LANDLOCK_RULE_PATH_BENEATH,
			uintptr(unsafe.Pointer(&rule)), 0, 0, 0); errno != 0 {
			fail("landlock_add_rule %s: %v", d, errno)
		}
		unix.Close(fd)
	}
	// As root with CAP_SYS_ADMIN no no_new_privs is needed: the confined process's other
	// attributes stay its parent's, so only Landlock tells it apart.
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, rfd, 0, 0); errno != 0 {
		fail("landlock_restrict_self: %v", errno)
	}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, LandlockEnv+"=") {
			env = append(env, kv)
		}
	}
	err = syscall.Exec(path, os.Args[1:], env)
	fail("exec %s: %v", path, err)
}
