package egress

import (
	"net/netip"
	"strings"
)

// parseIPv4Literal parses s the lenient way inet_aton(3) and the WHATWG URL standard do: one to
// four dot-separated parts, each decimal, octal (leading 0) or hex (leading 0x), the last part
// filling the remaining bytes (127.1, 2130706433), and one trailing dot. It exists to recognise
// hosts that other software would read as an IPv4 address, so they can be refused by name
// instead of being resolved; egress never dials what it returns.
func parseIPv4Literal(s string) (netip.Addr, bool) {
	s = strings.TrimSuffix(s, ".")
	if s == "" {
		return netip.Addr{}, false
	}
	var parts [4]uint64
	n := 0
	for {
		if n == len(parts) {
			return netip.Addr{}, false
		}
		part, rest, more := strings.Cut(s, ".")
		v, ok := parseIPv4Part(part)
		if !ok {
			return netip.Addr{}, false
		}
		parts[n] = v
		n++
		if !more {
			break
		}
		s = rest
	}
	for _, v := range parts[:n-1] {
		if v > 0xff {
			return netip.Addr{}, false
		}
	}
	if parts[n-1] >= 1<<(8*(5-n)) {
		return netip.Addr{}, false
	}
	v := parts[n-1]
	for i, p := range parts[:n-1] {
		v |= p << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// parseIPv4Part parses one part of a lenient IPv4 literal; values past 32 bits fail.
func parseIPv4Part(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := uint64(10)
	switch {
	case len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		base, s = 16, s[2:] // "0x" alone is 0, as in WHATWG
	case len(s) >= 2 && s[0] == '0':
		base, s = 8, s[1:]
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		d, ok := digitValue(s[i])
		if !ok || d >= base {
			return 0, false
		}
		v = v*base + d
		if v > 0xffffffff {
			return 0, false
		}
	}
	return v, true
}

func digitValue(c byte) (uint64, bool) {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0'), true
	case c >= 'a' && c <= 'f':
		return uint64(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return uint64(c-'A') + 10, true
	}
	return 0, false
}
