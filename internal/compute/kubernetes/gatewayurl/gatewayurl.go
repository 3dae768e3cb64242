// Package gatewayurl reads the network gateway's URL as a kubernetes target names it:
// exactly https://HOST:PORT[/], HOST an IP address or a DNS name a pod's hostAliases takes.
// It runs on the host over a config value, imports only the standard library, and lives
// apart from the kubernetes provider (which links client-go) so its fuzz target builds
// without the provider's import graph.
package gatewayurl

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Addr is a gateway URL read: an IP address, or a DNS name the provider resolves when it
// makes each Job.
type Addr struct {
	Name string     // the DNS name, "" when the URL holds an IP address
	IP   netip.Addr // the IP address when Name is ""
	Port uint16
}

// Parse accepts exactly https://HOST:PORT[/], HOST an IP address or a DNS name.
func Parse(s string) (Addr, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.User != nil || (u.Path != "" && u.Path != "/") ||
		u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return Addr{}, fmt.Errorf("gateway %q: want https://HOST:PORT", s)
	}
	port, err := strconv.ParseUint(u.Port(), 10, 16)
	if err != nil || port == 0 {
		return Addr{}, fmt.Errorf("gateway %q: want an explicit port", s)
	}
	host := u.Hostname()
	if addr, err := netip.ParseAddr(host); err == nil {
		if addr.Zone() != "" {
			return Addr{}, fmt.Errorf("gateway %q: an address with a zone is not reachable from a pod", s)
		}
		return Addr{IP: addr.Unmap(), Port: uint16(port)}, nil
	}
	if !ValidDNSName(host) || isLocalhost(host) {
		return Addr{}, fmt.Errorf("gateway %q: %s", s, whyNotDNSName(host))
	}
	return Addr{Name: host, Port: uint16(port)}, nil
}

// ValidDNSName reports whether s is a lowercase RFC 1123 name with a dot, as a pod's
// hostAliases takes it: labels of [a-z0-9-], not starting or ending with '-', at most 63
// bytes each and 253 in all. A single label is refused: a pod's resolver would add its
// search domains to it.
func ValidDNSName(s string) bool {
	if len(s) > 253 || !strings.Contains(s, ".") {
		return false
	}
	for l := range strings.SplitSeq(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	// All digits and dots is an IPv4 address written oddly ("10.1"), never a name.
	return strings.Trim(s, "0123456789.") != ""
}

// whyNotDNSName says, for a host ValidDNSName refused, what is wrong with it and what to write
// instead: the usual mistakes are localhost, a short name and capitals.
func whyNotDNSName(host string) string {
	switch lower := strings.ToLower(host); {
	case isLocalhost(lower):
		return "localhost is this machine's loopback, which no pod can reach; " +
			"give an address of this host that the cluster's pods reach (the node's IP, or a DNS name for it)"
	case lower != host && ValidDNSName(lower):
		return fmt.Sprintf("write the name in lowercase (%s): a pod's /etc/hosts matches it exactly", lower)
	case !strings.Contains(host, "."):
		return fmt.Sprintf("%q is a single-label name, which a pod's resolver would extend with its search domains; "+
			"give a fully qualified name (with a dot) or an IP address", host)
	default:
		return "host must be an IP address or a DNS name of lowercase letters, digits, '-' and dots (at most 253 bytes, labels of at most 63)"
	}
}

// isLocalhost reports whether host is localhost or a name beneath it (RFC 6761: they resolve
// to loopback addresses, which the provider's resolving refuses anyway; saying so at parse is
// clearer).
func isLocalhost(host string) bool {
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}
