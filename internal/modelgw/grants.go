package modelgw

import (
	"cmp"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/grant"
)

// maxHostInError caps how much of a (possibly hostile) host an error repeats.
const maxHostInError = 80

// grants is the validated /fetch allow-list: the dispatch's egress rules (see
// [grant.EgressRule]: a host pattern, a port, methods and path prefixes).
type grants []grant.EgressRule

// newGrants validates the rules; the host patterns must also pass the egress policy's
// rules for host entries.
func newGrants(rules []grant.EgressRule) (grants, error) {
	hosts := make([]string, len(rules))
	for i, r := range rules {
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("gateway config: egress grant: %w", err)
		}
		hosts[i] = r.Host
	}
	if err := (egress.Policy{Hosts: hosts}).Validate(); err != nil {
		return nil, fmt.Errorf("gateway config: egress grant: %w", err)
	}
	return append(grants{}, rules...), nil
}

// check refuses u unless its host and port are granted and, where a rule restricts them,
// method and path. It judges the host net/http will dial: the URL's Hostname, with IP literals
// in canonical form and names lowercased; a name that is not plain ASCII is refused (net/http
// would convert it with IDNA first).
func (gs grants) check(u *url.URL, method string) error {
	raw, host, port, err := fetchTarget(u)
	if err != nil {
		return err
	}
	if !grant.HostGranted(gs, host, port) {
		// As sent, not lowercased: a secret in it must still be the form the redactor masks.
		if gs.anyPort(host) {
			return &refusal{msg: fmt.Sprintf("host %s is not granted on port %d", quoted(raw, maxHostInError), port)}
		}
		return &refusal{msg: fmt.Sprintf("host %s is not granted", quoted(raw, maxHostInError))}
	}
	path := cmp.Or(u.Path, "/")
	if !grant.RequestAllowed(gs, host, port, method, path) {
		return &refusal{msg: fmt.Sprintf("%s of this path of host %s is not granted", method, quoted(raw, maxHostInError))}
	}
	return nil
}

// fetchTarget is the host and port net/http will dial for u: the URL's Hostname as sent
// (raw), and canonical (IP literals in canonical form, names lowercased), with the scheme's
// port when none is given. A name that is not plain ASCII is refused (net/http would convert
// it with IDNA first).
func fetchTarget(u *url.URL) (raw, host string, port uint16, err error) {
	raw = u.Hostname()
	if raw == "" {
		return "", "", 0, &refusal{msg: "URL has no host"}
	}
	host = raw
	if ip, perr := netip.ParseAddr(raw); perr == nil {
		if ip.Zone() != "" {
			return raw, "", 0, &refusal{msg: fmt.Sprintf("host %s has a zone", quoted(raw, maxHostInError))}
		}
		host = ip.String()
	} else {
		for i := 0; i < len(raw); i++ {
			if raw[i] >= 0x80 {
				return raw, "", 0, &refusal{msg: fmt.Sprintf("host %s is not ASCII (write the xn-- form)", quoted(raw, maxHostInError))}
			}
		}
		host = strings.ToLower(raw)
	}
	port = 443
	if u.Scheme == "http" {
		port = 80
	}
	if p := u.Port(); p != "" {
		n, perr := strconv.ParseUint(p, 10, 16)
		if perr != nil || n == 0 {
			return raw, "", 0, &refusal{msg: "URL port is not a number from 1 to 65535"}
		}
		port = uint16(n)
	}
	return raw, host, port, nil
}

// anyPort reports whether some rule names host, whatever its port.
func (gs grants) anyPort(host string) bool {
	for _, r := range gs {
		if (grant.EgressRule{Host: r.Host}).MatchesHost(host, 1) {
			return true
		}
	}
	return false
}
