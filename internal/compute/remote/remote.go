// Package remote is the contract between agora's network gateway (host side, internal/netgw)
// and a worker that runs where the host's file system is not, such as a Kubernetes pod: what
// the pod must mount, how it authenticates, and the gateway's routes. It is a leaf both sides
// link: the host's providers and gateway, and the worker inside the pod.
//
// A provider that cannot bind host paths hands its [compute.Spec] to an [Exporter]. The
// exporter registers a session for the dispatch with a fresh bearer token and turns every
// bind into a [Mount]: an init step in the pod downloads each Fetch mount's content from the
// gateway into a volume of its own, the worker's container mounts the volumes at their Dst
// (read-only unless Writable), serves the Sockets of a mount by tunnelling each connection to
// the host socket of the same name, reads spec.Files through the gateway, streams its stdout
// and stderr back, and uploads every Result mount before it exits. Closing the session
// revokes the token.
package remote

import (
	"context"

	"github.com/agora-dev/agora/internal/compute"
)

// Mount is one part of the sandbox layout a remote worker must have, one per [compute.Bind].
type Mount struct {
	// Name names the mount in routes and the pod's volume: [a-z0-9-], at most 40 bytes,
	// unique in the session.
	Name string `json:"name"`
	// Dst is the path inside the worker's container (the bind's Dst).
	Dst string `json:"dst"`
	// Writable mounts the volume read-write in the worker's container; otherwise read-only.
	Writable bool `json:"writable,omitempty"`
	// File says Dst is one regular file: the volume holds it as [FileName] and the worker's
	// container mounts that entry alone (a subPath mount).
	File bool `json:"file,omitempty"`
	// Fetch says the host has content for the volume: the init step downloads it
	// (GET mounts/NAME, a tar stream) before the worker starts.
	Fetch bool `json:"fetch,omitempty"`
	// Result says the host reads the volume after the worker ends ([compute.Bind.Result]):
	// the worker uploads it (PUT mounts/NAME, a tar stream, accepted once) before it exits.
	Result bool `json:"result,omitempty"`
	// Sockets are Unix socket names the host has in this directory. The worker listens on
	// each name in the volume and tunnels every connection to the host's socket.
	Sockets []string `json:"sockets,omitempty"`
}

// Info is the body of GET session: what the worker needs to know of its session.
type Info struct {
	// Dispatch is the dispatch id.
	Dispatch string `json:"dispatch"`
	// Version is the host agora's version; the fetch step refuses a worker image of another.
	Version string `json:"version"`
	// Mounts are the session's mounts, in bind order.
	Mounts []Mount `json:"mounts"`
	// Files is how many of spec.Files the worker reads (GET files/I, I < Files).
	Files int `json:"files"`
}

// FileName is the entry a File mount's volume holds.
const FileName = "file"

// Session is what a provider needs to start a remote worker for one dispatch.
type Session struct {
	// Dispatch is the dispatch id (the spec's ID).
	Dispatch string
	// Token is the dispatch's bearer token: it authorises only this dispatch's routes, and
	// only until Close. Never log it, put it in a name, label, annotation or argv; a provider
	// hands it to the pod as a Secret.
	Token string
	// Mounts are the volumes the pod needs, in bind order.
	Mounts []Mount
	// Files is how many of spec.Files the worker reads through the gateway (GET files/I).
	Files int
	// Close revokes the token, stops serving the session's files and streams, and waits
	// until what the worker streamed has reached spec.Stdout and spec.Stderr. Idempotent.
	Close func() error
}

// Exporter registers a spec's session with the network gateway.
type Exporter interface {
	// Export makes spec reachable to a remote worker for its dispatch. The spec's Binds are
	// read from the host as they are when the worker fetches them; Result binds are
	// written when the worker uploads them.
	Export(ctx context.Context, spec compute.Spec) (*Session, error)
}

