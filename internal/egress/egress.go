// Package egress owns the one way agora reaches the network: an SSRF-safe [Dialer] and the URL,
// host and address vetting behind it. Callbacks, RFC 3161 timestamp requests, the model gateway
// and the http_fetch tool all dial through it.
//
// A host name is resolved once; every resolved address is vetted against the [Policy] and only a
// vetted address is dialed, as a literal IP, so a DNS answer cannot change between the check and
// the connection (DNS rebinding). If any resolved address is denied, the dial is refused, never
// retried on another address. Private, loopback, link-local, cloud metadata and other special
// addresses are denied unless [Policy.AllowPrivate] lists them; some (unspecified, multicast,
// broadcast, reserved, cloud metadata) are denied whatever the policy says. Host literals in
// non-canonical IPv4 forms (2130706433, 0x7f.1, 0177.0.0.1, 127.0.0.1.) are refused rather than
// guessed at.
//
// egress runs on the host side; the sandbox has no network and reaches the outside only through
// the host's gateway, which dials through here. egress must never honour proxy environment
// variables, never dial a name it has not vetted, and never put URL userinfo, paths or query
// strings (which may carry tokens) in its errors. It imports only the standard library.
package egress

import (
	"errors"
	"fmt"
	"net/netip"
)

// ErrDenied is matched (with [errors.Is]) by every refusal of a destination: a denied address,
// a host outside the allow-list, a malformed host, a bad URL scheme or userinfo, a refused
// redirect.
var ErrDenied = errors.New("egress denied")

// DeniedError reports a destination the policy refuses. It names the host and, when the
// refusal is about an address, the address; it never holds a URL path, query or userinfo.
type DeniedError struct {
	// Host is the host name or literal as given (possibly empty when only an address was vetted).
	Host string
	// Addr is the refused address; the zero Addr when the refusal is not about an address.
	Addr netip.Addr
	// Reason says why, e.g. "loopback" or "private (RFC 1918)".
	Reason string
}

// maxHostInError caps how much of a (possibly hostile) host string an error repeats.
const maxHostInError = 80

// maxZoneInError caps how much of an IPv6 zone an error repeats.
const maxZoneInError = 16

func (e *DeniedError) Error() string {
	msg := "egress denied:"
	if e.Host != "" {
		msg += fmt.Sprintf(" host %q", truncate(e.Host, maxHostInError))
	}
	if e.Addr.IsValid() {
		// An IPv6 zone is text from the caller: quoted and capped like the host.
		msg += " address " + e.Addr.WithZone("").String()
		if z := e.Addr.Zone(); z != "" {
			msg += fmt.Sprintf(" zone %q", truncate(z, maxZoneInError))
		}
	}
	return msg + ": " + e.Reason
}

// Is reports whether target is [ErrDenied].
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }
