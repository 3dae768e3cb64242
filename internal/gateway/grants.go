package gateway

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"github.com/agora-dev/agora/internal/egress"
)

// maxHostInError caps how much of a (possibly hostile) host an error repeats.
const maxHostInError = 80

// grants is the validated /fetch allow-list: exact lowercase host names, canonical IP
// literals, and "*.domain" entries that match proper subdomains of domain only.
type grants []string

// newGrants validates entries with the egress policy's rules for host entries.
func newGrants(entries []string) (grants, error) {
	gs := append(grants{}, entries...)
	if err := (egress.Policy{Hosts: gs}).Validate(); err != nil {
		return nil, fmt.Errorf("gateway config: egress grant: %w", err)
	}
	return gs, nil
}

// allows reports whether the canonical host (lowercase name or canonical IP literal) is
// granted.
func (gs grants) allows(host string, isIP bool) bool {
	for _, g := range gs {
		if g == host {
			return true
		}
		if isIP {
			continue
		}
		if domain, ok := strings.CutPrefix(g, "*."); ok &&
			len(host) > len(domain)+1 && strings.HasSuffix(host, "."+domain) {
			return true
		}
	}
	return false
}

// check refuses u unless its host is granted. It judges the host net/http will dial: the
// URL's Hostname, with IP literals in canonical form and names lowercased; a name that is not
// plain ASCII is refused (net/http would convert it with IDNA first).
func (gs grants) check(u *url.URL) error {
	raw := u.Hostname()
	if raw == "" {
		return &refusal{msg: "URL has no host"}
	}
	host, isIP := raw, false
	if ip, err := netip.ParseAddr(raw); err == nil {
		if ip.Zone() != "" {
			return &refusal{msg: fmt.Sprintf("host %s has a zone", quoted(raw, maxHostInError))}
		}
		host, isIP = ip.String(), true
	} else {
		for i := 0; i < len(raw); i++ {
			if raw[i] >= 0x80 {
				return &refusal{msg: fmt.Sprintf("host %s is not ASCII (write the xn-- form)", quoted(raw, maxHostInError))}
			}
		}
		host = strings.ToLower(raw)
	}
	if !gs.allows(host, isIP) {
		// As sent, not lowercased: a secret in it must still be the form the redactor masks.
		return &refusal{msg: fmt.Sprintf("host %s is not granted", quoted(raw, maxHostInError))}
	}
	return nil
}
