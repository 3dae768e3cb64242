// Package netgw is agora's network gateway: the host side of a worker that runs where the
// host's file system is not (a Kubernetes pod). It owns the sessions ([Registry], the
// [remote.Exporter] a remote provider hands its spec to) and the TLS server ([Server]) that
// serves them: each dispatch's mounts as tar streams, its result uploaded once, its files
// served once, its output streamed back, and byte tunnels to the Unix sockets the dispatch's
// supervisor serves (the model gateway, the egress proxy).
//
// It moves bytes and decides nothing about them: every grant, budget, audit entry and
// credential stays behind those sockets, with the supervisor, exactly as for a local
// sandbox; what comes back is read through internal/sandboxfs and checked against
// result.json's hashes as a local out directory is. What it must never do: store, log or
// put in a name a token (session.json holds its SHA-256); follow a symlink out of a bind
// when it reads one; write anything of an upload but regular files and directories beneath
// the result bind; answer a route of one dispatch for another's token; outlive the session's
// Close with any tunnel, at either end; queue a connection (every peer that can reach it,
// any agent pod, is untrusted until its token is checked: a connection over a limit is
// closed at once, see conns.go). It runs on the host, as agora.
//
// The server and the exporter may be different processes on one host (agora gateway serve
// and a detached supervisor): they share only the session directory,
// AGORA_HOME/gateway/sessions/<id>/ (0700), whose Unix sockets carry files and streams.
package netgw
