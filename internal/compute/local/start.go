package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
)

const (
	// pipeDrainDelay bounds how long Wait keeps copying output after the process tree is
	// gone, in case something outside the tree still holds the pipes.
	pipeDrainDelay = 5 * time.Second
	// setupTimeout bounds bwrap's own setup (namespaces, mounts) before the command runs.
	setupTimeout = 30 * time.Second
	// maxInfoSize caps what is read from bwrap's --info-fd.
	maxInfoSize = 64 << 10
)

// errGone means the blocked sandbox process died during setup; bwrap then exits with its
// own message and status, which Wait reports.
var errGone = errors.New("sandbox process is gone")

// startBwrap starts bwrap and makes sure the command never runs without its limits:
// bwrap gets --block-fd, builds the whole sandbox, then waits. The provider reads the
// sandbox process's pid from --info-fd, applies the rlimits to it with prlimit(2), and only
// then releases it to exec the command, which inherits them (startBlocked). No process is
// exec'd for the limits. With [compute.Spec.RunAs] the sandbox belongs to another host
// user, and the start runs on a thread of its own (startBwrapAs), whose real ids are the
// sandbox user's for the prlimit(2) call.
//
// The limits are set inside the sandbox's user namespace, so RLIMIT_NPROC counts the
// sandbox's processes only, and soft and hard alike: the sandbox, without CAP_SYS_RESOURCE
// in the host's user namespace, cannot raise them.
func (p *Provider) startBwrap(ctx context.Context, s compute.Spec) (*handle, error) {
	l := resolveLimits(s.Limits)
	if s.RunAs != nil {
		return p.startBwrapAs(ctx, s, l)
	}
	return p.startBlocked(ctx, s, l, stagedSystem{})
}

// startBlocked starts bwrap with --info-fd and --block-fd, applies l to the sandbox process
// with prlimit(2) while it waits, and then releases it. With s.RunAs the caller MUST be on
// a locked OS thread (asRealUser).
func (p *Provider) startBlocked(ctx context.Context, s compute.Spec, l limits, staged stagedSystem) (*handle, error) {
	h, blockW, err := p.startHeld(ctx, s, l, nil, staged)
	if err != nil {
		return nil, err
	}
	defer blockW.Close()
	if err := release(blockW); err != nil {
		h.abort()
		return nil, fmt.Errorf("set up sandbox: %w", err)
	}
	return h, nil
}

// startHeld starts bwrap as startBlocked does but leaves the sandbox held on --block-fd:
// its command runs once the caller writes to blockW ([release]). A warm slot stays held
// until it is claimed. extra, when set, redirects the command's output to the given files
// (the slot's own pipes) instead of s.Stdout and s.Stderr. staged is the /etc and /dev laid
// out in the caller's private mount namespace, if any ([stageSystem]).
func (p *Provider) startHeld(ctx context.Context, s compute.Spec, l limits, out []*os.File, staged stagedSystem) (*handle, *os.File, error) {
	fds := newFDLayout(len(s.Files))
	argsFile, err := memFile("agora-bwrap-args", encodeArgs(bwrapOptions(s, p.system, staged, fds, true)))
	if err != nil {
		return nil, nil, err
	}
	defer argsFile.Close()
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("create info pipe: %w", err)
	}
	defer infoR.Close()
	defer infoW.Close()
	blockR, blockW, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("create block pipe: %w", err)
	}
	defer blockR.Close()
	extra := append(append([]*os.File{}, s.Files...), argsFile, infoW, blockR)
	bwrap, err := p.bwrapPath()
	if err != nil {
		blockW.Close()
		return nil, nil, err
	}
	cg, err := p.makeCgroup(s.ID, l)
	if err != nil {
		blockW.Close()
		return nil, nil, err
	}
	cmd := p.command(bwrapArgv(bwrap, fds, s.Argv), []string{}, "/", s, cg)
	if out != nil {
		cmd.Stdout, cmd.Stderr = out[0], out[1]
	}
	cmd.ExtraFiles = extra
	h, err := p.launch(cmd, cg, p.isolation(s, cg), s.RunAs != nil)
	if err != nil {
		blockW.Close()
		return nil, nil, err
	}
	// Only bwrap holds the other ends now, so EOF on infoR means bwrap is done writing.
	for _, f := range extra[len(s.Files):] {
		_ = f.Close()
	}
	var initStart uint64
	h.sandboxPID, initStart, err = limitSandbox(ctx, infoR, h.pid, l, s.RunAs)
	if err == nil {
		// The task's name carries the sandbox's first process before anyone reads it.
		h.id = taskID{pid: h.pid, start: h.start, init: h.sandboxPID, initStart: initStart, boot: currentBoot()}.String()
	}
	if err == nil || errors.Is(err, errGone) {
		// If the sandbox or bwrap is gone, no command can run: releasing it lets Wait
		// report bwrap's status; bwrap's message is on the spec's Stderr.
		return h, blockW, nil
	}
	// The sandbox still waits on --block-fd, and an EOF on it is a release: closing blockW
	// first let the command run without the limits just refused, until the kill below
	// reached it. So the sandbox dies first (its own pid when known; bwrap's process group,
	// and the cgroup, which it is in until the release), and only then is blockW closed.
	if h.sandboxPID > 0 {
		_ = unix.Kill(h.sandboxPID, unix.SIGKILL)
	}
	h.abort()
	blockW.Close()
	return nil, nil, fmt.Errorf("set up sandbox: %w", err)
}

