package egress

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

func TestParseIPv4Literal(t *testing.T) {
	tests := []struct {
		in   string
		want string // empty: not an IPv4 literal
	}{
		{"127.0.0.1", "127.0.0.1"},
		{"127.0.0.1.", "127.0.0.1"},
		{"2130706433", "127.0.0.1"},
		{"017700000001", "127.0.0.1"},
		{"0x7f000001", "127.0.0.1"},
		{"0X7F000001", "127.0.0.1"},
		{"0x7f.0.0.1", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"0177.0.0.01", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"10.65535", "10.0.255.255"},
		{"10.0.65535", "10.0.255.255"},
		{"1.16777215", "1.255.255.255"},
		{"4294967295", "255.255.255.255"},
		{"0x", "0.0.0.0"},
		{"0", "0.0.0.0"},
		{"0x0000000000000001", "0.0.0.1"},
		{"", ""},
		{".", ""},
		{"..", ""},
		{"1..1", ""},
		{".1.1", ""},
		{"127.0.0.1..", ""},
		{"4294967296", ""},
		{"0x100000000", ""},
		{"256.0.0.1", ""},
		{"1.256.0.1", ""},
		{"1.2.65536", ""},
		{"1.16777216", ""},
		{"1.2.3.256", ""},
		{"1.2.3.4.5", ""},
		{"08", ""},
		{"09.1.1.1", ""},
		{"0xg", ""},
		{"1e3", ""},
		{"+1.1.1.1", ""},
		{"-1.1.1.1", ""},
		{" 1.1.1.1", ""},
		{"1_000", ""},
		{"0b1", ""},
		{"0o7", ""},
		{"example.com", ""},
		{"99999999999999999999999", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := parseIPv4Literal(tt.in)
			if tt.want == "" {
				if ok {
					t.Fatalf("got %v, want not an IPv4 literal", got)
				}
				return
			}
			if !ok || got != netip.MustParseAddr(tt.want) {
				t.Fatalf("got %v, %v, want %s, true", got, ok, tt.want)
			}
		})
	}
}

// referenceIPv4 is a second, strconv-based statement of the inet_aton grammar.
func referenceIPv4(s string) (netip.Addr, bool) {
	s = strings.TrimSuffix(s, ".")
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		var v uint64
		var err error
		switch {
		case p == "":
			return netip.Addr{}, false
		case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
			if p[2:] != "" {
				v, err = strconv.ParseUint(p[2:], 16, 32)
			}
		case len(p) > 1 && p[0] == '0':
			v, err = strconv.ParseUint(p[1:], 8, 32)
		default:
			v, err = strconv.ParseUint(p, 10, 32)
		}
		if err != nil || strings.ContainsAny(p, "+-_") {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	n := len(vals)
	var v uint64
	for i, x := range vals[:n-1] {
		if x > 255 {
			return netip.Addr{}, false
		}
		v |= x << (8 * (3 - i))
	}
	if vals[n-1] >= 1<<(8*(5-n)) {
		return netip.Addr{}, false
	}
	v |= vals[n-1]
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func FuzzParseIPv4Literal(f *testing.F) {
	for _, s := range []string{
		"127.0.0.1", "127.0.0.1.", "2130706433", "0x7f.1", "0177.0.0.1", "017700000001", "127.1",
		"10.0.1", "0x", "0", "1..1", "256.0.0.1", "4294967296", "1.2.3.4.5", "08", "example.com",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parseIPv4Literal(s)
		ref, refOK := referenceIPv4(s)
		if ok != refOK || got != ref {
			t.Fatalf("parseIPv4Literal(%q) = %v, %v; reference says %v, %v", s, got, ok, ref, refOK)
		}
		if !ok {
			if got.IsValid() {
				t.Fatalf("parseIPv4Literal(%q) failed but returned %v", s, got)
			}
			if ip, err := netip.ParseAddr(s); err == nil && ip.Is4() {
				t.Fatalf("parseIPv4Literal(%q) rejects what netip parses as %v", s, ip)
			}
			return
		}
		if !got.Is4() {
			t.Fatalf("parseIPv4Literal(%q) = %v, want an IPv4 address", s, got)
		}
		if ip, err := netip.ParseAddr(s); err == nil && ip != got {
			t.Fatalf("parseIPv4Literal(%q) = %v, netip says %v", s, got, ip)
		}
		if again, ok := parseIPv4Literal(got.String()); !ok || again != got {
			t.Fatalf("round trip of %v gave %v, %v", got, again, ok)
		}
	})
}
