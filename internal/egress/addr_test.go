package egress

import (
	"net/netip"
	"testing"
)

func TestPolicy_CheckAddr_Denied(t *testing.T) {
	tests := []struct {
		name   string
		addr   string
		reason string
	}{
		{"unspecified v4", "0.0.0.0", "unspecified"},
		{"unspecified v6", "::", "unspecified"},
		{"loopback", "127.0.0.1", "loopback"},
		{"loopback top of 127/8", "127.255.255.254", "loopback"},
		{"loopback v6", "::1", "loopback"},
		{"rfc1918 10/8", "10.0.0.1", "RFC 1918"},
		{"rfc1918 172.16/12 low", "172.16.0.1", "RFC 1918"},
		{"rfc1918 172.16/12 high", "172.31.255.255", "RFC 1918"},
		{"rfc1918 192.168/16", "192.168.1.1", "RFC 1918"},
		{"link-local v4", "169.254.1.1", "link-local"},
		{"cloud metadata v4", "169.254.169.254", "metadata"},
		{"cloud metadata ecs", "169.254.170.2", "metadata"},
		{"cloud metadata alibaba", "100.100.100.200", "metadata"},
		{"cloud metadata v6", "fd00:ec2::254", "metadata"},
		{"link-local v6", "fe80::1", "link-local"},
		{"cgnat low", "100.64.0.1", "CGNAT"},
		{"cgnat high", "100.127.255.255", "CGNAT"},
		{"unique local fc", "fc00::1", "unique local"},
		{"unique local fd", "fd12:3456::1", "unique local"},
		{"multicast v4", "224.0.0.1", "multicast"},
		{"multicast v4 ssdp", "239.255.255.250", "multicast"},
		{"multicast v6", "ff02::1", "multicast"},
		{"broadcast", "255.255.255.255", "broadcast"},
		{"this network 0/8", "0.1.2.3", "this network"},
		{"ietf protocol assignments", "192.0.0.8", "IETF protocol"},
		{"documentation test-net-1", "192.0.2.1", "documentation"},
		{"documentation test-net-2", "198.51.100.1", "documentation"},
		{"documentation test-net-3", "203.0.113.1", "documentation"},
		{"benchmarking low", "198.18.0.1", "benchmarking"},
		{"benchmarking high", "198.19.255.255", "benchmarking"},
		{"6to4 relay anycast", "192.88.99.1", "6to4 relay"},
		{"reserved 240/4", "240.0.0.1", "reserved"},
		{"ipv4-mapped loopback", "::ffff:127.0.0.1", "loopback, IPv4-mapped"},
		{"ipv4-mapped private", "::ffff:10.0.0.1", "RFC 1918), IPv4-mapped"},
		{"ipv4-mapped metadata", "::ffff:169.254.169.254", "metadata"},
		{"ipv4-compatible loopback", "::127.0.0.1", "IPv4-compatible"},
		{"ipv4-compatible public", "::8.8.8.8", "IPv4-compatible"},
		{"nat64 loopback", "64:ff9b::7f00:1", "NAT64 address embedding 127.0.0.1: loopback"},
		{"nat64 metadata", "64:ff9b::a9fe:a9fe", "NAT64 address embedding 169.254.169.254"},
		{"nat64 private", "64:ff9b::a00:1", "RFC 1918"},
		{"local-use nat64", "64:ff9b:1::a00:1", "local-use NAT64"},
		{"6to4 private", "2002:a00:1::1", "6to4 address embedding 10.0.0.1"},
		{"6to4 loopback", "2002:7f00:1::", "6to4 address embedding 127.0.0.1"},
		{"teredo", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"},
		{"ietf protocol assignments v6", "2001:2::1", "IETF protocol"},
		{"documentation v6", "2001:db8::1", "documentation"},
		{"documentation v6 3fff", "3fff::1", "documentation"},
		{"discard-only", "100::1", "discard-only"},
		{"site-local", "fec0::1", "site-local"},
		{"outside global unicast", "4000::1", "global unicast"},
		{"zone link-local", "fe80::1%eth0", "zone"},
		{"zone public v6", "2606:4700::1111%eth0", "zone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Policy{}.CheckAddr(netip.MustParseAddr(tt.addr))
			wantDenied(t, err, tt.reason, tt.addr)
		})
	}
	t.Run("invalid", func(t *testing.T) {
		wantDenied(t, Policy{}.CheckAddr(netip.Addr{}), "invalid", "")
	})
}

