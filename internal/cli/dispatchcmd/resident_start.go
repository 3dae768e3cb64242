package dispatchcmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/doctor"
	"github.com/agora-dev/agora/internal/home"
	"github.com/agora-dev/agora/internal/orch/service"
	"github.com/agora-dev/agora/internal/peercred"
)

// EnvNoResident, set to anything, keeps `agora dispatch run` from starting the resident
// dispatcher (a script or CI job that wants no process to outlive it; the tests, whose homes
// are removed as each ends). A resident that runs is still handed dispatches.
const EnvNoResident = "AGORA_NO_RESIDENT"

// fullName is the whole program (cmd/agora-full), beside the front (frontName).
const fullName = "agora-full"

// startResident starts this home's resident dispatcher in the background (resident.go)
// when this `agora dispatch run` supervises its dispatch itself because nothing of the home
// listens: the next `agora dispatch run` hands its dispatch to it. It never fails the
// dispatch: a resident that cannot start is a slower next dispatch, said in resident.log.
//
// Nothing starts when the dispatch could not have been handed off (--in-process, --actor, a
// trace, a relative --repo), when AGORA_NO_RESIDENT is set, when agora.yaml says resident:
// {idle: 0} or leader:, when serve
// or a resident answers already (one declined this CLI: another environment), or when this
// process is not the installed agora program (a test binary running the CLI in-process).
func startResident(ctx context.Context, opts *dispatchRunOptions) {
	f := opts.f
	if !handsOff(opts) || f.Getenv(envHandoffLost) != "" || f.Getenv(EnvNoResident) != "" {
		return
	}
	exe, err := os.Executable()
	if err != nil || filepath.Base(exe) != fullName {
		return
	}
	h, err := f.Home(ctx)
	if err != nil {
		return
	}
	idle, err := h.Config.Resident.IdleFor()
	if err != nil || idle == 0 || h.Config.Leader.Set() {
		return
	}
	dir, err := absHome(f)
	if err != nil {
		return
	}
	odir := filepath.Join(dir, home.OrchDir)
	if serveListens(filepath.Join(odir, home.OrchSocket)) || serveListens(filepath.Join(odir, residentSocket)) {
		return
	}
	// A resident no CLI could connect to would only exit (its Listen refuses the path);
	// doctor says why none runs.
	if service.CheckSocketPath(filepath.Join(odir, residentSocket)) != nil {
		return
	}
	if err := os.MkdirAll(odir, 0o700); err != nil {
		return
	}
	// Its log and its socket go only into an orch/ of this user's that no one else may
	// write: a CLI never uses a socket in any other (trustedSocket), and another user could
	// have put anything at resident.log there.
	if !ownPrivate(odir, os.ModeDir) {
		return
	}
	logf, err := openResidentLog(filepath.Join(odir, residentLog))
	if err != nil {
		return
	}
	defer logf.Close()
	cwd, err := os.Getwd()
	if err != nil {
		return
	}
	cmd := exec.Command(exe, "dispatch", "resident")
	// The environment it was started in is the one it serves (api.ResidentEnvDigest), less
	// what the front added to hand this command on. The directory is this one, so a relative
	// AGORA_HOME names the same home.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envNoHandoff+"=") && !strings.HasPrefix(kv, envHandoffLost+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Dir = cwd
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own session: the terminal's Ctrl-C and hang-up are this command's, not the
	// resident's, which outlives it by design.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(logf, "agora: start the resident dispatcher: %v\n", err)
		return
	}
	if f.IO.ErrTTY {
		// A person at a terminal is told a process outlives this command; a script's stderr
		// keeps the in-process path's lines exactly.
		fmt.Fprintf(f.IO.ErrOut, "agora: started the resident dispatcher (pid %d) for this home's next dispatches; it leaves after %s without one (docs/operations.md; stop it: agora dispatch resident --stop)\n", cmd.Process.Pid, idle)
	}
	cmd.Process.Release()
}

