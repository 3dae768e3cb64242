package local

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/agora-dev/agora/internal/compute"
)

// ErrNoSandbox means a spec asked for bubblewrap and it is not installed (or not usable)
// here. The provider refuses rather than run the worker unisolated; running without a
// sandbox needs Sandbox "none" explicitly.
var ErrNoSandbox = errors.New("no sandbox: bubblewrap (bwrap) is not available; " +
	"install it with `apt-get install bubblewrap` (Debian/Ubuntu), " +
	"`dnf install bubblewrap` (Fedora/RHEL) or `pacman -S bubblewrap` (Arch)")

// ErrNoPrlimit means prlimit(1) is needed (Sandbox "none") but missing, so the limits
// could not be applied; the provider refuses rather than run without them.
var ErrNoPrlimit = errors.New("prlimit(1) is not available to apply limits; " +
	"install it with `apt-get install util-linux`")

// ErrRunAsNotRoot means a spec set [compute.Spec.RunAs] but the provider does not run as
// root, so it cannot start anything as another host user. A provider that is not root runs
// sandboxes as its own unprivileged user, which the kernel's limits already bind.
var ErrRunAsNotRoot = errors.New("run as another host user: only a provider running as root can")

// Options configure a [Provider]. The zero value is usable.
type Options struct {
	// BwrapPath is the bubblewrap binary. Empty means "bwrap" looked up in PATH.
	BwrapPath string
	// PrlimitPath is prlimit(1) (util-linux), which applies the limits for Sandbox "none"
	// (bwrap sandboxes get theirs with prlimit(2), no exec). Empty means "prlimit" looked
	// up in PATH.
	PrlimitPath string
	// CgroupParent is the cgroup v2 directory under which each task gets its own cgroup.
	// Empty means the provider's own cgroup. memory.max and pids.max apply only when this
	// cgroup delegates the memory and pids controllers (its cgroup.subtree_control).
	CgroupParent string
	// NoCgroup disables task cgroups.
	NoCgroup bool
}

// Provider starts sandboxed processes on this machine. It is safe for concurrent use.
type Provider struct {
	bwrapName    string     // Options.BwrapPath, or "bwrap"
	bwrapMu      sync.Mutex // guards bwrap and bwrapErr
	bwrap        string     // bwrapName resolved, "" while it is missing
	bwrapErr     string     // why bwrap is "": the last lookup's error
	prlimit      string
	cgroupParent string
	system       []string
	netns        netnsPool // network namespaces made ahead of run-as starts
	mu           sync.Mutex
	live         map[string]*handle // guarded by mu: tasks started here and still running
}

var _ compute.Provider = (*Provider)(nil)

// New builds a provider. A missing bwrap is not an error here: Start refuses specs that
// need it with [ErrNoSandbox].
func New(opts Options) (*Provider, error) {
	p := &Provider{live: make(map[string]*handle), bwrapName: cmp.Or(opts.BwrapPath, "bwrap")}
	p.bwrapPath()
	prl := cmp.Or(opts.PrlimitPath, "prlimit")
	if path, err := exec.LookPath(prl); err == nil {
		// Resolved: what runs is the file itself, not a link to it.
		if real, err := filepath.EvalSymlinks(path); err == nil {
			p.prlimit = real
		}
	}
	switch {
	case opts.NoCgroup:
	case opts.CgroupParent != "":
		if err := checkPath(opts.CgroupParent); err != nil {
			return nil, fmt.Errorf("new local provider: cgroup parent: %v", err)
		}
		p.cgroupParent = opts.CgroupParent
	default:
		p.cgroupParent = detectCgroupParent()
	}
	p.system = systemOptions("/")
	return p, nil
}

// Start validates s and starts it. It returns once the command runs with its limits in
// place; the returned handle's Wait reports how it ended. Cancelling ctx kills the whole
// process tree.
func (p *Provider) Start(ctx context.Context, s compute.Spec) (compute.Handle, error) {
	if err := validateSpec(s); err != nil {
		return nil, fmt.Errorf("start %q: %w", s.ID, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start %q: %w", s.ID, err)
	}
	if s.RunAs != nil && os.Geteuid() != 0 {
		return nil, fmt.Errorf("start %q: %w", s.ID, ErrRunAsNotRoot)
	}
	var (
		h   *handle
		err error
	)
	if s.Sandbox == compute.SandboxNone {
		if p.prlimit == "" {
			return nil, fmt.Errorf("start %q: %w", s.ID, ErrNoPrlimit)
		}
		h, err = p.startNone(s)
	} else {
		if _, err = p.bwrapPath(); err != nil {
			return nil, fmt.Errorf("start %q: %w", s.ID, err)
		}
		h, err = p.startBwrap(ctx, s)
	}
	if err != nil {
		return nil, fmt.Errorf("start %q: %w", s.ID, err)
	}
	p.mu.Lock()
	p.live[h.TaskID()] = h
	p.mu.Unlock()
	go h.monitor(ctx, s.Limits.Timeout, func() {
		p.mu.Lock()
		delete(p.live, h.TaskID())
		p.mu.Unlock()
	})
	return h, nil
}

// bwrapPath is bubblewrap's path, or why there is none (wrapping [ErrNoSandbox]). While it
// is missing every call looks it up again: a provider that lives long (the resident
// dispatcher, serve) and was made before bubblewrap was installed finds it once it is.
func (p *Provider) bwrapPath() (string, error) {
	p.bwrapMu.Lock()
	defer p.bwrapMu.Unlock()
	if p.bwrap == "" {
		if path, err := exec.LookPath(p.bwrapName); err != nil {
			p.bwrapErr = fmt.Sprintf("bwrap %q: %v", p.bwrapName, err)
		} else {
			p.bwrap, p.bwrapErr = path, ""
		}
	}
	if p.bwrap == "" {
		return "", fmt.Errorf("%s: %w", p.bwrapErr, ErrNoSandbox)
	}
	return p.bwrap, nil
}

var (
	availableOnce sync.Once
	availableErr  error
)

// Available reports whether bubblewrap works on this machine: it runs
// `bwrap --unshare-all --ro-bind / / true` once and caches the answer. The error wraps
// [ErrNoSandbox].
func Available() error {
	availableOnce.Do(func() {
		path, err := exec.LookPath("bwrap")
		if err != nil {
			availableErr = fmt.Errorf("check sandbox: %w", ErrNoSandbox)
			return
		}
		cmd := exec.Command(path, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true")
		cmd.Env = []string{}
		if out, err := cmd.CombinedOutput(); err != nil {
			availableErr = fmt.Errorf("check sandbox: %s does not work here (%v: %.200s): %w", path, err, out, ErrNoSandbox)
		}
	})
	return availableErr
}
