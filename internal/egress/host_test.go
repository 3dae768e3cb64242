package egress

import (
	"errors"
	"net/netip"
	"regexp"
	"strings"
	"testing"
)

func TestPolicy_CheckHost(t *testing.T) {
	tests := []struct {
		name   string
		host   string
		reason string // empty: allowed
		addr   string // the address a refusal names, if any
	}{
		{"name", "api.example.com", "", ""},
		{"name uppercase is lowercased", "API.Example.COM", "", ""},
		{"single label", "intranet", "", ""},
		{"digits in labels", "1.2.3.4.example.com", "", ""},
		{"hyphen inside label", "a-b.example.com", "", ""},
		{"xn-- form", "xn--bcher-kva.de", "", ""},
		{"public ipv4", "1.1.1.1", "", ""},
		{"public ipv6", "2606:4700::1111", "", ""},
		{"public ipv6 uncompressed", "2606:4700:0:0:0:0:0:1111", "", ""},
		{"public ipv4-mapped", "::ffff:1.1.1.1", "", ""},

		{"empty", "", "empty host", ""},
		{"loopback literal", "127.0.0.1", "loopback", "127.0.0.1"},
		{"metadata literal", "169.254.169.254", "metadata", "169.254.169.254"},
		{"loopback v6 literal", "::1", "loopback", "::1"},
		{"ipv4-mapped loopback literal", "::ffff:127.0.0.1", "loopback", "::ffff:127.0.0.1"},
		{"ipv4-mapped loopback hex", "::ffff:7f00:1", "loopback", "::ffff:127.0.0.1"},
		{"ipv4-compatible literal", "::127.0.0.1", "IPv4-compatible", "::127.0.0.1"},
		{"nat64 literal", "64:ff9b::127.0.0.1", "NAT64", "64:ff9b::7f00:1"},
		{"6to4 literal", "2002:c0a8:101::1", "6to4 address embedding 192.168.1.1", "2002:c0a8:101::1"},
		{"zone", "fe80::1%eth0", "zone", ""},
		{"zone on public v6", "2606:4700::1111%25eth0", "zone", ""},
		{"bracketed v6", "[::1]", "not allowed", ""},

		{"decimal", "2130706433", "non-canonical IPv4", "127.0.0.1"},
		{"octal dotted", "0177.0.0.1", "non-canonical IPv4", "127.0.0.1"},
		{"octal whole", "017700000001", "non-canonical IPv4", "127.0.0.1"},
		{"hex dotted", "0x7f.0.0.1", "non-canonical IPv4", "127.0.0.1"},
		{"hex whole", "0x7f000001", "non-canonical IPv4", "127.0.0.1"},
		{"hex uppercase prefix", "0X7F000001", "non-canonical IPv4", "127.0.0.1"},
		{"short form", "127.1", "non-canonical IPv4", "127.0.0.1"},
		{"three part form", "10.0.1", "non-canonical IPv4", "10.0.0.1"},
		{"leading zero octet", "127.0.0.01", "non-canonical IPv4", "127.0.0.1"},
		{"trailing dot on ipv4", "127.0.0.1.", "non-canonical IPv4", "127.0.0.1"},
		{"trailing dot on public ipv4", "1.1.1.1.", "non-canonical IPv4", "1.1.1.1"},
		{"hex public", "0x01010101", "non-canonical IPv4", "1.1.1.1"},
		{"metadata decimal", "2852039166", "non-canonical IPv4", "169.254.169.254"},
		{"out of range octet", "256.0.0.1", "last label starts with a digit", ""},
		{"five parts", "1.2.3.4.5", "last label starts with a digit", ""},
		{"bad octal", "08.0.0.1", "last label starts with a digit", ""},
		{"numeric last label", "example.123", "last label starts with a digit", ""},

		{"trailing dot on name", "example.com.", "ends in a dot", ""},
		{"double trailing dot", "example.com..", "ends in a dot", ""},
		{"empty label", "a..example.com", "empty label", ""},
		{"leading dot", ".example.com", "empty label", ""},
		{"leading hyphen", "-a.example.com", "hyphen", ""},
		{"trailing hyphen", "a-.example.com", "hyphen", ""},
		{"underscore", "a_b.example.com", "not allowed", ""},
		{"space", "example.com ", "not allowed", ""},
		{"at sign", "user@example.com", "not allowed", ""},
		{"port", "example.com:80", "not allowed", ""},
		{"percent", "exa%6dple.com", "not allowed", ""},
		{"non-ascii", "bücher.de", "non-ASCII", ""},
		{"fullwidth dot", "example。com", "non-ASCII", ""},
		{"label 64 bytes", strings.Repeat("a", 64) + ".com", "longer than 63", ""},
		{"name 254 bytes", strings.Repeat("a.", 126) + "ab", "longer than 253", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Policy{}.CheckHost(tt.host)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			de := wantDenied(t, err, tt.reason, tt.addr)
			if tt.host != "" && de.Host != tt.host {
				t.Errorf("got Host %q, want %q", de.Host, tt.host)
			}
		})
	}
	t.Run("label 63 and name 253 bytes are allowed", func(t *testing.T) {
		for _, h := range []string{strings.Repeat("a", 63) + ".com", strings.Repeat("a.", 125) + "abc"} {
			if err := (Policy{}).CheckHost(h); err != nil {
				t.Errorf("CheckHost(%d bytes): got %v, want nil", len(h), err)
			}
		}
	})
}

