package grant

import (
	"regexp"
	"slices"
	"strings"
)

var egressPattern = regexp.MustCompile(`^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidEgress reports whether h is well-formed as an egress entry: a lowercase host name of
// dot-separated labels (letters, digits and inner hyphens, at most 63 each, 253 in all),
// optionally after "*." for its subdomains.
func ValidEgress(h string) bool { return len(h) <= 253 && egressPattern.MatchString(h) }

// HostGranted reports whether host (as in a URL, without port) is allowed by the egress
// entries: equal to an entry, or a strict subdomain of a "*.domain" entry. Comparison is
// case-insensitive; a host with a trailing dot matches nothing.
func HostGranted(egress []string, host string) bool {
	if host == "" {
		return false
	}
	host = strings.ToLower(host)
	for _, e := range egress {
		if e == host {
			return true
		}
		if suffix, ok := strings.CutPrefix(e, "*"); ok && strings.HasPrefix(suffix, ".") &&
			len(host) > len(suffix) && strings.HasSuffix(host, suffix) {
			return true
		}
	}
	return false
}

// hostCoveredBy reports whether the child entry h (a host or "*.domain") is within the
// parent entries.
func hostCoveredBy(parent []string, h string) bool {
	if slices.Contains(parent, h) {
		return true
	}
	// "*.a.example.com" is covered when "x.a.example.com" for every x would be, which is
	// exactly when "a.example.com" is a strict subdomain of a parent "*.domain".
	probe := h
	if rest, ok := strings.CutPrefix(h, "*."); ok {
		probe = "x." + rest
	}
	for _, e := range parent {
		if strings.HasPrefix(e, "*.") && HostGranted([]string{e}, probe) {
			return true
		}
	}
	return false
}