func TestPolicy_CheckAddr_Public(t *testing.T) {
	for _, a := range []string{
		"1.1.1.1", "8.8.8.8", "9.9.9.9", "11.0.0.1", "172.15.255.255", "172.32.0.1",
		"100.63.255.255", "100.128.0.1", "192.167.255.255", "192.169.0.1", "223.255.255.255",
		"2606:4700::1111", "2001:4860:4860::8888", "2a00:1450:4001::1",
		"::ffff:1.1.1.1",   // IPv4-mapped, public embedded address
		"64:ff9b::101:101", // NAT64 of 1.1.1.1
		"2002:101:101::1",  // 6to4 of 1.1.1.1
	} {
		t.Run(a, func(t *testing.T) {
			if err := (Policy{}).CheckAddr(netip.MustParseAddr(a)); err != nil {
				t.Errorf("got %v, want nil", err)
			}
		})
	}
}

func TestPolicy_CheckAddr_AllowPrivate(t *testing.T) {
	p := Policy{AllowPrivate: []netip.Prefix{
		netip.MustParsePrefix("127.0.0.1/32"),
		netip.MustParsePrefix("10.1.2.0/24"),
		netip.MustParsePrefix("169.254.0.0/16"),
		netip.MustParsePrefix("fd00::/8"),
		netip.MustParsePrefix("0.0.0.0/8"),
		netip.MustParsePrefix("224.0.0.0/4"),
		netip.MustParsePrefix("240.0.0.0/4"),
		netip.MustParsePrefix("fe80::/10"),
	}}
	tests := []struct {
		name   string
		addr   string
		reason string // empty: allowed
	}{
		{"listed loopback", "127.0.0.1", ""},
		{"listed loopback ipv4-mapped", "::ffff:127.0.0.1", ""},
		{"unlisted loopback", "127.0.0.2", "loopback"},
		{"listed private", "10.1.2.3", ""},
		{"unlisted private", "10.1.3.1", "RFC 1918"},
		{"listed link-local", "169.254.1.1", ""},
		{"metadata under a listed prefix", "169.254.169.254", "metadata"},
		{"ecs metadata under a listed prefix", "169.254.170.2", "metadata"},
		{"listed unique local", "fd00::1", ""},
		{"v6 metadata under a listed prefix", "fd00:ec2::254", "metadata"},
		{"unspecified under a listed prefix", "0.0.0.0", "unspecified"},
		{"this network under a listed prefix", "0.0.0.1", "this network"},
		{"multicast under a listed prefix", "224.0.0.1", "multicast"},
		{"reserved under a listed prefix", "240.0.0.1", "reserved"},
		{"broadcast under a listed prefix", "255.255.255.255", "broadcast"},
		{"zone under a listed prefix", "fe80::1%eth0", "zone"},
		{"unlisted cgnat", "100.64.0.1", "CGNAT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.CheckAddr(netip.MustParseAddr(tt.addr))
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			wantDenied(t, err, tt.reason, tt.addr)
		})
	}
}

func BenchmarkPolicy_CheckAddr(b *testing.B) {
	p := Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("10.1.2.0/24")}}
	for _, a := range []string{"1.1.1.1", "2606:4700::1111", "::ffff:8.8.8.8", "10.1.2.3", "10.9.9.9"} {
		ip := netip.MustParseAddr(a)
		b.Run(a, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = p.CheckAddr(ip)
			}
		})
	}
}