// release lets a held sandbox run its command.
func release(blockW *os.File) error {
	_, err := blockW.Write([]byte{0})
	if err == nil || errors.Is(err, syscall.EPIPE) {
		return nil
	}
	return fmt.Errorf("release sandbox: %w", err)
}

// limitSandbox reads the pid of bwrap's sandbox process from the info pipe and applies the
// rlimits to it while it waits on --block-fd. It returns that pid and its start time.
func limitSandbox(ctx context.Context, info *os.File, bwrapPID int, l limits, runAs *compute.HostUser) (int, uint64, error) {
	deadline := time.Now().Add(setupTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = info.SetReadDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = info.SetReadDeadline(time.Now()) })
	defer stop()
	b, err := io.ReadAll(io.LimitReader(info, maxInfoSize))
	if err != nil {
		return 0, 0, fmt.Errorf("read bwrap info: %w", err)
	}
	var msg struct {
		ChildPID int `json:"child-pid"`
	}
	if err := json.Unmarshal(b, &msg); err != nil || msg.ChildPID <= 0 {
		return 0, 0, errors.New("bwrap exited before creating the sandbox (its message is on stderr)")
	}
	// The sandbox process is bwrap's only child: check the pid still names it.
	st, err := readProcStat(msg.ChildPID)
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, errGone
	}
	if err != nil {
		return 0, 0, fmt.Errorf("inspect sandbox pid %d: %w", msg.ChildPID, err)
	}
	if st.ppid != bwrapPID {
		return 0, 0, fmt.Errorf("sandbox pid %d has parent %d, want bwrap %d", msg.ChildPID, st.ppid, bwrapPID)
	}
	apply := func() error { return applyRlimits(msg.ChildPID, l) }
	if runAs != nil {
		// prlimit(2) on another user's process needs the caller's real ids to be its own
		// (or CAP_SYS_RESOURCE).
		inner := apply
		apply = func() error { return asRealUser(runAs, inner) }
	}
	if err := apply(); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return 0, 0, errGone
		}
		return msg.ChildPID, 0, err // still held: the caller kills it before it lets go of --block-fd
	}
	return msg.ChildPID, st.start, nil
}

