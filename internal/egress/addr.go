package egress

import (
	"fmt"
	"net/netip"
)

// rule denies the addresses in prefix for reason. A hard rule holds whatever
// [Policy.AllowPrivate] says: these addresses are never a legitimate destination.
type rule struct {
	prefix netip.Prefix
	reason string
	hard   bool
}

func deny(prefix, reason string) rule {
	return rule{prefix: netip.MustParsePrefix(prefix), reason: reason}
}

func denyHard(prefix, reason string) rule {
	return rule{prefix: netip.MustParsePrefix(prefix), reason: reason, hard: true}
}

const metadataReason = "cloud metadata endpoint"

// v4Rules are checked in order; more specific prefixes come first so the reason is precise.
var v4Rules = []rule{
	denyHard("0.0.0.0/32", "unspecified address"),
	denyHard("255.255.255.255/32", "broadcast"),
	denyHard("169.254.169.254/32", metadataReason),
	denyHard("169.254.170.2/32", metadataReason+" (ECS)"),
	denyHard("100.100.100.200/32", metadataReason+" (Alibaba)"),
	denyHard("0.0.0.0/8", `"this network" (RFC 791)`),
	deny("127.0.0.0/8", "loopback"),
	deny("10.0.0.0/8", "private (RFC 1918)"),
	deny("172.16.0.0/12", "private (RFC 1918)"),
	deny("192.168.0.0/16", "private (RFC 1918)"),
	deny("169.254.0.0/16", "link-local"),
	deny("100.64.0.0/10", "shared address space, CGNAT (RFC 6598)"),
	deny("192.0.0.0/24", "IETF protocol assignments (RFC 6890)"),
	deny("192.0.2.0/24", "documentation (RFC 5737)"),
	deny("198.51.100.0/24", "documentation (RFC 5737)"),
	deny("203.0.113.0/24", "documentation (RFC 5737)"),
	deny("198.18.0.0/15", "benchmarking (RFC 2544)"),
	deny("192.88.99.0/24", "6to4 relay anycast (RFC 7526)"),
	denyHard("224.0.0.0/4", "multicast"),
	denyHard("240.0.0.0/4", "reserved (RFC 1112)"),
}

// v6Rules are checked in order after IPv4-mapped addresses are unmapped and the prefixes that
// embed an IPv4 address (NAT64, 6to4) are handled.
var v6Rules = []rule{
	denyHard("::/128", "unspecified address"),
	deny("::1/128", "loopback"),
	denyHard("::/96", "IPv4-compatible IPv6 (deprecated, RFC 4291)"),
	deny("64:ff9b:1::/48", "local-use NAT64 (RFC 8215)"),
	deny("2001::/32", "Teredo (RFC 4380)"),
	deny("2001:db8::/32", "documentation (RFC 3849)"),
	deny("2001::/23", "IETF protocol assignments (RFC 6890)"),
	deny("3fff::/20", "documentation (RFC 9637)"),
	deny("5f00::/16", "segment routing SIDs (RFC 9602)"),
	deny("100::/64", "discard-only (RFC 6666)"),
	denyHard("fd00:ec2::254/128", metadataReason),
	deny("fc00::/7", "unique local (RFC 4193)"),
	deny("fe80::/10", "link-local"),
	deny("fec0::/10", "site-local (deprecated, RFC 3879)"),
	denyHard("ff00::/8", "multicast"),
}

var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour  = netip.MustParsePrefix("2002::/16")
	globalUni6 = netip.MustParsePrefix("2000::/3")
)

// CheckAddr reports why ip may not be dialed under p, as a [*DeniedError], or nil if it may.
// An IPv4-mapped IPv6 address is judged as the IPv4 address it carries; NAT64 (64:ff9b::/96) and
// 6to4 (2002::/16) addresses as the IPv4 address they embed. Addresses with a zone are refused.
func (p Policy) CheckAddr(ip netip.Addr) error {
	reason, hard := classify(ip)
	if reason == "" {
		return nil
	}
	if !hard && p.allowsPrivate(ip.Unmap()) {
		return nil
	}
	return &DeniedError{Addr: ip, Reason: reason}
}

// classify returns why ip is not a public unicast address ("" if it is) and whether the reason
// is one no policy may override.
func classify(ip netip.Addr) (reason string, hard bool) {
	switch {
	case !ip.IsValid():
		return "invalid address", true
	case ip.Zone() != "":
		return "address with a zone", true
	case ip.Is4():
		return match(ip, v4Rules)
	case ip.Is4In6():
		reason, hard := match(ip.Unmap(), v4Rules)
		if reason != "" {
			reason += ", IPv4-mapped"
		}
		return reason, hard
	case nat64.Contains(ip):
		return embedded(ip, 12, "NAT64")
	case sixToFour.Contains(ip):
		return embedded(ip, 2, "6to4")
	}
	if reason, hard := match(ip, v6Rules); reason != "" {
		return reason, hard
	}
	if !globalUni6.Contains(ip) {
		return "outside IPv6 global unicast (2000::/3)", false
	}
	return "", false
}

// embedded judges the IPv4 address held in bytes [at, at+4) of ip.
func embedded(ip netip.Addr, at int, kind string) (string, bool) {
	b := ip.As16()
	v4 := netip.AddrFrom4([4]byte(b[at : at+4]))
	reason, hard := match(v4, v4Rules)
	if reason == "" {
		return "", false
	}
	return fmt.Sprintf("%s address embedding %s: %s", kind, v4, reason), hard
}

func match(ip netip.Addr, rules []rule) (string, bool) {
	for _, r := range rules {
		if r.prefix.Contains(ip) {
			return r.reason, r.hard
		}
	}
	return "", false
}
