// Package doctor checks what this host can enforce for agora's sandboxes and says how to get
// the rest: bubblewrap and user namespaces, prlimit, running as root or not, the sandbox uid,
// cgroup v2 delegation, the tmpfs disk quota, git. Each [Check] is ok or missing and, when
// missing, names the command or setting that fixes it.
//
// doctor runs on the host side, as the user who runs agora. It changes nothing that lasts: it
// starts one sandbox running `true` and, as root, mounts and at once unmounts a 1 MiB tmpfs.
// It never opens AGORA_HOME beyond the configuration it is handed.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/local"
	"github.com/agora-dev/agora/internal/compute/warm"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/runtimebin"
	"github.com/agora-dev/agora/internal/workerbin"
)

// Statuses of a [Check].
const (
	StatusOK      = "ok"
	StatusMissing = "missing"
)

// Check is one thing the host can or cannot do.
type Check struct {
	// Name is a stable identifier: bwrap, prlimit, user-namespaces, privileges,
	// sandbox-uid, cgroup-v2, disk-quota, agora-binary, git, config, runtime-NAME for
	// each host-installed agent CLI (runtime-claude-code, runtime-codex), engine-TARGET
	// for each docker or kubernetes target, and resident-dispatcher (whether the home's
	// resident dispatcher runs; never missing).
	Name string `json:"name"`
	// Status is ok or missing.
	Status string `json:"status"`
	// Detail says what was found.
	Detail string `json:"detail"`
	// Fix, when missing, is the command or setting that gets it.
	Fix string `json:"fix,omitempty"`
	// Required is set when no dispatch can run without it.
	Required bool `json:"required"`
}

// Report is every check, in a fixed order.
type Report struct {
	Checks []Check `json:"checks"`
	// CanDispatch is false when a required check is missing: no dispatch can run here.
	CanDispatch bool `json:"can_dispatch"`
}

// Host is what the checks look at. [System] returns the real one; tests fake its fields.
type Host struct {
	Euid     func() int
	LookPath func(file string) (string, error)
	// Resolve follows symlinks (filepath.EvalSymlinks).
	Resolve func(path string) (string, error)
	// Output runs argv (no shell) and returns its combined output.
	Output func(ctx context.Context, argv ...string) ([]byte, error)
	// ReadFile reads a small system file (/etc/passwd, /etc/group).
	ReadFile func(path string) ([]byte, error)
	// Sandbox starts `true` in a sandbox the way a dispatch does (as runAs when set) and
	// returns the isolation that applied.
	Sandbox func(ctx context.Context, runAs *compute.HostUser) (string, error)
	// Cgroup reports this process's cgroup v2 support.
	Cgroup func() local.CgroupProbe
	// MountTmpfs mounts a 1 MiB tmpfs and unmounts it again.
	MountTmpfs func() error
	// Executable is the running agora binary; Stat stats a path.
	Executable func() (string, error)
	Stat       func(path string) (fs.FileInfo, error)
	// RuntimeBinary resolves a host runtime's agent CLI (runtimebin.Resolve); nil skips the
	// runtime checks.
	RuntimeBinary func(ctx context.Context, runtime, configured string) (runtimebin.Binary, error)
	// WorkerBinary finds and checks the worker program a dispatch binds (configured is
	// AGORA_WORKER_BINARY or worker.binary, "" for beside agora); nil skips the check.
	WorkerBinary func(configured string) (workerbin.Binary, error)
	// ExecWorkerBinary finds and checks the exec-only worker beside worker
	// (workerbin.InspectBeside); an error wrapping fs.ErrNotExist: none is installed. nil
	// skips the check.
	ExecWorkerBinary func(worker workerbin.Binary) (workerbin.Binary, error)
	// AgentSandbox asks a kubernetes target's cluster whether it serves agent-sandbox's
	// Sandboxes and how many of agora's are there (an error wrapping [ErrNoAgentSandbox] when
	// the CRD is missing); nil skips the check.
	AgentSandbox func(ctx context.Context, t config.Target) (int, error)
	// Engine asks a docker target's engine or a kubernetes target's cluster whether a
	// dispatch could start there and says what answered; nil skips the check.
	Engine func(ctx context.Context, t config.Target) (string, error)
}