func (p *Provider) startNone(s compute.Spec) (*handle, error) {
	l := resolveLimits(s.Limits)
	cg, err := p.makeCgroup(s.ID, l)
	if err != nil {
		return nil, err
	}
	cmd := p.command(prlimitArgv(p.prlimit, l, s.Argv), sandboxEnv(s), workDir(s), s, cg)
	cmd.ExtraFiles = append([]*os.File{}, s.Files...)
	return p.launch(cmd, cg, p.isolation(s, cg), false)
}

func (p *Provider) makeCgroup(id string, l limits) (*cgroup, error) {
	if p.cgroupParent == "" {
		return nil, nil
	}
	return newCgroup(p.cgroupParent, id, l)
}

// isolation names what applies to a task; see the package doc for the tokens.
func (p *Provider) isolation(s compute.Spec, cg *cgroup) string {
	if s.Sandbox == compute.SandboxNone {
		return compute.SandboxNone
	}
	t := []string{compute.SandboxBwrap, "rlimits"}
	if s.RunAs != nil {
		t = append(t, "runas")
	}
	if cg != nil {
		t = append(t, "cgroup")
		if cg.memoryMax {
			t = append(t, "memory.max")
		}
		if cg.pidsMax {
			t = append(t, "pids.max")
		}
	}
	if cg == nil || !cg.memoryMax {
		// RLIMIT_AS binds each process, not the sandbox: n processes may hold n times it.
		t = append(t, "memory-per-process")
	}
	// RunAs is never uid 0 (validateSpec), and a root provider without it leaves the
	// sandbox's processes owned by host root, for whom the kernel skips RLIMIT_NPROC.
	if s.RunAs == nil && os.Getuid() == 0 && (cg == nil || !cg.pidsMax) {
		t = append(t, "nproc-unenforced")
	}
	return strings.Join(t, "+")
}

// command builds the exec.Cmd for argv. The process leads its own session, so its pid is
// also its process group id, and dies with the provider's thread (Pdeathsig).
func (p *Provider) command(argv, env []string, dir string, s compute.Spec, cg *cgroup) *exec.Cmd {
	cmd := &exec.Cmd{
		Path:      argv[0],
		Args:      argv,
		Env:       env,
		Dir:       dir,
		Stdout:    s.Stdout,
		Stderr:    s.Stderr,
		WaitDelay: pipeDrainDelay,
	}
	attr := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if cg != nil {
		attr.UseCgroupFD = true
		attr.CgroupFD = int(cg.fd.Fd())
	}
	if u := s.RunAs; u != nil {
		attr.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: []uint32{}}
	}
	cmd.SysProcAttr = attr
	return cmd
}

// launch starts cmd and wraps it in a handle. On failure nothing is left behind. A run-as
// start (ownThread) forks it from the caller's thread, which is locked and lives as long as
// the task; any other from the spawner's (spawn.go).
func (p *Provider) launch(cmd *exec.Cmd, cg *cgroup, isolation string, ownThread bool) (*handle, error) {
	closeOnExecAll()
	started := time.Now()
	start := cmd.Start
	if !ownThread {
		start = func() error { return startOnSpawner(cmd) }
	}
	if err := start(); err != nil {
		if cg != nil {
			cg.remove()
		}
		return nil, fmt.Errorf("exec %s: %w", cmd.Path, err)
	}
	if cg != nil {
		cg.closeFD()
	}
	h := &handle{
		cmd:       cmd,
		pid:       cmd.Process.Pid,
		cg:        cg,
		isolation: isolation,
		started:   started,
		cancelReq: make(chan struct{}),
		done:      make(chan struct{}),
	}
	// The process is our unreaped child, so its /proc entry exists.
	st, err := readProcStat(h.pid)
	if err != nil {
		h.abort()
		return nil, fmt.Errorf("read start time of pid %d: %w", h.pid, err)
	}
	h.start = st.start
	h.id = taskID{pid: h.pid, start: st.start, boot: currentBoot()}.String()
	return h, nil
}

// memFile returns an anonymous in-memory file holding b, positioned at its start.
func memFile(name string, b []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("write %s: %w", name, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("rewind %s: %w", name, err)
	}
	return f, nil
}
