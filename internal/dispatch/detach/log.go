package detach

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// LogFile, in the dispatch state directory (AGORA_HOME/dispatches), is the stderr of every
// detached supervisor this home starts, cold or standby. A detached supervisor has no
// terminal and outlives the process that started it; what it can only say on stderr (a
// supervisor whose leader fence closed leaving the dispatch's end to the next leader; a
// reap that must retry; a crash) was lost on /dev/null. It cannot go to agora.db or the
// dispatch's own logs: a fenced supervisor commits nothing, and the dispatch's stdout.log and
// stderr.log are the sandbox's output, stored with its result (and a local stage is removed).
// Serve's own log is no place either: serve stops when it loses the lease, the very event
// that fences its children. So they append here, beside the other files of the home's
// supervisors (.warm, .uids). What a supervisor writes to stderr is what serve and the CLI
// write to theirs for a dispatch run in process (no secret: the sandbox's output goes to its
// redacted logs, never here); the file is 0600 like the rest of the home.
const LogFile = "supervisors.log"

// logKeep bounds the file: one opened past it is first moved to LogFile+".1" (the one older
// generation kept), so a home that runs for years does not fill its disk with warnings.
const logKeep = 4 << 20

// logMu serialises this process's rotations (serve starts many supervisors); another
// process rotating at the same instant at worst loses the older generation.
var logMu sync.Mutex

// supervisorStderr opens the stderr of a detached supervisor: LogFile in stateDir, appended,
// or /dev/null when stateDir is "" or the log cannot be opened (a dispatch is never refused
// for its log; the second result says why it fell back, for the caller's own log).
func supervisorStderr(stateDir string) (*os.File, error) {
	f, err := openSupervisorLog(stateDir)
	if f != nil {
		return f, nil
	}
	null, nerr := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if nerr != nil {
		return nil, nerr
	}
	return null, err
}

func openSupervisorLog(stateDir string) (*os.File, error) {
	if stateDir == "" {
		return nil, nil
	}
	path := filepath.Join(stateDir, LogFile)
	logMu.Lock()
	defer logMu.Unlock()
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() && fi.Size() > logKeep {
		_ = os.Rename(path, path+".1")
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("supervisors' log: %w", err)
	}
	// O_NOFOLLOW and a regular file only, as the dispatches' own logs (logsink.go): no link
	// planted in the home redirects a supervisor's lines elsewhere; O_NONBLOCK so a FIFO
	// planted there is refused below instead of blocking the open (resident.log would hang
	// the same way).
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("supervisors' log: %w", err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("supervisors' log %s: not a regular file", path)
	}
	return f, nil
}