// Reattacher is an [Exporter] that can take back the session of a dispatch whose exporting
// process died (a restarted supervisor adopting a running Job): the token, the mounts and
// what was uploaded stay; the returned Session's Token is empty (only its hash is kept),
// spec.Stdout and spec.Stderr receive the streams from now on, and files already served are
// not served again. [ErrNoSession]-like failures mean there is nothing to take back: export
// afresh (a new token) instead.
type Reattacher interface {
	Reattach(ctx context.Context, spec compute.Spec) (*Session, error)
}

// ClaimExporter is an [Exporter] that replaces a dispatch's standing session only for a
// caller that still holds the dispatch: when a session of spec.ID is there already (another
// process's export), held is called under the exporter's lock, which every export, revocation
// and Close of the dispatch takes, and its error is returned with nothing touched. Several
// processes can start one dispatch at once (compute/kubernetes's claims): one that froze past
// its claim must not replace the winner's session, which its pod's token opens.
type ClaimExporter interface {
	ExportIf(ctx context.Context, spec compute.Spec, held func(context.Context) error) (*Session, error)
}

// Revoker is an [Exporter] that can end the session of a dispatch whose exporting process
// died (a supervisor killed with -9): the token stops working at once, and the session's open
// tunnels close. Revoking a dispatch without a session is no error.
type Revoker interface {
	Revoke(ctx context.Context, dispatchID string) error
}

// The environment of a remote worker's pod. The token arrives only in TokenEnv (from a
// Secret): the worker reads it and removes it from its environment before anything of the
// agent runs, and, being non-dumpable, keeps it from the agent's /proc reads.
const (
	// GatewayURLEnv is the gateway's base URL, "https://HOST:PORT".
	GatewayURLEnv = "AGORA_GATEWAY_URL"
	// TokenEnv carries the dispatch's bearer token.
	TokenEnv = "AGORA_GATEWAY_TOKEN"
	// CAEnv carries the PEM certificate(s) the worker trusts for the gateway's TLS.
	CAEnv = "AGORA_GATEWAY_CA"
	// StageEnv names where the init step finds the mounts' volumes: STAGE/NAME.
	StageEnv = "AGORA_STAGE"
	// DispatchEnv names the dispatch id: the init step needs it for its routes, and the
	// worker's container has it from the spec's environment.
	DispatchEnv = "AGORA_DISPATCH_ID"
	// GatewaySocketEnv, when set, is the path of a Unix socket the worker reaches the gateway
	// through instead of dialling GatewayURLEnv's host (TLS to that host's name still): a
	// docker warm slot has no network at all, only this socket bound in.
	GatewaySocketEnv = "AGORA_GATEWAY_SOCKET"
)

// Routes, below "/v1/dispatches/ID/", each with "Authorization: Bearer TOKEN":
//
//	GET  session                  the session as JSON: mounts, files, the host agora's version
//	GET  mounts/NAME              a Fetch mount's content as a tar stream
//	PUT  mounts/NAME              a Result mount's content as a tar stream, accepted once
//	                              (the same bytes again, a retry, are answered 204 again)
//	GET  files/I                  spec.Files[I]'s content, served once
//	POST streams/stdout|stderr    the worker's output, appended as it arrives; answered 200 at
//	                              once (full duplex), the answer ending with StreamDone once
//	                              all of it reached the host
//	GET  sockets/NAME/SOCKET      with "Upgrade: agora-tunnel": a byte stream to the host socket
const (
	RoutePrefix   = "/v1/dispatches/"
	TunnelUpgrade = "agora-tunnel"
	// StreamDone ends the answer to a stream's POST whose output all reached the host. An
	// answer that ends without it (the gateway went away) means the rest must be sent again.
	StreamDone = "ok\n"
)

// ExitGatewayUnreachable is the exit status of a remote worker, or of its init step, that
// gave up on a gateway that did not answer for the worker's outage limit (it retries every
// request across a gateway's restart first). The host records such a dispatch
// gateway-unreachable: the agent did nothing wrong. (75 is EX_TEMPFAIL of sysexits.h.)
const ExitGatewayUnreachable = 75

// ValidMountName reports whether s has the shape of a [Mount]'s Name: [a-z0-9-], 1 to 40 bytes.
func ValidMountName(s string) bool {
	if s == "" || len(s) > 40 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
