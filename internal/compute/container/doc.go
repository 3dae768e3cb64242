// Package container runs one worker process in a hardened container through the Docker
// Engine API (the official moby client), against Docker or podman's Docker-compatible
// socket. It implements [compute.Provider] on the host side and never imports another
// provider.
//
// # What a container gets
//
// Every container is created from one image pinned by digest (REF@sha256:<64 hex>; a tag is
// refused, and the image must already be present: the provider never pulls), with a
// read-only root file system, every capability dropped, no-new-privileges, a seccomp
// profile that refuses new namespaces (user namespaces above all), the spec's RunAs as its
// user (required, uid and gid 0 refused: see below), no network at all (network mode
// "none": only loopback), a pids limit, a memory limit with swap equal to it, ulimits (fsize,
// nofile, nproc), sized tmpfs scratch at /tmp and /dev/shm, the spec's binds (read-only
// unless Writable), the spec's environment plus PWD (the engine adds HOSTNAME, TERM, HOME
// when the spec has none, and podman "container"; nothing else, nothing of the host's), no
// image entrypoint or command, the label agora.dispatch=<id> and the name agora-<id>. A spec
// asking for the host's network is refused: a container target has none to give.
//
// # A host uid per dispatch
//
// The nproc ulimit is RLIMIT_NPROC, which the kernel counts per host uid across every
// container, not per container: were every dispatch one uid, one agent forking up to its
// limit would stop every other dispatch from forking. It cannot
// simply be left out either: podman then sets it from containers.conf. So a spec without
// RunAs is refused ([ErrNoRunAs]); a root agora gives each dispatch its own uid of the
// target's sandbox_uid range and hands it the stage, whose writable binds (workspace, out)
// are that uid's and which the host reads back only through internal/sandboxfs. A user
// namespace per container (podman's UsernsMode "auto") was the other way: podman 4.3.1
// accepts it on its Docker API but needs a "containers" range in /etc/subuid, and Docker
// refuses every per-container UsernsMode but "host", so only the uid holds on both.
//
// # Secrets
//
// A container cannot inherit file descriptors, so [compute.Spec.Files] (at most one: the
// worker's secrets on fd 3) travels on the container's stdin: the entrypoint is the agora
// binary's hidden `fdpass` command (internal/compute/fdpass), which reads stdin to its end,
// puts it in a sealed memfd at fd 3, points stdin at /dev/null and execs the real argv, so
// the worker is the container's PID 1 and reads fd 3 exactly as under bubblewrap. The
// secret is never in argv, the environment, a label, a name or a log.
//
// # Ending
//
// The provider kills the container at [compute.Limits.Timeout] ([compute.Exit.TimedOut])
// and when the start context is cancelled ([compute.Exit.Cancelled]); it never uses the
// engine's auto-remove (podman's reports exit 0 for a container that exited 3): it waits,
// inspects, then removes the container itself. A container removed behind its back ends
// [compute.Exit.Lost], or killed (SIGKILL) when the inspect came between the engine's kill
// and its removal; never a clean exit. Task ids are "docker:<64 hex container id>"; [Provider.Cancel] kills
// and removes only a container that carries the agora.dispatch label.
//
// # Warm slots
//
// [Provider.StartSlot] starts a slot container from the same create request, in claim
// mode: the slot's token on fd 3, the gateway's Unix socket its only way out, labels by slot,
// home and holder; [Provider.SweepSlots] removes those of a holder that is gone (slot.go).
//
// # Isolation tokens
//
// [compute.Exit.Isolation] joins, with "+":
//
//	docker     a container started through the Docker Engine API (Docker or podman)
//	readonly   read-only root file system
//	capdrop    every capability dropped, no-new-privileges
//	seccomp    agora's seccomp profile: the engine's default without new namespaces
//	nonroot    ran as the dispatch's own non-root uid and gid
//	nonet      network mode none: loopback only
//	pids       the pids cgroup limit (Limits.MaxProcs, default 256)
//	memory     the memory cgroup limit, swap included (Limits.Memory, default 4 GiB)
//	runsc      the gVisor runtime (Options.Runtime "runsc")
package container
