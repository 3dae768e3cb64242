package grant

import (
	"cmp"
	"fmt"
	"net/netip"
	"strconv"
)

// BoundPort is the port a bound secret goes to when its binding names none: HTTPS's. A bound
// secret is only ever sent inside TLS the egress proxy terminates and re-encrypts, so a
// binding pins a host and a port, never a scheme.
const BoundPort = 443

// ParseBoundHost reads one host of a secret's binding: "host" or "host:port" as an egress
// rule writes them ([ParseEgressRule]: a name, "*.domain", an IPv4 address, "[v6]:port"), or
// an IPv6 address without brackets (how bindings stored one before they had ports). No port
// means [BoundPort], so the rule's Port is never 0. The host must already be lowercase and an
// address canonical: a binding is stored as written, so what a person reads is what applies.
func ParseBoundHost(s string) (EgressRule, error) {
	if a, err := netip.ParseAddr(s); err == nil && a.Is6() {
		r := EgressRule{Host: s, Port: BoundPort}
		if err := r.Validate(); err != nil {
			return EgressRule{}, err
		}
		return r, nil
	}
	r, err := ParseEgressRule(s)
	if err != nil {
		return EgressRule{}, err
	}
	if host, _, _ := cutPort(s); host != r.Host && "["+r.Host+"]" != host {
		return EgressRule{}, fmt.Errorf("host %q: write it as %s (lower case, an address in canonical form)", s, BoundHostString(r))
	}
	r.Port = cmp.Or(r.Port, BoundPort)
	return r, nil
}

// cutPort splits "host:port" or "[v6]:port"; a string without a port is all host.
func cutPort(s string) (host, port string, ok bool) {
	if len(s) > 0 && s[0] == '[' {
		for i := range len(s) {
			if s[i] == ']' {
				if i+1 < len(s) && s[i+1] == ':' {
					return s[:i+1], s[i+2:], true
				}
				return s[:i+1], "", false
			}
		}
		return s, "", false
	}
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ':' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// BoundHostString is the stored form of a bound host r (as [ParseBoundHost] returns it): the
// host alone for port 443, "host:port" or "[v6]:port" otherwise. An IPv6 address on port 443
// is written without brackets, as bindings always stored it.
func BoundHostString(r EgressRule) string {
	if r.Port == BoundPort || r.Port == 0 {
		return r.Host
	}
	h := r.Host
	if a, err := netip.ParseAddr(h); err == nil && a.Is6() {
		h = "[" + h + "]"
	}
	return h + ":" + strconv.Itoa(int(r.Port))
}
