package grant

import (
	"regexp"
	"slices"
	"strings"
	"sync"
)

var egressPattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
})

// ValidEgress reports whether h is well-formed as an egress entry: a lowercase host name of
// dot-separated labels (letters, digits and inner hyphens, at most 63 each, 253 in all),
// optionally after "*." for its subdomains.
func ValidEgress(h string) bool { return len(h) <= 253 && egressPattern().MatchString(h) }

// HostGranted reports whether host (as in a URL, without port) on port is allowed by some
// egress rule: equal to its host, or a strict subdomain of a "*.domain" host, and its port
// when it names one. Comparison is case-insensitive; a host with a trailing dot matches
// nothing. Methods and paths are not considered: see [RequestAllowed].
func HostGranted(egress []EgressRule, host string, port uint16) bool {
	return DecideHost(egress, host, port).Allowed
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
		if strings.HasPrefix(e, "*.") && hostMatches(e, probe) {
			return true
		}
	}
	return false
}