// openResidentLog opens the resident's log for appending, cut to nothing past
// residentLogCap; never through a symlink, and only a regular file: O_NONBLOCK, as a FIFO
// there would hold the opening `agora dispatch run` until someone read it.
func openResidentLog(path string) (*os.File, error) {
	logf, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := logf.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		logf.Close()
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Size() > residentLogCap {
		logf.Truncate(0)
	}
	return logf, nil
}

// stopResident makes this home's resident dispatcher leave by removing its socket (it leaves
// once its dispatches end) and waits until its process is gone.
func stopResident(ctx context.Context, f *cmdutil.Factory) error {
	dir, err := absHome(f)
	if err != nil {
		return err
	}
	odir := filepath.Join(dir, home.OrchDir)
	sock := filepath.Join(odir, residentSocket)
	if !trustedSocket(odir, sock) {
		fmt.Fprintln(f.IO.ErrOut, "agora: no resident dispatcher runs for this home")
		return nil
	}
	c, err := net.DialTimeout("unix", sock, handoffDial)
	if err != nil {
		os.Remove(sock) // a socket its resident left behind (killed)
		fmt.Fprintln(f.IO.ErrOut, "agora: no resident dispatcher runs for this home")
		return nil
	}
	cred, err := peercred.Of(c)
	c.Close()
	if err != nil || int(cred.Uid) != os.Getuid() || cred.Pid <= 0 {
		return fmt.Errorf("the resident dispatcher's socket %s is not held by a process of this user", sock)
	}
	// Only a resident dispatcher of this agora is stopped: another program listening there
	// keeps its socket, and --stop does not wait for it to exit, which it never
	// would. A resident of a replaced agora binary leaves by itself within a second.
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("stop the resident dispatcher: %w", err)
	}
	if why := peerNotAgora(cred.Pid, exe, "dispatch", "resident"); why != "" {
		return fmt.Errorf("%s is held by process %d, not by a resident dispatcher of this agora (%s): nothing was stopped", sock, cred.Pid, strings.TrimPrefix(why, "the peer "))
	}
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("stop the resident dispatcher: %w", err)
	}
	fmt.Fprintf(f.IO.ErrOut, "agora: the resident dispatcher (pid %d) is leaving once its dispatches end\n", cred.Pid)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for syscall.Kill(int(cred.Pid), 0) == nil {
		select {
		case <-ctx.Done():
			return cmdutil.Interrupted("the resident dispatcher (pid %d) leaves once its dispatches end", cred.Pid)
		case <-t.C:
		}
	}
	fmt.Fprintln(f.IO.ErrOut, "agora: the resident dispatcher stopped")
	return nil
}

// ResidentCheck is doctor's row for the resident dispatcher: what runs, or what will. It is
// never missing: a home without one dispatches in-process.
func ResidentCheck(f *cmdutil.Factory, c *config.Config) doctor.Check {
	ch := doctor.Check{Name: "resident-dispatcher", Status: doctor.StatusOK}
	idle, err := c.Resident.IdleFor()
	switch {
	case err != nil:
		ch.Detail = err.Error()
		return ch
	case c.Leader.Set():
		ch.Detail = "none: this home has leader: (agora orch serve is its dispatcher)"
		return ch
	}
	dir, err := absHome(f)
	if err != nil {
		ch.Detail = err.Error()
		return ch
	}
	sock := filepath.Join(dir, home.OrchDir, residentSocket)
	if serveListens(sock) {
		c, err := net.DialTimeout("unix", sock, handoffDial)
		if err == nil {
			cred, cerr := peercred.Of(c)
			c.Close()
			if cerr == nil {
				ch.Detail = fmt.Sprintf("running (pid %d, leaves after %s with no dispatch; stop it with 'agora dispatch resident --stop')", cred.Pid, idle)
				return ch
			}
		}
	}
	if idle == 0 {
		ch.Detail = "off (resident: {idle: 0} in agora.yaml): every 'agora dispatch run' with no serve supervises its dispatch itself"
		return ch
	}
	if err := service.CheckSocketPath(sock); err != nil {
		ch.Detail = "none: " + err.Error() + "; every 'agora dispatch run' with no serve supervises its dispatch itself"
		return ch
	}
	ch.Detail = "not running: the next 'agora dispatch run' with no serve starts it"
	return ch
}