// Options are what the checks are about.
type Options struct {
	// Config is agora.yaml as loaded; nil with ConfigErr when it does not load.
	Config    *config.Config
	ConfigErr error
	// WorkerBinary is the worker program the person running agora named
	// (AGORA_WORKER_BINARY, else worker.binary), "" for agora-worker beside agora.
	WorkerBinary string
	// WarmHolders are the living serves that hold warm slots of this home, as their status
	// files say; WarmErr why they could not be read.
	WarmHolders []WarmHolder
	WarmErr     error
	// Buckets are the S3 buckets agora.yaml names, each probed with one request.
	Buckets []Bucket
	// Replication is each replicated database's last published position.
	Replication []Replication
}

// WarmHolder is one serve holding warm slots: its pid and its numbers per target.
type WarmHolder struct {
	PID    int
	Counts []warm.Counts
}

// Run performs every check.
func Run(ctx context.Context, h Host, o Options) Report {
	r := &run{ctx: ctx, h: h, root: h.Euid() == 0}
	r.targets(o)
	r.config(o)
	r.warm(o)
	r.agentSandbox(o)
	r.engines(o)
	r.bwrap()
	r.prlimit()
	r.userNamespaces()
	r.privileges()
	r.sandboxUID()
	r.cgroup()
	r.diskQuota()
	r.agoraBinary()
	r.workerBinary(o)
	r.git()
	r.runtimes(o)
	r.buckets(o)
	r.replication(o)
	rep := Report{Checks: r.checks, CanDispatch: true}
	for _, c := range r.checks {
		if c.Required && c.Status != StatusOK {
			rep.CanDispatch = false
		}
	}
	return rep
}

type run struct {
	ctx    context.Context
	h      Host
	root   bool
	checks []Check
	// sandboxed are the targets that use bwrap, by name; uids their sandbox uids;
	// unsandboxed the `sandbox: none` ones.
	sandboxed   []string
	unsandboxed []string
	uids        map[uint32][]string
	bwrapPath   string
}

func (r *run) ok(name, detail string, required bool) {
	r.checks = append(r.checks, Check{Name: name, Status: StatusOK, Detail: detail, Required: required})
}

func (r *run) missing(name, detail, fix string, required bool) {
	r.checks = append(r.checks, Check{Name: name, Status: StatusMissing, Detail: detail, Fix: fix, Required: required})
}

func (r *run) targets(o Options) {
	c := o.Config
	if c == nil {
		c = config.Default("")
	}
	r.uids = map[uint32][]string{}
	for name, t := range c.Targets {
		if t.Sandbox == compute.SandboxNone {
			r.unsandboxed = append(r.unsandboxed, name)
			continue
		}
		r.sandboxed = append(r.sandboxed, name)
		r.uids[uint32(t.SandboxUID)] = append(r.uids[uint32(t.SandboxUID)], name)
	}
	sort.Strings(r.sandboxed)
	sort.Strings(r.unsandboxed)
	for _, names := range r.uids {
		sort.Strings(names)
	}
}