func TestPolicy_CheckHost_Hosts(t *testing.T) {
	p := Policy{Hosts: []string{"api.example.com", "*.svc.example.net", "1.1.1.1", "2606:4700::1111"}}
	tests := []struct {
		host  string
		allow bool
	}{
		{"api.example.com", true},
		{"API.EXAMPLE.COM", true},
		{"example.com", false},
		{"x.api.example.com", false},
		{"api.example.com.evil.test", false},
		{"evilapi.example.com", false},
		{"a.svc.example.net", true},
		{"a.b.svc.example.net", true},
		{"svc.example.net", false},
		{"xsvc.example.net", false},
		{"1.1.1.1", true},
		{"8.8.8.8", false},
		{"2606:4700::1111", true},
		{"2606:4700:0:0:0:0:0:1111", true}, // the same address
		{"::ffff:1.1.1.1", false},          // a different literal is not listed
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			err := p.CheckHost(tt.host)
			if tt.allow {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			wantDenied(t, err, "not in the allowed hosts", "")
		})
	}

	t.Run("empty non-nil list allows nothing", func(t *testing.T) {
		wantDenied(t, Policy{Hosts: []string{}}.CheckHost("api.example.com"), "not in the allowed hosts", "")
		wantDenied(t, Policy{Hosts: []string{}}.CheckHost("1.1.1.1"), "not in the allowed hosts", "")
	})
	t.Run("wildcard does not match ip literals", func(t *testing.T) {
		wantDenied(t, Policy{Hosts: []string{"*.1.1.1"}}.CheckHost("1.1.1.1"), "not in the allowed hosts", "")
	})
	t.Run("listing does not admit a private address", func(t *testing.T) {
		wantDenied(t, Policy{Hosts: []string{"127.0.0.1"}}.CheckHost("127.0.0.1"), "loopback", "127.0.0.1")
	})
	t.Run("uppercase entry never matches", func(t *testing.T) {
		wantDenied(t, Policy{Hosts: []string{"API.example.com"}}.CheckHost("api.example.com"), "not in the allowed hosts", "")
	})
}

