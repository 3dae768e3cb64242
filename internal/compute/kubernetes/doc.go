// Package kubernetes runs a [compute.Spec] as a batch/v1 Job in one namespace of a
// Kubernetes cluster, through client-go. It runs on the host side, next to the dispatcher.
//
// A pod cannot see the host's file system or Unix sockets, so the provider hands the spec to a
// [remote.Exporter] (the network gateway), which registers a session with a fresh token and
// turns every bind into a [remote.Mount]. Start then creates, in this order and all named
// agora-<dispatch>: a Secret holding the token and the gateway's CA, a NetworkPolicy letting the
// pod reach only the gateway's address and port (a name's addresses, resolved once for the Job
// and pinned in the pod's /etc/hosts too), nothing reach the pod, and the Job. Its pod
// has an init container from the agora worker image that downloads the mounts into emptyDir
// volumes and copies agora's own static binary into a bin volume; the main container, from the
// target's image, runs that binary as `agora-worker worker` with the volumes at their paths.
//
// The provider MUST NOT put the token anywhere but the Secret: not in a name, label,
// annotation, argument, environment value of the Job or log line (the pod reads it through a
// secretKeyRef). It never creates a second Job for a dispatch: Start finds a Job of the same
// name carrying the dispatch's label and adopts it, so a restarted supervisor re-attaches.
// Every object carries the labels app.kubernetes.io/managed-by=agora and
// agora.dispatch=<id>; Cancel and Sweep touch nothing without them.
//
// Pods meet Pod Security "restricted": non-root, read-only root file system, no privilege
// escalation, every capability dropped, seccomp RuntimeDefault, no service account token, no
// service links. Each dispatch's pod runs as its own uid: spec.RunAs, else the dispatch's uid
// of [Options.SandboxUID]'s range ([compute.SandboxUIDFor]), since the kernel counts
// RLIMIT_NPROC per uid on a node. Isolation tokens on [compute.Exit]:
// kubernetes+restricted+readonly+nonroot+netpol, then runtimeclass when the target names a
// RuntimeClass (gVisor, Kata). Limits.MaxProcs and Limits.FileSize have no pod-level
// equivalent the API can set, so the worker container's AGORA_RLIMITS carries them and the
// worker applies them to itself and the agent (internal/worker/remote/rlimit.go).
package kubernetes
