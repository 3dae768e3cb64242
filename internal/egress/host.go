package egress

import (
	"fmt"
	"net/netip"
	"strings"
)

const (
	maxNameLen  = 253 // RFC 1035, in presentation form without the final dot
	maxLabelLen = 63
)

// CheckHost vets a host as it appears in a URL or a dial address, without resolving it: a bare
// host name or IP literal, no port, no brackets. An IP literal is judged by [Policy.CheckAddr].
// A name must be a valid ASCII DNS name (letters, digits, hyphens; no trailing dot; IDNA is not
// supported, so names with other characters are refused) whose last label does not start with a
// digit; non-canonical IPv4 forms (2130706433, 0x7f.1, 0177.0.0.1, 127.1, 127.0.0.1.) are
// refused. Names are compared lowercase. Both must pass [Policy.Hosts] when it is set. Every
// refusal is a [*DeniedError].
func (p Policy) CheckHost(host string) error {
	_, _, err := p.vetHost(host)
	return err
}

// vetHost returns the canonical form of host: either a lowercase name (ip invalid) or a
// literal address that passed the policy.
func (p Policy) vetHost(host string) (name string, ip netip.Addr, err error) {
	if host == "" {
		return "", netip.Addr{}, &DeniedError{Reason: "empty host"}
	}
	if ip, perr := netip.ParseAddr(host); perr == nil {
		if err := p.CheckAddr(ip); err != nil {
			err.(*DeniedError).Host = host
			return "", netip.Addr{}, err
		}
		if !p.allowsHost(ip.String(), true) {
			return "", netip.Addr{}, &DeniedError{Host: host, Addr: ip, Reason: "not in the allowed hosts"}
		}
		return "", ip, nil
	}
	if ip, ok := parseIPv4Literal(host); ok {
		return "", netip.Addr{}, &DeniedError{Host: host, Addr: ip,
			Reason: "non-canonical IPv4 literal (write it as " + ip.String() + ")"}
	}
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			return "", netip.Addr{}, &DeniedError{Host: host,
				Reason: "non-ASCII host name (IDNA is not supported; write the xn-- form)"}
		}
	}
	name = strings.ToLower(host)
	if reason := checkName(name); reason != "" {
		return "", netip.Addr{}, &DeniedError{Host: host, Reason: reason}
	}
	if !p.allowsHost(name, false) {
		return "", netip.Addr{}, &DeniedError{Host: host, Reason: "not in the allowed hosts"}
	}
	return name, netip.Addr{}, nil
}

// checkName returns why the lowercase ASCII name is not an acceptable DNS host name, or "".
func checkName(name string) string {
	switch {
	case name == "":
		return "empty host"
	case len(name) > maxNameLen:
		return "host name longer than 253 bytes"
	case name[len(name)-1] == '.':
		return "host name ends in a dot"
	}
	last := 0
	for start := 0; start <= len(name); {
		end := strings.IndexByte(name[start:], '.')
		if end < 0 {
			end = len(name)
		} else {
			end += start
		}
		if reason := checkLabel(name[start:end]); reason != "" {
			return reason
		}
		last = start
		start = end + 1
	}
	if c := name[last]; c >= '0' && c <= '9' {
		return "last label starts with a digit (not a host name, not a canonical IP address)"
	}
	return ""
}

func checkLabel(label string) string {
	switch {
	case label == "":
		return "empty label in host name"
	case len(label) > maxLabelLen:
		return "label longer than 63 bytes in host name"
	case label[0] == '-' || label[len(label)-1] == '-':
		return "label starts or ends with a hyphen in host name"
	}
	for i := 0; i < len(label); i++ {
		c := label[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Sprintf("character %q not allowed in a host name", c)
		}
	}
	return ""
}
