// Package local runs one worker process on this machine inside a bubblewrap (bwrap)
// sandbox, with resource limits, a wall-clock deadline and a cancel that works from any
// process. It implements [compute.Provider].
//
// local runs on the host side. It owns the sandbox construction (namespaces, binds,
// environment, inherited files), the limits (rlimits, cgroup v2) and the killing of the
// whole process tree. It MUST NEVER put environment values or secrets in any argv (bwrap's
// own argv is readable in /proc/PID/cmdline), never let the host environment leak into the
// sandbox, and never kill a process it cannot prove it started. It knows nothing about
// catalogs or dispatch records.
//
// # Sandbox
//
// With [compute.SandboxBwrap] the process gets fresh user, mount, pid, ipc, uts, cgroup and
// (unless [compute.Spec.Network]) network namespaces, runs as uid/gid 65534 inside with no
// capabilities, NoNewPrivs and nested user namespaces disabled, sees a read-only /usr (and
// the /bin, /lib, /sbin links), a minimal read-only /etc (passwd, group, hosts, localtime,
// alternatives, ...; the TLS trust store and resolv.conf only with network; never shadow,
// private keys or gitconfig), fresh /proc, /dev and /tmp, then the spec's binds in order.
// All bwrap options travel on an inherited memfd (bwrap --args), so environment values
// never appear in bwrap's argv, and bwrap itself starts with an empty environment (an
// LD_PRELOAD in an env bundle cannot reach it); --clearenv and --setenv then build the
// sandbox's environment. Descriptors the provider process holds are marked close-on-exec
// before each start, so only the spec's files reach the sandbox.
//
// # Limits
//
// The command never runs without its rlimits (RLIMIT_NPROC, RLIMIT_FSIZE, RLIMIT_AS,
// RLIMIT_CORE=0 and RLIMIT_NOFILE=[MaxOpenFiles], or the provider's own hard limit if that
// is lower), soft and hard alike:
//
//   - bwrap is started with --block-fd: it builds the whole sandbox, then waits. The
//     provider reads the sandbox process's pid from --info-fd, applies the limits to it
//     with prlimit(2) and only then lets it exec the command, which inherits them.
//   - With [compute.Spec.RunAs] the sandbox is another user's: the call is made from a
//     thread of the provider whose real uid and gid are, for that call, the sandbox
//     user's, which the kernel accepts without CAP_SYS_RESOURCE.
//   - With [compute.SandboxNone] the command is started through prlimit(1) the same way.
//
// RLIMIT_NOFILE is not a [compute.Limits] field: it bounds the descriptors, and so the
// connections to a host-side server such as the dispatch's gateway, that each sandbox
// process can hold, whose cost the host bears outside the sandbox's memory limit.
//
// Set inside the sandbox's user namespace, RLIMIT_NPROC counts the sandbox's processes
// only. The kernel never enforces RLIMIT_NPROC for host uid 0, so a root provider
// enforces MaxProcs only through a cgroup pids.max or by running the sandbox as another
// host user ([compute.Spec.RunAs]); Exit.Isolation says "nproc-unenforced" when neither
// applied.
//
// # Running as another host user
//
// A root provider starts bwrap for a spec with RunAs as that uid and gid, with no
// supplementary groups. bwrap resolves every bind source with realpath(3) as that user,
// --bind-fd included, so a source below a directory it cannot search (AGORA_HOME is 0700)
// would be refused. The provider therefore starts bwrap from a goroutine locked to an OS
// thread of its own (never the main thread) that has unshared its mount namespace, made it
// private, mounted a small tmpfs on /run/agora-sandbox and bound each source there as root;
// bwrap gets those paths (a cold sandbox's binds below /agora as one tree, each with the
// flags bwrap would give it, and its whole root when nothing else is bound: see
// bindSources and layOutRoot; a warm slot's each on its own). The host's
// mount table never shows them, and the namespace ends with that thread, which lives
// exactly as long as the sandbox (it is bwrap's parent for --die-with-parent). What the
// sandbox user may read or write is then decided by the sources' own owners and modes,
// which the caller sets.
//
// A cold run-as sandbox's network namespace is made before its start: the provider keeps
// two spares, each made by unshare(2) on a thread that then moves back to the host's
// namespace (the thread must live on: a task the provider started from it dies with it, by
// its parent-death signal), its loopback brought up, and held by a descriptor of its nsfs
// file ([netnsPool]); the starting thread joins one (setns) and bwrap shares it
// (--share-net) instead of making its own. Each is new, holds nothing but its loopback, and
// is handed to exactly one sandbox; a start that finds none has bwrap make one. It belongs
// to the host's user namespace, so the sandbox, in a user namespace of its own, holds no
// capability over it (nor over bwrap's own, which belongs to the user namespace bwrap
// makes). Making one is a millisecond that bwrap's clone no longer spends while the
// dispatch waits; a sandbox's end makes the next. A warm slot's bwrap makes its own, as does
// every sandbox with the host's network or without RunAs.
//
// A root provider's sandbox without RunAs runs its command as host uid 0 without
// capabilities, which /proc/sys still lets write the host's sysctls (kernel.core_pattern
// among them: the kernel checks only the uid there, and bwrap leaves /proc/sys writable
// then). A root agora's dispatches and verify gates always set RunAs (a leased uid of
// sandbox_uid); only tests and the provider's own probe, which runs a program of the
// host's, start one without it.
//
// When a writable cgroup v2 hierarchy exists, each task gets its own cgroup
// (agora-<id>-<random>), entered atomically at clone time (CLONE_INTO_CGROUP), with
// memory.max and pids.max when the parent delegates those controllers; the tree is then
// killed through cgroup.kill, and the cgroup is removed after the task ends.
//
// Every task carries a parent-death signal (SIGKILL), which Linux sends when the thread
// that forked it ends. A run-as start forks bwrap from its own thread, which ends with the
// sandbox; every other task is forked from one thread locked for the life of the process
// (spawn.go), never from one the runtime may end.
//
// # Isolation tokens
//
// Exit.Isolation is "none" for the unisolated escape (which still gets the limits, the
// clean environment and a cgroup when possible), otherwise "bwrap+rlimits" followed by
// these, in this order, as they applied:
//
//   - runas: the sandbox ran as [compute.Spec.RunAs], an unprivileged host user, so
//     RLIMIT_NPROC binds and an escaped process is not root on the host;
//   - cgroup: the task had its own cgroup v2 and is killed with cgroup.kill;
//   - memory.max, pids.max: that cgroup also capped memory and the number of processes;
//   - memory-per-process: no memory.max applied, so Limits.Memory bound each process
//     (RLIMIT_AS), not the sandbox: n processes may hold n times it;
//   - nproc-unenforced: the sandbox's processes belonged to host root and no pids.max
//     applied, so nothing enforced MaxProcs.
//
// The sandbox's root and /dev are remounted read-only once built (an agent could otherwise
// plant /etc/ld.so.preload, or fill memory through them); /tmp and /dev/shm are tmpfs of
// Limits.Scratch (/dev/shm at most 256 MiB); the binds keep their own modes.
//
// Callers may append tokens of their own for limits they enforce themselves (the
// dispatcher adds disk-quota or disk-unenforced).
//
// # Killing
//
// bwrap runs as the leader of its own session (its pid is the process group id) and with
// --die-with-parent; its sandbox is a pid namespace whose init takes every process in it
// down when it dies. A kill sends SIGKILL to the cgroup (cgroup.kill) and to the process
// group; in a sandbox that is the whole tree. When the command exits, whatever it left
// running is killed the same way. The task id is "local:<pid>:<start time>:<boot>" (field 22
// of /proc/<pid>/stat, and [host.BootID]), so [Provider.Cancel] in another process can check,
// through a pidfd, that the pid still names the same process before it signals anything; pids
// and start times restart at boot, so an id of another boot names nothing and is never
// signalled. Ids from before boot ids lack the last field and are checked as they always were.
//
// bwrap sets the sandbox process's parent-death signal only once it is released from
// --block-fd, so a provider killed between the start and that moment leaves bwrap dead and
// the sandbox running (bubblewrap 0.8 to 0.11 alike). A bubblewrap task's id therefore
// names the sandbox process as well,
// "local:<pid>:<start>:<sandbox pid>:<its start>:<boot>", and Cancel from another process
// (the dispatcher's Reap) kills it, and its pid namespace, by that name. The dispatch worker
// also exits when its supervisor's lifeline pipe closes (wire.LifelineFDEnv), which ends the
// sandbox at once.
package local
