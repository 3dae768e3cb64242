// Package proxy is a dispatch's egress proxy: the only way a sandboxed tool reaches the
// network. It runs on the host, in the supervising process, one per dispatch, and serves an
// ordinary HTTP proxy (CONNECT tunnels and plain-HTTP forwarding) on a Unix socket the
// worker relays the sandbox's loopback proxy port to.
//
// A connection is allowed only when its host and port match the dispatch's grant
// ([grant.DecideHost]). The proxy never uses the client's idea of an address: it dials the
// host name through [egress.Dialer], which resolves it once and refuses private, loopback,
// link-local and metadata addresses unless the policy admits them. A refusal is an HTTP 403
// whose body says, in one sentence, which host was refused and why.
//
// Connections are tunnelled untouched, except to hosts where the proxy must read requests:
// a rule that restricts methods or paths, or a host a secret is bound to. There it terminates
// TLS with a per-dispatch CA ([NewCA]; its key never leaves the process), checks each
// request against the rules, swaps each bound secret's placeholder for its value in the
// Authorization header (bearer or basic) and the binding's named headers, re-encrypts to the
// real host with normal certificate verification, and masks the values in the response
// (strictly: wrapped, escaped, and any piece long enough to matter; [redact.NewStrict]). A
// value is swapped in only there, inside TLS, on the port its binding names (443 unless it
// names one); never into plain HTTP. A placeholder headed for a host it is not bound to, for
// another port of a bound host, or over plain HTTP is refused wherever the proxy can see it.
//
// Every decision is reported to the [Auditor] before its effect: a connection's
// net.connect entry is recorded before a byte of the client reaches the host, and a refused
// request's entry before the refusal is answered. When the connection ends, net.close
// reports its bytes each way, duration and requests: exactly once per allowed connection,
// past the audit budget and after the dispatch's context has ended too.
//
// Nothing one sandbox sends may pin the host: heads are capped (64 KiB from the client, 256
// KiB from a host), a connection silent for [Config.IdleTimeout] ends, a tunnel ends once
// either side closes (the other direction gets a short linger), a client that leaves while
// its request waits on a host ends the exchange, and [Proxy.Close] closes upstream
// connections too. A request is sent at most once (never resent after a broken write), and
// a host's 101 is refused rather than relayed as an unread stream. Every message, notice and
// entry the proxy writes is masked with the bound values first. docs/egress.md lists what
// the proxy does not inspect.
package proxy