func TestDeniedError_Error(t *testing.T) {
	tests := []struct {
		name string
		err  *DeniedError
		want string
	}{
		{"host and address", &DeniedError{Host: "svc.test", Addr: netip.MustParseAddr("10.0.0.1"), Reason: "private (RFC 1918)"},
			`egress denied: host "svc.test" address 10.0.0.1: private (RFC 1918)`},
		{"address only", &DeniedError{Addr: netip.MustParseAddr("::1"), Reason: "loopback"},
			`egress denied: address ::1: loopback`},
		{"host only", &DeniedError{Host: "a_b", Reason: "character '_' not allowed in a host name"},
			`egress denied: host "a_b": character '_' not allowed in a host name`},
		{"long host is cut", &DeniedError{Host: strings.Repeat("x", 300), Reason: "r"},
			`egress denied: host "` + strings.Repeat("x", maxHostInError) + `...": r`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if !errors.Is(tt.err, ErrDenied) {
				t.Errorf("errors.Is(err, ErrDenied) = false, want true")
			}
		})
	}
}

// hostNameRE is an independent statement of the names CheckHost accepts: LDH labels of 1-63
// bytes without edge hyphens, the last starting with a letter.
var hostNameRE = regexp.MustCompile(`^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$`)

func FuzzCheckHost(f *testing.F) {
	for _, s := range []string{
		"api.example.com", "API.Example.com", "1.1.1.1", "127.0.0.1", "2130706433", "0x7f.1",
		"0177.0.0.1", "127.1", "127.0.0.1.", "example.com.", "::1", "::ffff:127.0.0.1",
		"fe80::1%eth0", "64:ff9b::7f00:1", "2002:a00:1::1", "bücher.de", "a..b", "-a.com",
		"a_b.com", "2606:4700::1111", "0x", "0.", ".", "[::1]", "1.2.3.4.example.com",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		err := Policy{}.CheckHost(host)
		if err != nil {
			if !errors.Is(err, ErrDenied) {
				t.Fatalf("CheckHost(%q) = %v, want an ErrDenied refusal", host, err)
			}
			// The host is cut to maxHostInError bytes, each quoted as at most 4 (\xNN).
			if len(err.Error()) > 4*maxHostInError+200 {
				t.Fatalf("CheckHost(%q): error is %d bytes, want it capped", host, len(err.Error()))
			}
			return
		}
		if ip, perr := netip.ParseAddr(host); perr == nil {
			if ip.Zone() != "" {
				t.Fatalf("CheckHost(%q) allowed an address with a zone", host)
			}
			if reason, _ := classify(ip); reason != "" {
				t.Fatalf("CheckHost(%q) allowed a non-public address (%s)", host, reason)
			}
			if ip.Is4() && ip.String() != host {
				t.Fatalf("CheckHost(%q) allowed a non-canonical IPv4 literal", host)
			}
			return
		}
		if len(host) > 253 || !hostNameRE.MatchString(strings.ToLower(host)) {
			t.Fatalf("CheckHost(%q) allowed something that is not a DNS host name", host)
		}
		if ip, ok := parseIPv4Literal(host); ok {
			t.Fatalf("CheckHost(%q) allowed a host that inet_aton reads as %s", host, ip)
		}
	})
}

func BenchmarkDialer_CheckURL(b *testing.B) {
	d := NewDialer(Policy{}, nil)
	dh := NewDialer(Policy{Hosts: []string{"a.example.com", "b.example.com", "*.api.example.com"}}, nil)
	for _, tt := range []struct {
		name string
		d    *Dialer
		url  string
	}{
		{"name", d, "https://api.example.com/v1/items?page=2"},
		{"uppercase name", d, "https://API.Example.com/v1"},
		{"ipv4", d, "http://1.1.1.1:8080/x"},
		{"ipv6", d, "http://[2606:4700::1111]/x"},
		{"hosts wildcard", dh, "https://eu.api.example.com/v1"},
		{"denied loopback", d, "http://127.0.0.1/"},
	} {
		u := mustParseURL(b, tt.url)
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = tt.d.CheckURL(u)
			}
		})
	}
}