// warm says, for each target that asks for warm slots, how many a running serve holds ready
// ("local: warm 1/2 ready ... held by orch serve pid N"), or that no serve holds them, so its
// dispatches start cold. Not required: the dispatches run either way.
func (r *run) warm(o Options) {
	if o.Config == nil {
		return
	}
	var names []string
	for name, t := range o.Config.Targets {
		if t.Warm > 0 {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return
	}
	sort.Strings(names)
	if o.WarmErr != nil {
		r.missing("warm-slots", fmt.Sprintf("cannot read the warm slots' status: %v", o.WarmErr),
			"run agora doctor as the user serve runs as (root)", false)
		return
	}
	var held, cold []string
	for _, name := range names {
		want := o.Config.Targets[name].Warm
		var line []string
		for _, h := range o.WarmHolders {
			for _, c := range h.Counts {
				if c.Target == name {
					line = append(line, fmt.Sprintf("warm %d/%d ready (claimed %d, cold %d, failed %d) held by pid %d",
						c.Ready, c.Want, c.Claimed, c.Cold, c.Failed, h.PID))
				}
			}
		}
		if len(line) == 0 {
			cold = append(cold, fmt.Sprintf("%s (warm: %d)", name, want))
			continue
		}
		held = append(held, name+": "+strings.Join(line, "; "))
	}
	if len(cold) > 0 {
		detail := "no running serve holds warm slots of " + strings.Join(cold, ", ") + ": their dispatches start cold"
		if len(held) > 0 {
			detail += "; " + strings.Join(held, "; ")
		}
		fix := "run 'agora orch serve' or 'agora mcp serve' as root: it keeps them; see docs/providers.md#warm-slots-bubblewrap"
		if docker := dockerWarm(o.Config, names); len(docker) > 0 {
			// serve holds a docker target's slots as standby supervisors too, each with its
			// slot container and gateway: the same fix, the docker section to read.
			fix += "; for docker targets (" + strings.Join(docker, ", ") + ") see docs/providers.md#warm-slots-docker-and-podman"
		}
		if pods := providerWarm(o.Config, names, config.ProviderKubernetes); len(pods) > 0 {
			// serve keeps a kubernetes target's pool (agent-sandbox's SandboxWarmPool) as any
			// user; its pods enrol and claim over the network gateway of this home, so that is
			// part of the fix.
			fix += "; for kubernetes targets (" + strings.Join(pods, ", ") + ") orch serve and mcp serve keep their SandboxWarmPool as any user," +
				" and the network gateway of this home must run (agora gateway serve, or orch serve --gateway): see docs/providers-k8s.md#warm-n-on-a-kubernetes-target-30"
		}
		r.missing("warm-slots", detail, fix, false)
		return
	}
	r.ok("warm-slots", strings.Join(held, "; "), false)
}

// dockerWarm lists the docker targets among names.
func dockerWarm(c *config.Config, names []string) []string {
	return providerWarm(c, names, config.ProviderDocker)
}

// providerWarm lists the targets of provider among names.
func providerWarm(c *config.Config, names []string, provider string) []string {
	var out []string
	for _, n := range names {
		if c.Targets[n].Provider == provider {
			out = append(out, n)
		}
	}
	return out
}

// needBwrap: bwrap is required unless every target is the explicit `sandbox: none`.
func (r *run) needBwrap() bool { return len(r.sandboxed) > 0 }

func (r *run) config(o Options) {
	if o.ConfigErr != nil {
		r.missing("config", fmt.Sprintf("agora.yaml does not load: %v", o.ConfigErr),
			"correct the file at the line named; every dispatch reads it", true)
		return
	}
	detail := "targets in a sandbox: " + orNone(r.sandboxed)
	if len(r.unsandboxed) > 0 {
		detail += "; with sandbox: none (no isolation at all): " + strings.Join(r.unsandboxed, ", ")
	}
	r.ok("config", detail, true)
}

func (r *run) bwrap() {
	path, err := r.h.LookPath("bwrap")
	if err != nil {
		r.missing("bwrap", "bubblewrap (bwrap) is not installed",
			"apt-get install bubblewrap (Debian/Ubuntu), dnf install bubblewrap (Fedora/RHEL) or pacman -S bubblewrap (Arch)", r.needBwrap())
		return
	}
	r.bwrapPath = path
	version := "version unknown"
	if out, err := r.h.Output(r.ctx, path, "--version"); err == nil {
		version = strings.TrimSpace(firstLine(string(out)))
	}
	r.ok("bwrap", path+", "+version, r.needBwrap())
}

func (r *run) prlimit() {
	// Needed by `sandbox: none` targets only: a bwrap sandbox, root's or not, gets its
	// limits with prlimit(2) from the provider.
	required := !r.needBwrap()
	path, err := r.h.LookPath("prlimit")
	if err == nil {
		path, err = r.h.Resolve(path)
	}
	switch {
	case err != nil:
		r.missing("prlimit", "prlimit(1) is not installed; the provider refuses to start a worker without its limits",
			"apt-get install util-linux", required)
	default:
		r.ok("prlimit", path, required)
	}
}

func (r *run) runAs() *compute.HostUser {
	if !r.root || len(r.uids) == 0 {
		return nil
	}
	uids := slices.Sorted(maps.Keys(r.uids))
	return &compute.HostUser{UID: uids[0], GID: uids[0]}
}

func (r *run) userNamespaces() {
	const name = "user-namespaces"
	if !r.needBwrap() {
		r.ok(name, "not needed: every target is sandbox: none", false)
		return
	}
	if r.bwrapPath == "" {
		r.missing(name, "not checked: bwrap is missing", "install bwrap first", true)
		return
	}
	runAs := r.runAs()
	who := "as you"
	if runAs != nil {
		who = fmt.Sprintf("as the sandbox uid %d", runAs.UID)
	}
	iso, err := r.h.Sandbox(r.ctx, runAs)
	if err != nil {
		r.missing(name, fmt.Sprintf("bwrap cannot start a sandbox %s: %v", who, err),
			"allow unprivileged user namespaces: sysctl -w kernel.unprivileged_userns_clone=1 (Debian), "+
				"sysctl -w user.max_user_namespaces=15000; on Ubuntu 23.10+ also "+
				"sysctl -w kernel.apparmor_restrict_unprivileged_userns=0 or install bwrap's AppArmor profile", true)
		return
	}
	r.ok(name, fmt.Sprintf("bwrap started a sandbox %s (isolation %s)", who, iso), true)
}

func (r *run) privileges() {
	if !r.root {
		r.ok("privileges", fmt.Sprintf("agora runs as uid %d: sandboxes run as you, and the kernel binds max_procs "+
			"(RLIMIT_NPROC) for you; disk quotas need root", r.h.Euid()), false)
		return
	}
	r.ok("privileges", "agora runs as root: sandboxes run as the targets' sandbox_uid, where max_procs binds, "+
		"under a tmpfs disk quota", false)
}

func (r *run) sandboxUID() {
	const name = "sandbox-uid"
	if len(r.uids) == 0 {
		r.ok(name, "not used: no sandboxed target", false)
		return
	}
	passwd, _ := r.h.ReadFile("/etc/passwd")
	group, _ := r.h.ReadFile("/etc/group")
	users, groups := ParseIDs(passwd), ParseIDs(group)
	uids := slices.Sorted(maps.Keys(r.uids))
	// Each dispatch runs as one uid of the range from sandbox_uid (config.SandboxUIDs).
	within := func(ids map[uint32]string, first, last uint32) (uint32, string) {
		for id, name := range ids {
			if id >= first && id <= last {
				return id, name
			}
		}
		return 0, ""
	}
	var clash, fine []string
	for _, u := range uids {
		targets := strings.Join(r.uids[u], ", ")
		first, last := config.UID(u).Range()
		if id, name := within(users, first, last); name != "" {
			clash = append(clash, fmt.Sprintf("uid %d, in the range %d-%d of targets %s, is the account %q in /etc/passwd", id, first, last, targets, name))
		} else if id, name := within(groups, first, last); name != "" {
			clash = append(clash, fmt.Sprintf("gid %d, in the range %d-%d of targets %s, is the group %q in /etc/group", id, first, last, targets, name))
		} else {
			fine = append(fine, fmt.Sprintf("%d-%d (targets %s)", first, last, targets))
		}
	}
	use := "used only when agora runs as root"
	if r.root {
		use = "sandboxes run as it"
	}
	if len(clash) > 0 {
		r.missing(name, strings.Join(clash, "; ")+": that account's processes and files would share the sandbox's identity",
			fmt.Sprintf("set targets.<name>.sandbox_uid in agora.yaml to the first of %d unused uids, such as %#x", config.SandboxUIDs, config.DefaultSandboxUID+config.SandboxUIDs), false)
		return
	}
	r.ok(name, fmt.Sprintf("%s: no account or group has one of them (%s, one uid per dispatch)", strings.Join(fine, ", "), use), false)
}

func (r *run) cgroup() {
	const name = "cgroup-v2"
	cg := r.h.Cgroup()
	v1 := ""
	if cg.V1Pids {
		v1 = "; a cgroup v1 pids hierarchy is mounted, which agora does not use"
	}
	fix := "boot with systemd.unified_cgroup_hierarchy=1 and run agora in a unit that delegates " +
		"the controllers: systemd-run --scope -p Delegate=yes agora ...; " +
		"max_procs binds without it (the sandbox uid's RLIMIT_NPROC)"
	switch {
	case cg.Parent == "":
		r.missing(name, "this process is in no cgroup v2 hierarchy: no per-dispatch cgroup (memory.max, pids.max)"+v1, fix, false)
	case !cg.Writable:
		r.missing(name, cg.Parent+" is not writable by agora: no per-dispatch cgroup"+v1, fix, false)
	case !slices.Contains(cg.Delegated, "pids") || !slices.Contains(cg.Delegated, "memory"):
		if slices.Contains(cg.Available, "pids") && slices.Contains(cg.Available, "memory") {
			fix = "echo '+memory +pids' > " + cg.Parent + "/cgroup.subtree_control"
		}
		r.missing(name, fmt.Sprintf("%s: per-dispatch cgroups (killed with cgroup.kill), but it delegates %s to them, "+
			"so no memory.max or pids.max (both need memory and pids)%s", cg.Parent, orNone(cg.Delegated), v1), fix, false)
	default:
		r.ok(name, fmt.Sprintf("%s delegates memory and pids: per-dispatch memory.max and pids.max", cg.Parent), false)
	}
}

func (r *run) diskQuota() {
	const name = "disk-quota"
	if !r.root {
		r.missing(name, "only root can mount the tmpfs a dispatch's workspace and out directory live on: "+
			"targets' disk: is not enforced (records say disk-unenforced)",
			"run agora as root (sandboxes then run as the sandbox uid) to enforce targets.<name>.disk", false)
		return
	}
	if err := r.h.MountTmpfs(); err != nil {
		r.missing(name, fmt.Sprintf("root cannot mount a tmpfs here: %v; disk: is not enforced", err),
			"give agora CAP_SYS_ADMIN (a container: --cap-add SYS_ADMIN)", false)
		return
	}
	r.ok(name, "each dispatch's workspace and out directory live on a tmpfs of the target's disk: size "+
		"(its pages are memory: RAM or swap)", false)
}

func (r *run) agoraBinary() {
	const name = "agora-binary"
	exe, err := r.h.Executable()
	if err != nil {
		r.missing(name, fmt.Sprintf("cannot find the running binary: %v", err), "run agora by its path", true)
		return
	}
	fi, err := r.h.Stat(exe)
	if err != nil {
		r.missing(name, fmt.Sprintf("%s: %v", exe, err), "run agora by its path", true)
		return
	}
	if r.root && r.needBwrap() && fi.Mode().Perm()&0o005 != 0o005 {
		r.missing(name, fmt.Sprintf("%s (mode %v) is bound into every sandbox, whose uid cannot read and run it", exe, fi.Mode().Perm()),
			"chmod 0755 "+exe, true)
		return
	}
	r.ok(name, exe, true)
}

// workerBinary checks the worker program every dispatch binds: there, cmd/agora-worker, built
// from this agora's source. Required: without it no dispatch starts.
func (r *run) workerBinary(o Options) {
	if r.h.WorkerBinary == nil {
		return
	}
	const name = "agora-worker"
	b, err := r.h.WorkerBinary(o.WorkerBinary)
	if err != nil {
		r.missing(name, err.Error(), "install agora and agora-worker side by side: "+workerbin.FixCommand, true)
		return
	}
	r.ok(name, fmt.Sprintf("%s, %s, sha256 %s (pinned into AGORA_HOME/bin and bound read-only into every sandbox)",
		b.Source, b.Version, b.SHA256), true)
	r.execWorkerBinary(b)
}

// execWorkerBinary checks the exec-only worker beside the worker: optional (without it every
// dispatch binds the worker), but one that is there and unsound fails exec dispatches.
func (r *run) execWorkerBinary(worker workerbin.Binary) {
	if r.h.ExecWorkerBinary == nil {
		return
	}
	const name = workerbin.ExecName
	b, err := r.h.ExecWorkerBinary(worker)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.missing(name, "not installed beside agora-worker: exec dispatches bind agora-worker, whose start is about a millisecond longer",
			"make install (it puts agora-worker-exec beside agora-worker)", false)
	case err != nil:
		r.missing(name, err.Error(), "remove it, or install agora and its workers side by side: make install", true)
	default:
		r.ok(name, fmt.Sprintf("%s, %s, sha256 %s (bound in agora-worker's place for exec dispatches on local targets without warm slots)",
			b.Source, b.Version, b.SHA256), false)
	}
}

func (r *run) git() {
	path, err := r.h.LookPath("git")
	if err != nil {
		r.missing("git", "git is not installed: dispatches with --repo cannot check the repository out",
			"apt-get install git", false)
		return
	}
	version := path
	if out, err := r.h.Output(r.ctx, path, "--version"); err == nil {
		version = path + ", " + strings.TrimSpace(firstLine(string(out)))
	}
	r.ok("git", version, false)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	line = line[:min(len(line), 200)]
	return line
}

func orNone(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	return strings.Join(ss, ", ")
}
