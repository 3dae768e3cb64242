package egress

import (
	"fmt"
	"net/netip"
	"strings"
)

// Policy says which destinations are allowed beyond the public internet. The zero Policy allows
// any public host and address and nothing else. A Policy is read-only once handed to
// [NewDialer], which copies it.
type Policy struct {
	// AllowPrivate lists prefixes that may be dialed even though they are private, loopback,
	// link-local or otherwise not public (an explicit allow-list from agora.yaml, e.g.
	// 10.1.2.0/24, or 127.0.0.1/32 in tests). It never admits the unspecified address,
	// multicast, broadcast, reserved space, cloud metadata endpoints or zoned addresses.
	// IPv4 prefixes also cover the IPv4-mapped IPv6 form of their addresses.
	// Empty by default: deny.
	AllowPrivate []netip.Prefix

	// Hosts, when non-nil, restricts dialing to these hosts: an exact lowercase host name
	// ("api.example.com"), "*.example.com" for any subdomain of example.com (not example.com
	// itself), or a canonical IP literal matched exactly. nil means any public host; an empty
	// non-nil slice means none. An entry that is not lowercase never matches; use
	// [Policy.Validate] to catch it.
	Hosts []string
}

// Validate reports the first malformed entry of p: a prefix that is invalid, IPv4-mapped, has
// host bits set or allows every address, or a Hosts entry that is not a lowercase host name,
// "*." followed by one, or a canonical IP literal.
func (p Policy) Validate() error {
	for _, pfx := range p.AllowPrivate {
		switch {
		case !pfx.IsValid():
			return fmt.Errorf("egress policy: allow-private prefix %s: invalid", pfx)
		case pfx.Addr().Is4In6():
			return fmt.Errorf("egress policy: allow-private prefix %s: IPv4-mapped; write the IPv4 prefix", pfx)
		case pfx != pfx.Masked():
			return fmt.Errorf("egress policy: allow-private prefix %s: host bits set (want %s)", pfx, pfx.Masked())
		case pfx.Bits() == 0:
			return fmt.Errorf("egress policy: allow-private prefix %s: allows every address; list the private ranges meant", pfx)
		}
	}
	for _, h := range p.Hosts {
		if err := validHostEntry(h); err != nil {
			return fmt.Errorf("egress policy: host %q: %s", h, err)
		}
	}
	return nil
}

func validHostEntry(h string) error {
	if ip, err := netip.ParseAddr(h); err == nil {
		if ip.Zone() != "" {
			return fmt.Errorf("IP literal with a zone")
		}
		if ip.String() != h {
			return fmt.Errorf("IP literal not in canonical form %s", ip)
		}
		return nil
	}
	name := strings.TrimPrefix(h, "*.")
	if strings.ToLower(name) != name {
		return fmt.Errorf("not lowercase")
	}
	if reason := checkName(name); reason != "" {
		return fmt.Errorf("%s", reason)
	}
	return nil
}

// allowsPrivate reports whether ip (unmapped) falls in an AllowPrivate prefix.
func (p Policy) allowsPrivate(ip netip.Addr) bool {
	for _, pfx := range p.AllowPrivate {
		if pfx.Contains(ip) {
			return true
		}
	}
	return false
}

// allowsHost reports whether the canonical (lowercase) host passes the Hosts allow-list.
func (p Policy) allowsHost(host string, isIP bool) bool {
	if p.Hosts == nil {
		return true
	}
	for _, h := range p.Hosts {
		if h == host {
			return true
		}
		if isIP {
			continue
		}
		if suffix, ok := strings.CutPrefix(h, "*"); ok && strings.HasPrefix(suffix, ".") &&
			len(host) > len(suffix) && strings.HasSuffix(host, suffix) {
			return true
		}
	}
	return false
}
